"""Export and import of sessions (``/v1/sessions/{id}/export``, ``/v1/containers/{id}/sessions/import``)
on both hosts: the local runtime on SQLite and the AWS runtime on moto (``aws_runtime``'s DynamoDB
adapters), through the HTTP app with real API keys.

A round trip gives an equal history; the same export imports once per container; a bad export is
refused with ``invalid_import`` and its line; a write that fails, or a writer that dies, leaves
nothing behind (after the lease, for the one that died)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.api.app import create_app
from agentvm.errors import ImportInProgress
from agentvm.records import SessionSummary, UsageRecord
from agentvm.sessions.imports import import_session
from agentvm.sessions.writer import LEASE_MS
from tests.security_harness import ManualClock
from tests.unit.security.test_tenant_attacks import RUNTIME_FACTORIES

if TYPE_CHECKING:
    from tests.unit.security.test_tenant_attacks import World


@pytest.fixture(params=RUNTIME_FACTORIES)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        from agentvm.agent.tools.sources import ToolSources

        w.rt.tools = w.rt.tools or ToolSources()
        yield w


TOOLED = {
    "name": "Helper",
    "systemPrompt": "Be brief.",
    "tools": [{"type": "builtin", "name": "calculator"}],
    "maxSteps": 5,
    "concurrency": "reject",
    "cadence": "economy",
    "sideModel": "scripted/side-1",
    "fastModel": "scripted/fast-1",
    "fastMaxChars": 40,
    "replyCache": {"enabled": True, "ttlS": 3600},
}


async def conversation(world: World, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """A session of tenant A with a plain turn and a tool turn."""
    a = await world.connect(world.tokens["tenant-a"])
    image = (await a.request("image_create", containerId="user-alice", config=config or TOOLED))["record"]
    world.model.add("Lisbon is lovely in May.")
    await a.request("message_send", imageId=image["imageId"], content="When should I visit Lisbon?")
    await world.run_turns()
    world.model.add(Calls(("calculator", {"expression": "6*7"}), text="Let me add."), "It is 42.")
    await a.request("message_send", imageId=image["imageId"], content="What is 6 times 7?")
    await world.run_turns()
    return image


async def messages_of(world: World, image_id: str, tenant: str = "tenant-a") -> list[dict[str, Any]]:
    c = await world.connect(world.tokens[tenant])
    return (await c.request("image_messages", imageId=image_id))["messages"]


def shape(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A history without its message ids: each parentId as the index of the message it names."""
    index = {m["id"]: i for i, m in enumerate(history)}
    out = []
    for m in history:
        m = {k: v for k, v in m.items() if k != "id"}
        if "parentId" in m:
            m["parentId"] = index[m["parentId"]]
        out.append(m)
    return out


async def export(world: World, session_id: str) -> bytes:
    async with world.http("tenant-a") as http:
        r = await http.get(f"/v1/sessions/{session_id}/export")
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
    return r.content


async def post_import(world: World, container: str, body: bytes, tenant: str = "tenant-a") -> Any:
    async with world.http(tenant) as http:
        return await http.post(
            f"/v1/containers/{container}/sessions/import",
            content=body,
            headers={"Content-Type": "application/x-ndjson"},
        )


async def test_an_export_imports_into_another_container_with_an_equal_history(world):
    image = await conversation(world)
    await world.rt.store.put_summary(
        SessionSummary(sessionId=image["sessionId"], upToSeq=2, text="They talked of Lisbon.", model="x/y")
    )
    body = await export(world, image["sessionId"])
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert [r["type"] for r in lines[:2]] == ["session", "image"] and lines[-1]["type"] == "end"
    assert lines[1]["config"] == {k: v for k, v in TOOLED.items()}
    assert "tenant-a" not in body.decode()  # an export names no tenant
    assert sum(r["type"] == "usage" for r in lines) == 3  # a turn, a tool turn's second step

    r = await post_import(world, "user-bob", body)
    assert r.status_code == 201, r.text
    imported = r.json()
    assert imported["created"] and imported["messages"] == lines[-1]["messages"]
    record = imported["record"]
    assert (record["containerId"], record["name"], record["systemPrompt"]) == (
        "user-bob",
        "Helper",
        "Be brief.",
    )
    assert record["imageId"] != image["imageId"] and record["sessionId"] != image["sessionId"]

    original, copy = await messages_of(world, image["imageId"]), await messages_of(world, record["imageId"])
    assert shape(copy) == shape(original)
    assert not {m["id"] for m in copy} & {m["id"] for m in original}
    stored = await world.rt.store.get_image("tenant-a", record["imageId"])
    source = await world.rt.store.get_image("tenant-a", image["imageId"])
    fields = (
        "tools",
        "maxSteps",
        "concurrency",
        "systemPrompt",
        "model",
        "mcpServers",
        "approval",
        "cadence",
        "sideModel",
        "fastModel",
        "fastMaxChars",
        "replyCache",
    )
    assert source is not None and source.replyCache == {"enabled": True, "ttlS": 3600}
    assert source is not None and (source.cadence, source.sideModel) == ("economy", "scripted/side-1")
    assert {f: getattr(stored, f) for f in fields} == {f: getattr(source, f) for f in fields}
    summary = await world.rt.store.get_summary(record["sessionId"])
    assert (summary.upToSeq, summary.text) == (2, "They talked of Lisbon.")
    a = await world.connect(world.tokens["tenant-a"])
    assert "user-bob" in (await a.request("container_list"))["containerIds"]

    # the copy goes on from its history: the model sees what was said
    world.model.add("Yes.")
    await a.request("message_send", imageId=record["imageId"], content="Still true?")
    await world.run_turns()
    seen = [t.text for t in world.model.requests[-1].messages if t.text]
    assert "It is 42." in seen and seen[-1] == "Still true?"


async def test_an_export_keeps_usage_a_worker_stamped_by_a_clock_behind_the_images_host(world):
    image = await conversation(world)
    skewed = UsageRecord(
        turnId="turn_skewed",
        tenantId="tenant-a",
        containerId="user-alice",
        imageId=image["imageId"],
        sessionId=image["sessionId"],
        model="x/y",
        inputTokens=1,
        createdAt=image["createdAt"] - 60_000,  # a minute before the image, by another clock
    )
    await world.rt.store.put_usage(skewed)
    lines = [json.loads(line) for line in (await export(world, image["sessionId"])).decode().splitlines()]
    assert "turn_skewed" in [r["turnId"] for r in lines if r["type"] == "usage"]
    assert sum(r["type"] == "usage" for r in lines) == 4


async def test_the_same_export_imports_once_per_container(world):
    image = await conversation(world)
    body = await export(world, image["sessionId"])
    first = (await post_import(world, "user-bob", body)).json()
    again = await post_import(world, "user-bob", body)
    assert again.status_code == 200 and again.json() == {**first, "created": False}
    assert len(await messages_of(world, first["record"]["imageId"])) == first["messages"]
    elsewhere = await post_import(world, "user-carol", body)
    assert (
        elsewhere.status_code == 201 and elsewhere.json()["record"]["imageId"] != first["record"]["imageId"]
    )
    # deleted since: the export imports afresh
    a = await world.connect(world.tokens["tenant-a"])
    await a.request("image_delete", imageId=first["record"]["imageId"])
    anew = await post_import(world, "user-bob", body)
    assert anew.status_code == 201 and anew.json()["record"]["imageId"] != first["record"]["imageId"]


def _lines(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.decode().splitlines()]


def _join(records: list[dict[str, Any]], *, fix_end: bool = True) -> bytes:
    """Records as an export again; the end line counts and hashes them anew (unless told not to)."""
    import hashlib

    head = b"".join(json.dumps(r).encode() + b"\n" for r in records[:-1])
    end = dict(records[-1])
    if fix_end:
        end["messages"] = sum(r["type"] == "message" for r in records)
        end["usage"] = sum(r["type"] == "usage" for r in records)
        end["sha256"] = hashlib.sha256(head).hexdigest()
    return head + json.dumps(end).encode() + b"\n"


def _edit(index: int, **changes: Any):
    def edit(records: list[dict[str, Any]]) -> bytes:
        records[index] = {**records[index], **changes}
        return _join(records)

    return edit


def _message(index: int, **changes: Any):
    def edit(records: list[dict[str, Any]]) -> bytes:
        records[index] = {**records[index], "message": {**records[index]["message"], **changes}}
        return _join(records)

    return edit


def _with_summary(records: list[dict[str, Any]], summary: dict[str, Any]) -> bytes:
    after = max(i for i, r in enumerate(records) if r["type"] == "message") + 1
    return _join([*records[:after], {"type": "summary", **summary}, *records[after:]])


BAD_EXPORTS = {
    "not UTF-8": (lambda r: b"\xff\xfe" + _join(r), None),
    "not JSON": (lambda r: _join(r).replace(b'"type": "image"', b'"type": image', 1), 2),
    "no header": (lambda r: _join(r[1:]), 1),
    "another format": (_edit(0, format="langchain"), 1),
    "a later version": (_edit(0, version=2), 1),
    "a bad export id": (_edit(0, exportId="../../etc"), 1),
    "no image line": (lambda r: _join([r[0], *r[2:]]), 2),
    "a seq gap": (_edit(3, seq=7), 4),
    "a malformed message": (_message(2, subtype="wizard"), 3),
    "a message without content": (
        lambda r: _join(
            [*r[:2], {**r[2], "message": {"id": "x", "timestamp": 1, "subtype": "user"}}, *r[3:]]
        ),
        3,
    ),
    "a repeated message id": (
        lambda r: _join(
            [*r[:3], {**r[3], "message": {**r[3]["message"], "id": r[2]["message"]["id"]}}, *r[4:]]
        ),
        4,
    ),
    "an unknown parent": (_message(3, parentId="msg_elsewhere"), 4),
    "an unsupported tool": (
        _edit(1, config={**TOOLED, "tools": [{"type": "http", "name": "x", "url": "ftp://x"}]}),
        2,
    ),
    "a definition to build": (_edit(1, config={**TOOLED, "agent": "resource://agents/x"}), 2),
    "cut short": (lambda r: _join(r)[: -len(json.dumps(r[-1])) - 1], None),
    "wrong counts": (lambda r: _join([*r[:-1], {**r[-1], "messages": 1}], fix_end=False), None),
    "a damaged body": (lambda r: _join(r).replace(b"Lisbon is lovely", b"Lisbon is awful", 1), None),
    "lines after the end": (lambda r: _join(r) + b'{"type": "message"}\n', None),
    "a summary past the messages": (
        lambda r: _with_summary(r, {"upToSeq": 99, "text": "x", "model": "m"}),
        None,
    ),
    "an empty body": (lambda r: b"", None),
}


async def test_bad_exports_are_refused_with_their_line_and_import_nothing(world):
    image = await conversation(world)
    body = await export(world, image["sessionId"])
    for case, (make, line) in BAD_EXPORTS.items():
        r = await post_import(world, "user-bob", make(_lines(body)))
        assert r.status_code == 400, (case, r.text)
        error = r.json()["error"]
        assert error["code"] == "invalid_import", (case, error)
        if line is not None:
            assert error["line"] == line, (case, error)
    a = await world.connect(world.tokens["tenant-a"])
    assert (await a.request("image_list", containerId="user-bob"))["records"] == []
    assert "user-bob" not in (await a.request("container_list"))["containerIds"]


async def test_an_import_over_the_body_limit_is_refused_before_it_is_read(world):
    body = b'{"type": "session"}\n' + b" " * world.rt.turns.max_body_bytes
    r = await post_import(world, "user-bob", body)
    assert (r.status_code, r.json()["error"]["code"]) == (413, "payload_too_large")


class Exploding(list):
    """A history whose iteration fails after ``at`` messages: a write cut off halfway."""

    def __init__(self, items: list[Any], at: int) -> None:
        super().__init__(items)
        self.at = at

    def __iter__(self):
        for i, item in enumerate(super().__iter__()):
            if i == self.at:
                raise OSError("the disk went away")
            yield item


class Crash(BaseException):
    """The process dies (nothing after it runs, not even clean-up)."""


@dataclasses.dataclass
class Faulty:
    """The session archive with one write made to fail: cut off after ``at`` messages, or (``crash``)
    the writer dying then, or (``crash_after``) dying once the whole write is stored."""

    inner: Any
    at: int = 0
    crash: bool = False
    crash_after: bool = False
    claims: list[Any] = dataclasses.field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def write_import(self, claim, image, session, messages, summary):
        self.claims.append(claim)
        if self.crash_after:
            done = await self.inner.write_import(claim, image, session, messages, summary)
            await self.inner.replace_import(done, claim)  # the "done" never got written
            raise Crash
        if self.crash:
            try:
                return await self.inner.write_import(
                    claim, image, session, Exploding(messages, self.at), summary
                )
            except OSError:
                raise Crash from None
        return await self.inner.write_import(claim, image, session, Exploding(messages, self.at), summary)


async def leftovers(world: World, claim: Any) -> tuple[Any, ...]:
    store = world.rt.store
    return (
        await store.get_image("tenant-a", claim.imageId),
        await store.get_session("tenant-a", claim.sessionId),
        await store.list_messages(claim.sessionId),
    )


async def test_a_write_that_fails_halfway_leaves_nothing_and_a_retry_imports_once(world):
    image = await conversation(world)
    body = await export(world, image["sessionId"])
    real = world.rt.sessions
    world.rt.sessions = faulty = Faulty(real, at=3)
    transport = httpx.ASGITransport(app=create_app(world.rt), raise_app_exceptions=False)
    headers = {"Authorization": f"Bearer {world.tokens['tenant-a']}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http:
        r = await http.post("/v1/containers/user-bob/sessions/import", content=body)
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"
    assert await leftovers(world, faulty.claims[0]) == (None, None, [])
    world.rt.sessions = real
    first = await post_import(world, "user-bob", body)
    assert first.status_code == 201
    again = await post_import(world, "user-bob", body)
    assert again.status_code == 200 and again.json()["record"] == first.json()["record"]
    a = await world.connect(world.tokens["tenant-a"])
    assert len((await a.request("image_list", containerId="user-bob"))["records"]) == 1


async def test_an_import_whose_writer_died_is_cleared_after_the_lease_and_imported_again(world):
    image = await conversation(world)
    body = await export(world, image["sessionId"])
    world.rt.clock = clock = ManualClock()
    real = world.rt.sessions
    world.rt.sessions = faulty = Faulty(real, at=3, crash=True)
    with pytest.raises(Crash):
        await import_session(world.rt, "tenant-a", "user-bob", body)
    dead = faulty.claims[0]
    world.rt.sessions = real
    with pytest.raises(ImportInProgress):  # its writer may still be at work
        await import_session(world.rt, "tenant-a", "user-bob", body)
    clock.advance(LEASE_MS / 1000 + 1)
    result = await import_session(world.rt, "tenant-a", "user-bob", body)
    assert result["created"] and result["record"]["imageId"] != dead.imageId
    assert await leftovers(world, dead) == (None, None, [])
    assert len(await messages_of(world, result["record"]["imageId"])) == result["messages"]


async def test_an_import_whose_writer_died_after_the_image_is_finished_by_a_retry(world):
    image = await conversation(world)
    body = await export(world, image["sessionId"])
    world.rt.clock = clock = ManualClock()
    real = world.rt.sessions
    world.rt.sessions = faulty = Faulty(real, crash_after=True)
    with pytest.raises(Crash):
        await import_session(world.rt, "tenant-a", "user-bob", body)
    world.rt.sessions = real
    clock.advance(LEASE_MS / 1000 + 1)
    result = await import_session(world.rt, "tenant-a", "user-bob", body)
    assert not result["created"] and result["record"]["imageId"] == faulty.claims[0].imageId


async def test_a_knowledge_tool_imports_only_where_its_resource_is_readable(world):
    async with world.http("tenant-a") as http:
        kb = {"documents": [{"title": "Plan", "text": "Our plan is to win."}]}
        assert (
            await http.post("/v1/resources", json={"kind": "knowledge", "name": "kb", "spec": kb})
        ).status_code == 201
        agent = {
            "kind": "agent",
            "name": "helper",
            "spec": {"systemPrompt": "Use the kb.", "knowledge": ["resource://knowledge/kb@1"]},
        }
        assert (await http.post("/v1/resources", json=agent)).status_code == 201
    image = await conversation(world, {"agent": "resource://agents/helper"})
    body = await export(world, image["sessionId"])
    records = _lines(body)
    assert records[1]["build"]["pins"] and records[1]["config"]["systemPrompt"] == "Use the kb."

    refused = await post_import(world, "user-bob", body, tenant="tenant-b")
    assert refused.status_code == 400
    assert (refused.json()["error"]["code"], refused.json()["error"]["line"]) == ("resource_unavailable", 2)
    b = await world.connect(world.tokens["tenant-b"])
    assert (await b.request("container_list"))["containerIds"] == []

    mine = await post_import(world, "user-bob", body)
    assert mine.status_code == 201
    copy = await world.rt.store.get_image("tenant-a", mine.json()["record"]["imageId"])
    source = await world.rt.store.get_image("tenant-a", image["imageId"])
    assert copy.tools == source.tools and copy.systemPrompt == "Use the kb."
    assert copy.build is None  # an inline snapshot: pinned to nothing, holding nothing
    assert mine.json()["record"].get("build") is None


async def test_an_export_of_another_tenant_or_of_nothing_is_not_found(world):
    image = await conversation(world)
    async with world.http("tenant-b") as http:
        foreign = await http.get(f"/v1/sessions/{image['sessionId']}/export")
        absent = await http.get("/v1/sessions/sess_missing/export")
    assert foreign.status_code == absent.status_code == 404
    assert foreign.json()["error"]["code"] == "not_found"
