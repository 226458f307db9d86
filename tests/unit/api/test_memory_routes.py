"""``/v1/memory/{containers|images}/{owner}``: the tenant's admin, and the end user's app with a
client key (its container's memory only), list, recall, read, write, edit, export and delete what
agents keep; limits answer in the error shape; what a tool remembered is exported and deleted."""

from __future__ import annotations

import json

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.api.app import create_app
from agentvm.ports import MemoryLimits
from tests.security_harness import ManualClock, new_key, secure


@pytest.fixture
async def app(harness):
    secure(harness, ManualClock())
    c = await harness.client("acme")
    await c.request("container_create", containerId="user-alice")
    return create_app(harness.rt)


async def _client(harness, app, *scopes: str) -> httpx.AsyncClient:
    token = await new_key(harness.rt, "acme", *scopes)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://avm",
        headers={"Authorization": f"Bearer {token}"},
    )


ALICE = "/v1/memory/containers/user-alice"


async def test_an_admin_writes_lists_recalls_reads_edits_exports_and_deletes(harness, app):
    async with await _client(harness, app, "admin") as http:
        made = await http.post(ALICE, json={"text": "Prefers email", "topic": "contact"})
        assert made.status_code == 201
        item = made.json()
        assert (item["scope"], item["source"], item["topic"]) == ("container:user-alice", "api", "contact")
        other = (await http.post(ALICE, json={"text": "Lives in Lisbon"})).json()

        listed = (await http.get(ALICE)).json()
        assert [i["text"] for i in listed["items"]] == ["Prefers email", "Lives in Lisbon"]
        assert listed["usage"] == {"items": 2, "bytes": 13 + 7 + 15, "maxItems": 500, "maxBytes": 262144}
        found = (await http.get(ALICE, params={"q": "is it Lisbon?"})).json()
        assert [i["id"] for i in found["items"]] == [other["id"]]

        assert (await http.get(f"{ALICE}/{item['id']}")).json() == item
        edited = (await http.patch(f"{ALICE}/{item['id']}", json={"text": "Prefers phone calls"})).json()
        assert (edited["text"], edited["topic"]) == ("Prefers phone calls", "contact")
        untopiced = (await http.patch(f"{ALICE}/{item['id']}", json={"topic": None})).json()
        assert (untopiced["text"], untopiced["topic"]) == ("Prefers phone calls", None)

        exported = (await http.get(f"{ALICE}/export")).json()
        assert exported["scope"] == "container:user-alice"
        assert [i["text"] for i in exported["items"]] == ["Prefers phone calls", "Lives in Lisbon"]

        assert (await http.delete(f"{ALICE}/{other['id']}")).json()["id"] == other["id"]
        gone = await http.get(f"{ALICE}/{other['id']}")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
        assert (await http.delete(ALICE)).json() == {"scope": "container:user-alice", "deleted": 1}
        assert (await http.get(ALICE)).json()["items"] == []


async def test_the_end_users_client_key_reaches_its_containers_memory_not_the_image_scopes(harness, app):
    async with await _client(harness, app, "client") as http:
        mine = await http.post(ALICE, json={"text": "Call me Ali"})
        assert mine.status_code == 201 and mine.json()["source"] == "user"
        assert [i["text"] for i in (await http.get(ALICE)).json()["items"]] == ["Call me Ali"]
        assert (await http.get(f"{ALICE}/export")).status_code == 200
        assert (await http.delete(f"{ALICE}/{mine.json()['id']}")).status_code == 200
        for method in ("GET", "POST", "DELETE"):
            r = await http.request(method, "/v1/memory/images/support", json={"text": "x"})
            assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden"), method


async def test_an_image_scope_is_an_admins(harness, app):
    async with await _client(harness, app, "admin") as http:
        made = await http.post("/v1/memory/images/support", json={"text": "Refunds take 5 days"})
        assert made.status_code == 201 and made.json()["scope"] == "image:support"
        assert len((await http.get("/v1/memory/images/support")).json()["items"]) == 1
        assert (await http.get("/v1/memory/images/sales")).json()["items"] == []


async def test_missing_containers_full_scopes_and_bad_bodies_answer_in_the_error_shape(harness, app):
    harness.rt.memory_limits = MemoryLimits(max_items=1, max_bytes=1024)
    async with await _client(harness, app, "admin") as http:
        missing = await http.get("/v1/memory/containers/user-nobody")
        assert missing.status_code == 404 and "Container not found" in missing.json()["error"]["message"]
        assert (await http.post(ALICE, json={"text": "one"})).status_code == 201
        full = await http.post(ALICE, json={"text": "two"})
        assert full.status_code == 409
        assert full.json()["error"] | {"message": ""} == {
            "code": "memory_full",
            "message": "",
            "limit": 1,
            "used": 1,
        }
        for body in ({"text": ""}, {"text": 5}, {"text": "x" * 4001}, {"text": "x", "extra": 1}, {}):
            r = await http.post(ALICE, json=body)
            assert (r.status_code, r.json()["error"]["code"]) == (400, "bad_request"), body
        assert (await http.get("/v1/memory/elsewhere/user-alice")).status_code == 400
        harness.rt.memory = None
        off = await http.get(ALICE)
        assert off.status_code == 404 and "keeps no agent memory" in off.json()["error"]["message"]


async def test_what_a_tool_remembered_is_exported_and_deleted_then_forgotten_by_the_next_session(
    harness, app
):
    c = await harness.client("acme")
    config = {"name": "A", "tools": [{"type": "memory"}]}
    first = (await c.request("image_create", containerId="user-alice", config=config))["record"]
    harness.model.add(Calls(("remember", {"text": "Alice is vegetarian", "topic": "diet"})), "Noted.")
    await c.request("message_send", imageId=first["imageId"], content="I am vegetarian")
    await harness.run_turns()
    async with await _client(harness, app, "admin") as http:
        exported = (await http.get(f"{ALICE}/export")).json()
        assert [(i["text"], i["topic"], i["source"]) for i in exported["items"]] == [
            ("Alice is vegetarian", "diet", "tool")
        ]
        assert (await http.delete(f"{ALICE}/{exported['items'][0]['id']}")).status_code == 200
    second = (await c.request("image_create", containerId="user-alice", config={**config, "name": "B"}))[
        "record"
    ]
    harness.model.add(Calls(("recall", {"query": "diet vegetarian"})), "Nothing.")
    await c.request("message_send", imageId=second["imageId"], content="What do I eat?")
    await harness.run_turns()
    messages = (await c.request("image_messages", imageId=second["imageId"]))["messages"]
    result = next(m["toolResult"]["output"] for m in messages if m.get("toolResult"))
    assert json.loads(result["value"]) == {"memories": []}


async def test_a_session_export_carries_its_containers_memory_and_an_import_brings_it_once(harness, app):
    c = await harness.client("acme")
    img = (await c.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    async with await _client(harness, app, "admin") as http:
        await http.post(ALICE, json={"text": "Alice is vegetarian", "topic": "diet"})
        exported = await http.get(f"/v1/sessions/{img['sessionId']}/export")
        lines = [json.loads(line) for line in exported.text.splitlines()]
        memory = [line for line in lines if line["type"] == "memory"]
        assert [(m["text"], m["topic"], m["source"]) for m in memory] == [
            ("Alice is vegetarian", "diet", "api")
        ]
        assert lines[-1]["memory"] == 1 and "scope" not in memory[0]
        for status in (201, 200):  # imported twice (the second is the first's answer): remembered once
            made = await http.post("/v1/containers/user-bob/sessions/import", content=exported.content)
            assert made.status_code == status
        bob = (await http.get("/v1/memory/containers/user-bob")).json()["items"]
        assert [(i["text"], i["topic"], i["source"]) for i in bob] == [("Alice is vegetarian", "diet", "api")]
        # an export whose memory lines were edited badly is refused before anything is written
        broken = exported.text.replace('"Alice is vegetarian"', '""').replace(lines[-1]["sha256"], "")
        broken = broken.replace(',"sha256":""', "")
        refused = await http.post("/v1/containers/user-carol/sessions/import", content=broken.encode())
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_import")
