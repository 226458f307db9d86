"""Knowledge uploads over HTTP (``/v1/knowledge``) on the local wiring, with the local host's
knowledge index (SQLite) and the cluster host's (PostgreSQL): real files into a draft,
published as a version, searched with citations, reached by an agent's search tool through the
scripted model; refusals with stable codes, limits, and the tenant's storage account."""

from __future__ import annotations

from contextlib import asynccontextmanager

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.api.app import create_app
from agentvm.ports import KnowledgeLimits
from tests import knowledge_files as files
from tests.harness import Harness
from tests.knowledge_files import BagOfWordsEmbedder
from tests.security_harness import ManualClock, new_key, secure

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@asynccontextmanager
async def sqlite_index(tmp_path):
    yield Harness(tmp_path)  # the harness's own index: SqliteKnowledgeIndex, as the local host's


@asynccontextmanager
async def postgres_index(tmp_path):
    # the cluster host's index (adapters/postgres/knowledge.py) in place of the harness's SQLite one
    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        h = Harness(tmp_path)
        h.rt.knowledge_index.close()  # type: ignore[union-attr]
        h.rt.knowledge_index = PostgresKnowledgeIndex(database)
        yield h


@pytest.fixture(
    params=[
        pytest.param(sqlite_index, id="sqlite"),
        pytest.param(postgres_index, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def world(request, tmp_path):
    async with request.param(tmp_path) as h:
        secure(h, ManualClock(), storage_bytes=10**7)
        tokens = {t: await new_key(h.rt, t, "admin") for t in ("acme", "other")}
        tokens["acme-client"] = await new_key(h.rt, "acme", "client")

        @asynccontextmanager
        async def http(who: str = "acme"):
            transport = httpx.ASGITransport(app=create_app(h.rt))
            headers = {"Authorization": f"Bearer {tokens[who]}"}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://avm", headers=headers
            ) as client:
                yield client

        yield h, http
        h.queue.close()
        h.store.close()


async def put_file(http, name: str, filename: str, data: bytes, media: str | None = None) -> httpx.Response:
    headers = {"Content-Type": media} if media else {}
    return await http.post(
        f"/v1/knowledge/{name}/documents", params={"filename": filename}, content=data, headers=headers
    )


def handbook_pdf() -> bytes:
    return files.pdf_with_outline(
        [
            "Welcome to Acme. This handbook explains how we work.",
            "Refunds are paid back to the original card within five business days of approval.",
            "Orders ship from Rotterdam. Express delivery takes two days inside the EU.",
        ],
        [("Billing", 1, None), ("Refunds", 1, "Billing"), ("Shipping", 2, None)],
    )


async def test_files_of_every_type_become_a_version_searched_with_citations(world):
    h, http = world
    async with http() as api:
        answers = [
            await put_file(api, "support/kb", "handbook.pdf", handbook_pdf(), PDF),
            await put_file(api, "support/kb", "staff guide.docx", files.docx(), DOCX),
            await put_file(api, "support/kb", "help.html", files.HTML.encode(), "text/html"),
            await put_file(api, "support/kb", "intro.md", files.MARKDOWN.encode()),
            await put_file(api, "support/kb", "notes.txt", b"Office plants are watered on Fridays."),
        ]
        assert [r.status_code for r in answers] == [201] * 5, [r.text for r in answers]
        assert [r.json()["document"]["type"] for r in answers] == ["pdf", "docx", "html", "markdown", "text"]
        assert answers[1].json()["document"]["title"] == "Staff guide"
        assert answers[-1].json()["draft"]["documents"] == 5
        listed = (await api.get("/v1/knowledge/support/kb/documents")).json()
        assert [d["id"] for d in listed["documents"]] == [
            "handbook.pdf",
            "help.html",
            "intro.md",
            "notes.txt",
            "staff guide.docx",
        ]
        published = await api.put("/v1/resources/knowledge/support/kb", json={"spec": {"draft": True}})
        assert published.status_code == 201, published.text
        version = published.json()["resource"]
        assert version["version"] == "1" and version["chunks"] >= 10
        assert [u["id"] for u in version["spec"]["uploads"]][:1] == ["handbook.pdf"]
        found = await api.post(
            "/v1/resources/search",
            json={"uri": "resource://knowledge/support/kb", "query": "refunds approval"},
        )
        answer = found.json()
        assert answer["mode"] == "words"  # no embedder on this host: said so
        best = answer["hits"][0]
        assert (best["documentId"], best["location"], best["headingPath"]) == (
            "handbook.pdf",
            "p.2",
            "Billing > Refunds",
        )
        assert best["citation"] == "[handbook.pdf p.2 — Billing > Refunds]"
        express = await api.post(
            "/v1/resources/search", json={"uri": "resource://knowledge/support/kb@1", "query": "express EU"}
        )
        cited = [hit["citation"] for hit in express.json()["hits"]]
        assert "[help.html — Shipping > Express]" in cited and "[handbook.pdf p.3 — Shipping]" in cited


async def test_an_agent_cites_uploaded_documents_through_its_search_tool(world):
    h, http = world
    async with http() as api:
        assert (await put_file(api, "handbook", "handbook.pdf", handbook_pdf(), PDF)).status_code == 201
        await api.put("/v1/resources/knowledge/handbook", json={"spec": {"draft": True}})
        agent = {
            "systemPrompt": "Answer from the handbook.",
            "knowledge": ["resource://knowledge/handbook@1"],
        }
        assert (
            await api.post("/v1/resources", json={"kind": "agent", "name": "support", "spec": agent})
        ).status_code == 201
    client = await h.client("acme")
    image = (
        await client.request("image_create", containerId="a", config={"agent": "resource://agents/support"})
    )["record"]
    h.model.add(Calls(("search_handbook", {"query": "how long do refunds take", "limit": 2})), "Five days.")
    await client.request("message_send", imageId=image["imageId"], content="How long do refunds take?")
    await h.run_turns()
    (result,) = h.model.requests[-1].messages[-1].tool_results
    assert not result.is_error
    assert result.content.startswith("[1] [handbook.pdf p.2 — Billing > Refunds]\nRefunds are paid back")


async def test_the_draft_changes_by_document_and_versions_keep_theirs(world):
    h, http = world
    async with http() as api:
        await put_file(api, "kb", "a.md", b"# Alpha\n\nThe alpha plan.")
        await put_file(api, "kb", "b.md", b"# Beta\n\nThe beta plan.")
        await api.put("/v1/resources/knowledge/kb", json={"spec": {"draft": True}})
        again = await put_file(api, "kb", "a.md", b"# Alpha\n\nThe alpha plan, revised for gamma.")
        assert again.json()["document"]["replaced"] is True and again.json()["draft"]["documents"] == 2
        gone = await api.delete("/v1/knowledge/kb/documents/b.md")
        assert gone.json() == {"deleted": "b.md"}
        missing = await api.delete("/v1/knowledge/kb/documents/b.md")
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
        second = (await api.put("/v1/resources/knowledge/kb", json={"spec": {"draft": True}})).json()[
            "resource"
        ]
        assert [u["id"] for u in second["spec"]["uploads"]] == ["a.md"]
        first = (await api.get("/v1/knowledge/kb/documents?version=1")).json()["documents"]
        assert [d["id"] for d in first] == ["a.md", "b.md"]
        search = {"uri": "resource://knowledge/kb@1", "query": "gamma beta"}
        assert [
            x["documentId"] for x in (await api.post("/v1/resources/search", json=search)).json()["hits"]
        ] == ["b.md"]
        search["uri"] = "resource://knowledge/kb@2"
        assert [
            x["documentId"] for x in (await api.post("/v1/resources/search", json=search)).json()["hits"]
        ] == ["a.md"]
        nowhere = await api.get("/v1/knowledge/kb/documents?version=9")
        assert nowhere.status_code == 404
        # deleting the version drops its chunks from the index
        assert (await api.delete("/v1/resources/knowledge/kb@1")).status_code == 200
        assert await h.rt.knowledge_index.documents("acme", "kb", "1") == []


@pytest.mark.parametrize(
    ("filename", "data", "media", "code"),
    [
        ("secret.pdf", files.encrypted_pdf(), PDF, "encrypted_document"),
        ("scan.pdf", files.scanned_pdf(), PDF, "no_text_layer"),
        ("broken.pdf", b"%PDF-1.7\n garbage", PDF, "invalid_document"),
        ("broken.docx", b"PK\x03\x04 not a real docx", DOCX, "invalid_document"),
        ("photo.jpg", b"\xff\xd8\xff\xe0 jpeg", "image/jpeg", "unsupported_document_type"),
        ("empty.txt", b"", "text/plain", "invalid_document"),
    ],
)
async def test_unreadable_files_are_refused_with_their_code_and_nothing_is_kept(
    world, filename, data, media, code
):
    h, http = world
    async with http() as api:
        refused = await put_file(api, "kb", filename, data, media)
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, code), refused.text
        assert (await api.get("/v1/knowledge/kb/documents")).json()["documents"] == []
    assert await h.rt.storage_quota.used("acme") == 0


async def test_files_over_the_limits_are_refused(world):
    h, http = world
    h.rt.knowledge_limits = KnowledgeLimits(max_file_bytes=1000, max_documents=2, max_bytes=40)
    async with http() as api:
        declared = await put_file(api, "kb", "big.txt", b"x " * 600)  # Content-Length: refused unread
        assert (declared.status_code, declared.json()["error"]["code"]) == (413, "payload_too_large")

        async def chunked():
            for _ in range(3):
                yield b"words " * 100

        streamed = await api.post(
            "/v1/knowledge/kb/documents", params={"filename": "big.txt"}, content=chunked()
        )
        assert (streamed.status_code, streamed.json()["error"]["code"]) == (413, "payload_too_large")
        assert (await put_file(api, "kb", "a.txt", b"one")).status_code == 201
        assert (await put_file(api, "kb", "b.txt", b"two")).status_code == 201
        assert (await put_file(api, "kb", "b.txt", b"two again")).status_code == 201  # a replacement
        third = await put_file(api, "kb", "c.txt", b"three")
        assert (third.status_code, third.json()["error"]["code"]) == (400, "document_too_large")
        assert "at most 2 documents" in third.json()["error"]["message"]
        text = await put_file(api, "kb", "b.txt", b"a replacement with more text than the draft may hold")
        assert (text.status_code, text.json()["error"]["code"]) == (400, "document_too_large")
        listed = (await api.get("/v1/knowledge/kb/documents")).json()["documents"]
        assert [d["bytes"] for d in listed] == [3, 9]


async def test_uploads_count_in_the_storage_account_and_are_given_back(world):
    h, http = world
    quota = h.rt.storage_quota
    text = b"Storage accounts count every byte. " * 100
    async with http() as api:
        first = (await put_file(api, "kb", "a.txt", text)).json()["document"]["bytes"]
        assert first > 3000 and await quota.used("acme") == first  # the extracted text's bytes
        await put_file(api, "kb", "a.txt", text[:35])  # replaced: the difference given back
        assert await quota.used("acme") == len(text[:35].strip())
        await api.delete("/v1/knowledge/kb/documents/a.txt")
        assert await quota.used("acme") == 0
    h.rt.storage_quota.limit_bytes = 500
    async with http() as api:
        full = await put_file(api, "kb", "a.txt", text)
        assert (full.status_code, full.json()["error"]["code"]) == (507, "storage_quota_exceeded")
        assert (await api.get("/v1/knowledge/kb/documents")).json()["documents"] == []


async def test_uploading_needs_the_admin_scope_and_publishing_needs_a_draft(world):
    h, http = world
    async with http("acme-client") as api:
        refused = await put_file(api, "kb", "a.txt", b"hello")
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")
        assert (await api.get("/v1/knowledge/kb/documents")).status_code == 200
    async with http() as api:
        empty = await api.put("/v1/resources/knowledge/kb", json={"spec": {"draft": True}})
        assert (empty.status_code, empty.json()["error"]["code"]) == (400, "invalid_resource")
        both = await api.put(
            "/v1/resources/knowledge/kb", json={"spec": {"draft": True, "documents": [{"text": "x"}]}}
        )
        assert (both.status_code, both.json()["error"]["code"]) == (400, "invalid_resource")
        forged = await api.put(
            "/v1/resources/knowledge/kb", json={"spec": {"uploads": [{"id": "x", "chunks": 1}]}}
        )
        assert (forged.status_code, forged.json()["error"]["code"]) == (400, "invalid_resource")
    async with http("other") as api:  # another tenant's draft is its own, and empty
        assert (await api.get("/v1/knowledge/kb/documents")).json()["documents"] == []


async def test_deleting_a_tenant_forgets_its_versions_and_drafts_in_the_index(world):
    h, http = world
    async with http() as api:
        await put_file(api, "kb", "a.md", b"# Alpha\n\nThe alpha plan.")
        await api.put("/v1/resources/knowledge/kb", json={"spec": {"draft": True}})
        await put_file(api, "drafted", "b.md", b"Never published.")
    async with http("other") as api:
        await put_file(api, "kb", "c.md", b"The other tenant's plan.")
    index = h.rt.knowledge_index
    assert await index.stats("acme", "kb") == (2, 2, 2 * len(b"The alpha plan."))  # draft + version 1
    assert await h.rt.resources.delete_tenant("acme") == 1
    assert await index.stats("acme", "kb") == (0, 0, 0)
    assert await index.stats("acme", "drafted") == (0, 0, 0)
    assert await index.stats("other", "kb") == (1, 1, len(b"The other tenant's plan."))


async def test_with_an_embedder_publishing_stores_vectors_and_search_fuses_them(world):
    h, http = world
    h.rt.embedder = embedder = BagOfWordsEmbedder()
    async with http() as api:
        await put_file(api, "kb", "handbook.pdf", handbook_pdf(), PDF)
        assert embedder.calls == []  # a draft is not embedded: a version is, once
        version = (await api.put("/v1/resources/knowledge/kb", json={"spec": {"draft": True}})).json()
        assert embedder.calls == [(3, "document")]
        found = await api.post(
            "/v1/resources/search", json={"uri": "resource://knowledge/kb", "query": "refunds"}
        )
        assert found.json()["mode"] == "hybrid"
        assert found.json()["hits"][0]["citation"] == "[handbook.pdf p.2 — Billing > Refunds]"
        assert version["resource"]["chunks"] == 3
        # another model's vectors are not comparable: the version is searched by words alone
        h.rt.embedder = BagOfWordsEmbedder()
        h.rt.embedder.model = "another-model"
        found = await api.post(
            "/v1/resources/search", json={"uri": "resource://knowledge/kb", "query": "refunds"}
        )
        assert found.json()["mode"] == "words"
