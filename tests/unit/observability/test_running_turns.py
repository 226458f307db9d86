"""``/v1/turns`` on both hosts (local SQLite, and the AWS runtime on moto): the turns queued, running
or suspended are listed with their model, age and tokens so far, and cancelled one or many (the
interrupt mechanism): a running turn keeps its partial reply and ends interrupted, a queued one
ends interrupted without calling the model, a suspended one is woken to end. Another tenant's
turns are neither listed nor cancellable. (The AWS host through its real handlers, with the
worker in its own Lambda: ``tests/functions/test_running_turns_aws.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from tests.security_harness import new_key
from tests.unit.security.test_tenant_attacks import RUNTIME_FACTORIES

LONG = " ".join(f"w{i}" for i in range(400))


@pytest.fixture(params=RUNTIME_FACTORIES)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        w.tokens["platform"] = await new_key(w.rt, "platform", "admin")
        w.app = create_app(w.rt)
        yield w


async def http(world, tenant: str, method: str, path: str, **kw: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=world.app)
    headers = {"Authorization": f"Bearer {world.tokens[tenant]}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
        return await client.request(method, path, **kw)


async def image(client, container: str = "user-alice", **config: Any) -> dict[str, Any]:
    created = await client.request(
        "image_create",
        containerId=container,
        config={"name": "A", "model": "anthropic/claude-haiku-4-5", **config},
    )
    return created["record"]


@contextlib.asynccontextmanager
async def turns_running(world):
    """The worker, in the background; waits for it to finish on exit."""
    task = asyncio.create_task(world.run_turns())
    try:
        yield task
    finally:
        await asyncio.wait_for(task, 30)


async def until(predicate, what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def listed(world, tenant: str = "tenant-a", **params: Any) -> list[dict[str, Any]]:
    r = await http(world, tenant, "GET", "/v1/turns", params=params)
    assert r.status_code == 200, r.text
    return r.json()["turns"]


async def test_a_long_turn_is_listed_cancelled_over_http_and_ends_interrupted_with_its_partial_reply(world):
    a = await world.connect(world.tokens["tenant-a"])
    img = await image(a)
    world.model.word_delay_s = 0.01
    world.model.add(LONG)
    sent = await a.request("message_send", imageId=img["imageId"], content="tell me a long story")
    assert "code" not in sent
    [queued] = await listed(world)
    assert (queued["status"], queued["containerId"], queued["model"]) == (
        "queued",
        "user-alice",
        "anthropic/claude-haiku-4-5",
    )
    assert queued["tokens"]["calls"] == 0 and queued["ageMs"] >= 0

    async with turns_running(world):

        async def streaming():
            turns = await listed(world, status="running")
            return turns if turns and turns[0].get("streamingOutputTokens", 0) >= 5 else None

        [running] = await until(streaming, "the turn streams")
        assert running["turnId"] == queued["turnId"] and running["imageId"] == img["imageId"]
        cancelled = await http(world, "tenant-a", "POST", f"/v1/turns/{running['turnId']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json() == {"turnId": running["turnId"], "status": "running"}

    assert await listed(world) == []
    assert (await world.rt.store.get_turn(running["turnId"])).status == "interrupted"
    history = (await a.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant"]
    partial = history[1]["content"][0]["text"]
    assert partial and len(partial.split()) < 400 and LONG.startswith(partial)
    [usage] = await world.rt.store.list_usage("tenant-a")
    assert usage.status == "interrupted" and usage.outputTokens == len(partial.split())
    assert "interrupted" in [f["type"] for f in a.session_events()]


async def test_cancelling_a_container_stops_its_running_and_queued_turns_in_one_session(world):
    a = await world.connect(world.tokens["tenant-a"])
    img = await image(a)
    other = await image(a, container="user-bob")
    world.model.word_delay_s = 0.01
    world.model.add(LONG)  # only the first turn may reach the model
    for text in ("first", "second"):
        await a.request("message_send", imageId=img["imageId"], content=text)
    assert len(await listed(world, containerId="user-alice")) == 2

    async with turns_running(world):

        async def running():
            return [t for t in await listed(world, containerId="user-alice") if t["status"] == "running"]

        await until(running, "the first turn runs")
        r = await http(world, "tenant-a", "POST", "/v1/turns/cancel", json={"containerId": "user-alice"})
        body = r.json()
        assert r.status_code == 200 and body["notFound"] == []
        assert sorted(t["status"] for t in body["cancelled"]) == ["queued", "running"]

    statuses = [(await world.rt.store.get_turn(t["turnId"])).status for t in body["cancelled"]]
    assert statuses == ["interrupted", "interrupted"]
    assert len(world.model.requests) == 1  # the queued turn never called the model
    assert other["imageId"] and await listed(world) == []


async def test_a_suspended_turn_is_listed_with_its_wait_and_cancelled(world):
    world.rt.tools = ToolSources()
    a = await world.connect(world.tokens["tenant-a"])
    guarded = await image(a, tools=[{"type": "builtin", "name": "calculator"}], approval={"tools": "*"})
    world.model.add(Calls(("calculator", {"expression": "1+1"})))
    await a.request("message_send", imageId=guarded["imageId"], content="add, once approved")
    await world.run_turns()

    [suspended] = await listed(world)
    assert suspended["status"] == "suspended" and suspended["tokens"]["calls"] == 1
    assert suspended["tokens"]["outputTokens"] > 0
    assert [(w["toolName"], w["kind"]) for w in suspended["waitingFor"]] == [("calculator", "approval")]

    r = await http(
        world, "tenant-a", "POST", "/v1/turns/cancel", json={"turnIds": [suspended["turnId"], "turn_x"]}
    )
    assert r.json() == {
        "cancelled": [{"turnId": suspended["turnId"], "status": "suspended"}],
        "notFound": ["turn_x"],
    }
    await world.run_turns()  # the continuation the cancelled wait enqueued ends the turn

    assert (await world.rt.store.get_turn(suspended["turnId"])).status == "interrupted"
    assert await listed(world) == []


async def test_another_tenants_turns_are_neither_listed_nor_cancellable(world):
    a = await world.connect(world.tokens["tenant-a"])
    img = await image(a)
    await a.request("message_send", imageId=img["imageId"], content="private")
    [mine] = await listed(world)

    assert await listed(world, "tenant-b") == []
    assert await listed(world, "tenant-b", containerId="user-alice") == []
    foreign = await http(world, "tenant-b", "POST", f"/v1/turns/{mine['turnId']}/cancel")
    absent = await http(world, "tenant-b", "POST", "/v1/turns/turn_missing_0000/cancel")
    assert foreign.status_code == absent.status_code == 404
    assert foreign.json()["error"]["code"] == absent.json()["error"]["code"] == "not_found"
    many = await http(world, "tenant-b", "POST", "/v1/turns/cancel", json={"turnIds": [mine["turnId"]]})
    assert many.json() == {"cancelled": [], "notFound": [mine["turnId"]]}
    everything = await http(world, "tenant-b", "POST", "/v1/turns/cancel", json={"all": True})
    assert everything.json() == {"cancelled": [], "notFound": []}
    for path in ("/v1/turns?tenantId=tenant-a", f"/v1/turns/{mine['turnId']}/cancel?tenantId=tenant-a"):
        method = "GET" if path.startswith("/v1/turns?") else "POST"
        refused = await http(world, "tenant-b", method, path)
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")
    assert [t["turnId"] for t in await listed(world)] == [mine["turnId"]]
    assert not await world.rt.store.is_cancel_requested(img["sessionId"], mine["turnId"])
    # platform admins see and stop any tenant's turns
    assert [t["turnId"] for t in await listed(world, "platform", tenantId="tenant-a")] == [mine["turnId"]]
    r = await http(world, "platform", "POST", "/v1/turns/cancel", json={"all": True, "tenantId": "tenant-a"})
    assert r.json()["cancelled"] == [{"turnId": mine["turnId"], "status": "queued"}]
    await world.run_turns()
    assert await listed(world) == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/turns?status=done", None),
        ("POST", "/v1/turns/cancel", {}),
        ("POST", "/v1/turns/cancel", {"all": True, "containerId": "c"}),
        ("POST", "/v1/turns/cancel", {"turnIds": "turn_1"}),
        ("POST", "/v1/turns/cancel", {"turnIds": [f"turn_{i}" for i in range(101)]}),
        ("POST", "/v1/turns/cancel", {"all": "yes"}),
        ("POST", "/v1/turns/cancel", {"all": True, "force": True}),
    ],
)
async def test_bad_requests_are_refused_with_the_field_named(world, method, path, body):
    r = await http(world, "tenant-a", method, path, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "bad_request" and r.json()["error"]["message"]
