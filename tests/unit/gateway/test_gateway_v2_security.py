"""AgentX v2 (JSON-RPC 2.0) under v1's rules: the ``auth`` notification, revoked keys, the key's
rate limit, budgets, and the local host's frame-rate refusals, answered as JSON-RPC errors."""

from __future__ import annotations

import json

import pytest

from agentvm.errors import RateLimited
from agentvm.gateway.dispatch import refuse_frame
from tests.security_harness import ManualClock, keyed_v2_client, new_key, secure
from tests.v2_client import V2Client, rpc


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def sec(harness, clock):
    return secure(harness, clock)


async def _anonymous(harness) -> V2Client:
    from agentvm.ports import ConnectionInfo

    await harness.rt.connections.register(ConnectionInfo("anon_v2", None, harness.rt.clock.now_ms()))
    return V2Client(harness.rt, harness.push, "anon_v2")


async def test_a_v2_connection_authenticates_with_an_auth_notification(harness, sec):
    token = await new_key(harness.rt, "acme")
    c = await _anonymous(harness)
    refused = await c.call_raw("container.list")
    assert refused["error"] == {
        "code": 401,
        "message": "connection is not authenticated",
        "data": {"code": "unauthorized"},
    }
    assert await c.notify("container.list") == []  # a notification: no answer, even refused
    (bad,) = await c.notify("auth", headers={"Authorization": "Bearer avm_nope_nope"})
    assert bad["id"] is None and bad["error"]["code"] == 401  # a failed auth is answered
    assert await c.notify("auth", headers={"Authorization": f"Bearer {token}"}) == []
    assert await c.call("container.list") == {"containerIds": []}
    assert (await harness.rt.connections.get("anon_v2")).tenant_id == "acme"  # type: ignore[union-attr]
    assert (await c.call("auth", headers={"Authorization": f"Bearer {token}"})) == {"authenticated": True}
    other = await new_key(harness.rt, "globex")
    switched = await c.call_raw("runtime.auth", {"headers": {"Authorization": f"Bearer {other}"}})
    assert switched["error"]["code"] == 401  # a connection cannot change tenant


async def test_a_revoked_key_stops_a_live_v2_connection_within_the_cache_bound(harness, sec, clock):
    token = await new_key(harness.rt, "acme")
    c = await keyed_v2_client(harness, token)
    await sec.auth.keys.store.revoke_key(token.split("_")[1], revoked_at=clock.now_ms())
    assert "result" in await c.call_raw("container.list")
    clock.advance(sec.auth.cache_s)
    assert (await c.call_raw("container.list"))["error"]["data"]["code"] == "unauthorized"


async def test_v2_requests_count_against_the_keys_rate_limit(harness, sec, clock):
    token = await new_key(harness.rt, "acme", rate_limit_per_minute=3)
    c = await keyed_v2_client(harness, token)  # its auth notification is one
    clock.ms = (clock.ms // 60_000) * 60_000 + 10_000
    (batch,) = await c.send([rpc("container.list", {}, id=i) for i in range(4)])
    assert ["result" in r for r in batch] == [True, True, True, False]
    assert batch[3]["error"] == {
        "code": 429,
        "message": batch[3]["error"]["message"],
        "data": {"code": "rate_limited", "limit": 3, "resetAt": (clock.ms // 60_000 + 1) * 60_000},
    }


async def test_message_send_over_budget_is_refused_with_429_and_stores_nothing(harness, sec):
    token = await new_key(harness.rt, "acme")
    c = await keyed_v2_client(harness, token)
    img = (await c.call("image.create", name="A"))["record"]
    await sec.budgets.set("acme", None, daily_tokens=None, monthly_tokens=10)
    await sec.budgets.record("acme", "default", 10)
    refused = await c.call_raw("message.send", {"imageId": img["imageId"], "content": "hi"})
    assert refused["error"]["code"] == 429 and refused["error"]["data"]["code"] == "quota_exceeded"
    assert {"limit", "resetAt"} <= set(refused["error"]["data"])
    assert (await c.call("image.messages", imageId=img["imageId"]))["messages"] == []


def test_a_json_rpc_frame_over_the_local_frame_rate_is_refused_in_json_rpc(harness):
    exc = RateLimited("slow down", limit=50, reset_at_ms=1)
    (v2,) = refuse_frame(harness.rt, json.dumps(rpc("image.list", {}, id="x1")), exc)
    assert json.loads(v2) == {
        "jsonrpc": "2.0",
        "id": "x1",
        "error": {
            "code": 429,
            "message": "slow down",
            "data": {"code": "rate_limited", "limit": 50, "resetAt": 1},
        },
    }
    (v1_error, v1_response) = refuse_frame(
        harness.rt, '{"type":"image_list_request","data":{"requestId":"r9"}}', exc
    )
    assert json.loads(v1_response)["data"]["requestId"] == "r9"
