"""ResourceX compatibility (``/v1/registry/*``) on the local wiring: Deepractice AgentVM's routes
and shapes over the resource centre, both locator grammars, every registry type, the tenant's own
namespace, and bad input answered with stable codes. The AWS twin is
``tests/functions/test_registry_aws.py``; the locator grammar alone is ``test_registry_locator.py``."""

from __future__ import annotations

import base64
from contextlib import asynccontextmanager

import httpx
import pytest

from agentvm.api.app import create_app
from tests.harness import Harness
from tests.security_harness import ManualClock, new_key, secure

ASSISTANT = "deepractice.ai/prompts/assistant.prompt@1.0.0"


@pytest.fixture
async def world(tmp_path):
    h = Harness(tmp_path)
    secure(h, ManualClock())
    tokens = {t: await new_key(h.rt, t, "admin") for t in ("acme", "other", "platform")}
    tokens["acme-client"] = await new_key(h.rt, "acme", "client")

    @asynccontextmanager
    async def http(who: str = "acme"):
        transport = httpx.ASGITransport(app=create_app(h.rt))
        headers = {"Authorization": f"Bearer {tokens[who]}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
            yield client

    return http


async def test_a_prompt_round_trips_through_deepractice_routes(world):
    async with world() as http:
        made = await http.post(
            "/v1/registry/publish",
            json={
                "locator": ASSISTANT,
                "content": "You help {{product}} users.",
                "description": "The assistant",
                "tags": ["stable"],
            },
        )
        assert made.status_code == 201
        body = made.json()
        assert (
            body["locator"] == ASSISTANT
            and body["uri"] == "resource://prompts/deepractice.ai/prompts/assistant@1.0.0"
        )
        assert (body["domain"], body["path"], body["name"], body["type"], body["version"]) == (
            "deepractice.ai",
            "prompts",
            "assistant",
            "prompt",
            "1.0.0",
        )
        assert body["tags"] == ["stable"] and body["digest"].startswith("sha256:")

        found = (await http.get("/v1/registry/resource", params={"locator": ASSISTANT})).json()
        assert found["locator"] == ASSISTANT
        assert found["manifest"] == {
            "domain": "deepractice.ai",
            "path": "prompts",
            "name": "assistant",
            "type": "prompt",
            "version": "1.0.0",
            "digest": body["digest"],
            "description": "The assistant",
        }
        assert found["schema"] == {
            "type": "object",
            "properties": {"product": {"type": "string"}},
            "additionalProperties": False,
        }
        raw = (await http.post("/v1/registry/resolve", json={"locator": ASSISTANT})).json()
        assert raw["content"] == "You help {{product}} users."  # as stored, like ResourceX
        filled = await http.post(
            "/v1/registry/resolve", json={"locator": ASSISTANT, "args": {"product": "Acme"}}
        )
        assert filled.json()["content"] == "You help Acme users."
        unknown = await http.post("/v1/registry/resolve", json={"locator": ASSISTANT, "args": {"city": "x"}})
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (400, "invalid_resource")

        # the same resource through the resource centre, and under every spelling of its locator
        centre = await http.get("/v1/resources/prompts/deepractice.ai/prompts/assistant@stable")
        assert centre.json()["resource"]["spec"]["template"] == "You help {{product}} users."
        for spelling in (
            "deepractice.ai/prompts/assistant.prompt",
            "deepractice.ai/prompts/assistant.template@latest",
            "deepractice.ai/prompts/assistant:stable",
            "deepractice.ai/prompts/assistant:1.0.0",
            f"deepractice.ai/prompts/assistant@{body['digest']}",
        ):
            assert (await http.get("/v1/registry/exists", params={"locator": spelling})).json() == {
                "exists": True
            }, spelling
        assert (
            await http.get("/v1/registry/exists", params={"locator": "deepractice.ai/prompts/x.prompt"})
        ).json() == {"exists": False}

        assert (await http.post("/v1/registry/delete", json={"locator": ASSISTANT})).json() == {
            "deleted": True
        }
        again = await http.post("/v1/registry/delete", json={"locator": ASSISTANT})
        assert (again.status_code, again.json()["error"]["code"]) == (404, "not_found")
        assert "Resource not found: " + ASSISTANT in again.json()["error"]["message"]
        gone = await http.get("/v1/registry/resource", params={"locator": ASSISTANT})
        assert gone.status_code == 404


async def test_tags_versions_and_digests_in_the_docker_style_grammar(world):
    async with world() as http:
        first = await http.post(
            "/v1/registry/publish",
            json={"locator": "localhost/settings:stable", "type": "json", "content": '{"retries": 3}'},
        )
        assert first.status_code == 201 and first.json()["version"] == "1"
        assert first.json()["locator"] == "localhost/settings.json@1"
        second = await http.post(
            "/v1/registry/publish",
            json={"locator": "settings:stable", "type": "json", "content": {"retries": 5}},
        )
        assert second.json()["version"] == "2"

        async def content(locator: str) -> object:
            answer = await http.post("/v1/registry/resolve", json={"locator": locator})
            assert answer.status_code == 200, answer.text
            return answer.json()["content"]

        assert await content("settings:stable") == {"retries": 5}  # the tag moved
        assert await content("localhost/settings:1") == {"retries": 3}
        assert await content("localhost:3098/settings:latest") == {"retries": 5}  # the port is the registry's
        assert await content(f"settings@{first.json()['digest']}") == {"retries": 3}
        assert await content(f"settings:1@{first.json()['digest']}") == {"retries": 3}
        mismatch = await http.post(
            "/v1/registry/resolve", json={"locator": f"settings:2@{first.json()['digest']}"}
        )
        assert mismatch.status_code == 404

        exact = await http.post("/v1/registry/publish", json={"locator": "settings.json@2", "content": {}})
        assert (exact.status_code, exact.json()["error"]["code"]) == (409, "version_exists")
        by_tag = await http.post("/v1/registry/delete", json={"locator": "settings:stable"})
        assert (by_tag.status_code, by_tag.json()["error"]["code"]) == (400, "invalid_locator")
        assert (await http.post("/v1/registry/delete", json={"locator": "settings.json@1"})).json() == {
            "deleted": True
        }
        assert (await http.get("/v1/registry/exists", params={"locator": "settings:1"})).json() == {
            "exists": False
        }
        assert await content("settings") == {"retries": 5}


async def test_every_registry_type_stores_and_resolves_its_content(world):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00binary").decode()
    uploads = [
        ("notes/readme.text@1", "plain text", "plain text"),
        ("notes/readme2.txt@1", "also text", "also text"),
        ("config/limits.json@1", '{"max": [1, null]}', {"max": [1, None]}),
        ("config/name.json@1", '"just a string"', "just a string"),
        ("assets/logo.binary@1", png, png),
        ("skills/review.skill@1", "# Review\nRead the diff.", "# Review\nRead the diff."),
        (
            "tools/calc.tool@1",
            {"tool": {"type": "builtin", "name": "calculator"}},
            {"tool": {"type": "builtin", "name": "calculator"}},
        ),
        (  # a spec as validated: the defaults filled in
            "profiles/small.sandbox@1",
            '{"memoryMb": 256}',
            {
                "memoryMb": 256,
                "wallS": 30.0,
                "cpuS": 20,
                "outputBytes": 65536,
                "processes": 128,
                "packages": [],
            },
        ),
    ]
    async with world() as http:
        for locator, sent, _ in uploads:
            made = await http.post("/v1/registry/publish", json={"locator": locator, "content": sent})
            assert made.status_code == 201, (locator, made.text)
        for locator, _, expected in uploads:
            resolved = (await http.post("/v1/registry/resolve", json={"locator": locator})).json()
            assert resolved["content"] == expected, locator
        assert (await http.get("/v1/registry/resource", params={"locator": "assets/logo@1"})).json()[
            "manifest"
        ]["type"] == "binary"
        # kinds as the resource centre sees them
        files = (await http.get("/v1/resources?kind=file")).json()["resources"]
        assert {f["name"]: f["type"] for f in files} == {
            "notes/readme": "text",
            "notes/readme2": "text",
            "config/limits": "json",
            "config/name": "json",
            "assets/logo": "binary",
            "skills/review": "skill",
        }
        tool = await http.get("/v1/resources/tools/tools/calc@1")
        assert tool.json()["resource"]["spec"]["tool"]["name"] == "calculator"

        # a file keeps its type; a locator's type must match
        changed = await http.post(
            "/v1/registry/publish", json={"locator": "notes/readme.json@2", "content": {}}
        )
        assert (changed.status_code, changed.json()["error"]["code"]) == (400, "invalid_resource")
        assert "is a text file" in changed.json()["error"]["message"]
        wrong = await http.get("/v1/registry/resource", params={"locator": "notes/readme.json"})
        assert wrong.status_code == 404
        # one name as a prompt and as a file: the Docker-style locator (no type) is ambiguous
        await http.post("/v1/registry/publish", json={"locator": "notes/readme.prompt", "content": "hi"})
        ambiguous = await http.get("/v1/registry/resource", params={"locator": "notes/readme:latest"})
        assert (ambiguous.status_code, ambiguous.json()["error"]["code"]) == (400, "invalid_locator")
        assert "prompt, text" in ambiguous.json()["error"]["message"]

        types = (await http.get("/v1/registry/types")).json()["types"]
        assert {t["name"] for t in types} >= {"prompt", "text", "json", "binary", "skill"}
        assert next(t for t in types if t["name"] == "prompt")["aliases"] == ["template", "system-prompt"]


async def test_search_matches_domain_path_name_and_type_with_a_real_total(world):
    async with world() as http:
        for i in range(5):
            await http.post(
                "/v1/registry/publish", json={"locator": f"acme.dev/prompts/p{i}.prompt@1", "content": "x"}
            )
        await http.post("/v1/registry/publish", json={"locator": "acme.dev/data/d.json@1", "content": {}})
        await http.post(
            "/v1/resources",
            json={"kind": "prompt", "name": "support/greeting", "spec": {"template": "Hello"}},
        )

        page = (
            await http.get("/v1/registry/search", params={"query": "PROMPTS", "limit": 2, "offset": 2})
        ).json()
        assert page["total"] == 5 and (page["limit"], page["offset"]) == (2, 2)
        assert [r["name"] for r in page["results"]] == ["p2", "p3"]
        assert page["results"][0] == {
            "locator": "acme.dev/prompts/p2.prompt@1",
            "domain": "acme.dev",
            "path": "prompts",
            "name": "p2",
            "type": "prompt",
            "version": "1",
        }
        by_type = (await http.get("/v1/registry/search", params={"query": "json"})).json()
        assert [r["locator"] for r in by_type["results"]] == ["acme.dev/data/d.json@1"]
        everything = (await http.get("/v1/registry/search")).json()
        assert everything["total"] == 7
        # a resource published through /v1/resources shows with this registry's domain
        [greeting] = (await http.get("/v1/registry/search", params={"query": "greeting"})).json()["results"]
        assert (
            greeting["locator"] == "localhost/support/greeting.prompt@1" and greeting["domain"] == "localhost"
        )
        resolved = await http.post("/v1/registry/resolve", json={"locator": greeting["locator"]})
        assert resolved.json()["content"] == "Hello"

        for bad in ({"limit": 0}, {"limit": 101}, {"offset": -1}, {"limit": "x"}):
            refused = await http.get("/v1/registry/search", params=bad)
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, "bad_request"), bad


async def test_registry_prompts_feed_agent_definitions_and_deletion_respects_dependents(world):
    async with world() as http:
        await http.post(
            "/v1/registry/publish", json={"locator": "team/greeting.prompt@1", "content": "Be kind."}
        )
        agent = {
            "kind": "agent",
            "name": "helper",
            "spec": {"prompt": {"uri": "resource://prompts/team/greeting@1"}},
        }
        assert (await http.post("/v1/resources", json=agent)).status_code == 201
        held = await http.post("/v1/registry/delete", json={"locator": "team/greeting.prompt"})
        assert (held.status_code, held.json()["error"]["code"]) == (409, "resource_in_use")
        assert held.json()["error"]["dependents"] == ["resource://agents/helper@1"]
        resolved = (
            await http.get("/v1/resources/resolve", params={"uri": "resource://agents/helper"})
        ).json()
        assert (
            resolved["dependencies"]["resource://prompts/team/greeting@1"]["spec"]["template"] == "Be kind."
        )


async def test_platform_resources_are_readable_but_not_deletable_by_tenants(world):
    async with world("platform") as http:
        await http.post(
            "/v1/registry/publish", json={"locator": "deepractice.ai/shared/tone.text@1", "content": "calm"}
        )
    async with world() as http:
        resolved = await http.post(
            "/v1/registry/resolve", json={"locator": "deepractice.ai/shared/tone.text@1"}
        )
        assert resolved.json()["content"] == "calm"
        refused = await http.post(
            "/v1/registry/delete", json={"locator": "deepractice.ai/shared/tone.text@1"}
        )
        assert refused.status_code == 404
    async with world("platform") as http:
        assert (
            await http.get("/v1/registry/exists", params={"locator": "deepractice.ai/shared/tone.text"})
        ).json()["exists"]


async def test_a_client_key_reads_and_only_an_admin_key_writes(world):
    async with world() as http:
        await http.post("/v1/registry/publish", json={"locator": "team/tone.text@1", "content": "calm"})
    async with world("acme-client") as http:
        assert (await http.post("/v1/registry/resolve", json={"locator": "team/tone.text@1"})).json()[
            "content"
        ] == "calm"
        for path, body in (
            ("/v1/registry/publish", {"locator": "team/tone.text@2", "content": "x"}),
            ("/v1/registry/link", {"locator": "team/tone.text@2", "content": "x"}),
            ("/v1/registry/delete", {"locator": "team/tone.text@1"}),
        ):
            refused = await http.post(path, json=body)
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden"), path


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/v1/registry/link", {"folderPath": "/home/me/prompts/assistant"}, 400, "folder_path_unsupported"),
        ("/v1/registry/publish", {"content": "x"}, 400, "bad_request"),
        ("/v1/registry/publish", {"locator": "a.prompt@1"}, 400, "bad_request"),
        ("/v1/registry/publish", {"locator": "a@1", "content": "x"}, 400, "bad_request"),  # no type
        ("/v1/registry/publish", {"locator": "a.text@1", "type": "json", "content": "x"}, 400, "bad_request"),
        ("/v1/registry/publish", {"locator": "a@1", "type": "video", "content": "x"}, 400, "invalid_locator"),
        (
            "/v1/registry/publish",
            {"locator": "a.text@sha256:" + "0" * 64, "content": "x"},
            400,
            "invalid_locator",
        ),
        (
            "/v1/registry/publish",
            {"locator": "a.binary@1", "content": "not base64!"},
            400,
            "invalid_resource",
        ),
        ("/v1/registry/publish", {"locator": "a.text@1", "content": 3}, 400, "invalid_resource"),
        ("/v1/registry/publish", {"locator": "a.prompt@1", "content": {"x": 1}}, 400, "invalid_resource"),
        ("/v1/registry/publish", {"locator": "a.prompt@1", "content": ""}, 400, "invalid_resource"),
        ("/v1/registry/publish", {"locator": "a.json@1", "content": "{not json"}, 400, "invalid_resource"),
        ("/v1/registry/publish", {"locator": "a.tool@1", "content": "[]"}, 400, "invalid_resource"),
        ("/v1/registry/publish", {"locator": "a.text@1", "content": "x" * 300_000}, 400, "invalid_resource"),
        ("/v1/registry/publish", {"locator": "a.text@v1.x!", "content": "x"}, 400, "invalid_locator"),
        ("/v1/registry/publish", {"locator": "a.text@1", "content": "x", "extra": 1}, 400, "bad_request"),
        ("/v1/registry/resolve", {"locator": "a.text@1", "args": []}, 400, "bad_request"),
        ("/v1/registry/resolve", {}, 400, "bad_request"),
        ("/v1/registry/delete", {"locator": 7}, 400, "bad_request"),
    ],
)
async def test_bad_uploads_are_refused_with_stable_codes(world, path, body, status, code):
    async with world() as http:
        refused = await http.post(path, json=body)
        assert (refused.status_code, refused.json()["error"]["code"]) == (status, code), refused.text
        assert (await http.get("/v1/resources")).json()["resources"] == []  # nothing half-published


@pytest.mark.parametrize(
    "locator",
    [
        "a;rm -rf.text",
        "a|b.text",
        "a&b.text",
        "$HOME.text",
        "`id`.text",
        "a\nb.text",
        "a\rb.text",
        "a\0b.text",
        "a\\b.text",
        "/etc/passwd.text",
        "team/../other/x.text",
        "x" * 257,
        "a//b.text",
        "a b.text",
        "a:b:c",
        "a@",
        "a@1@2",
        "a@sha256:xyz",
        "",
    ],
)
async def test_bad_locators_are_refused_before_any_lookup(world, locator):
    async with world() as http:
        for answer in (
            await http.get("/v1/registry/resource", params={"locator": locator}),
            await http.get("/v1/registry/exists", params={"locator": locator}),
            await http.post("/v1/registry/resolve", json={"locator": locator}),
            await http.post("/v1/registry/delete", json={"locator": locator}),
            await http.post("/v1/registry/publish", json={"locator": locator, "content": "x"}),
        ):
            assert answer.status_code == 400, (locator, answer.text)
            assert answer.json()["error"]["code"] in ("invalid_locator", "bad_request")


async def test_a_missing_locator_is_a_clear_400(world):
    async with world() as http:
        for path in ("/v1/registry/resource", "/v1/registry/exists"):
            refused = await http.get(path)
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, "bad_request")
            assert "locator" in refused.json()["error"]["message"]
