"""The gateway's side of authentication: the ``auth`` frame, revoked keys on live connections, and
the per-key request rate limit. Both hosts get this from ``handle_frame``."""

from __future__ import annotations

import json

import pytest

from tests.security_harness import ManualClock, anonymous_client, keyed_client, new_key, secure


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def sec(harness, clock):
    return secure(harness, clock)


def auth_frame(token: str) -> str:
    return json.dumps({"type": "auth", "headers": {"Authorization": f"Bearer {token}"}})


def codes(frames):
    return [f["data"].get("code") or f["data"]["details"]["code"] for f in frames]


async def test_unauthenticated_connection_may_send_only_auth(harness, sec):
    c = await anonymous_client(harness)
    assert (await c.request("container_list"))["code"] == "unauthorized"
    assert codes(await c.subscribe("sess_x")) == ["unauthorized"]
    token = await new_key(harness.rt, "acme")
    assert await c.send_raw(auth_frame(token)) == []  # no reply on success, as AgentX clients expect
    assert (await c.request("container_create", containerId="c1"))["containerId"] == "c1"
    info = await harness.rt.connections.get(c.connection_id)
    assert info.tenant_id == "acme" and info.key_id is not None


async def test_a_valid_auth_frame_scopes_the_connection_to_the_keys_tenant(harness, sec):
    a = await keyed_client(harness, await new_key(harness.rt, "tenant-a"))
    b = await keyed_client(harness, await new_key(harness.rt, "tenant-b"))
    await a.request("container_create", containerId="user-alice")
    assert (await b.request("container_list"))["containerIds"] == []
    assert (await a.request("container_list"))["containerIds"] == ["user-alice"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer avm_zzzzzzzzzzzz_" + "A" * 43},
        {"Authorization": "Basic abc"},
        {"X": "y"},
    ],
)
async def test_a_bad_auth_frame_answers_unauthorized_and_leaves_the_connection_unauthenticated(
    harness, sec, headers
):
    c = await anonymous_client(harness)
    replies = await c.send_raw(json.dumps({"type": "auth", "headers": headers}))
    assert [f["type"] for f in replies] == ["system_error"] and codes(replies) == ["unauthorized"]
    assert (await harness.rt.connections.get(c.connection_id)).tenant_id is None
    assert (await c.request("container_list"))["code"] == "unauthorized"


async def test_a_bad_auth_frame_does_not_drop_an_existing_authentication(harness, sec):
    c = await keyed_client(harness, await new_key(harness.rt, "acme"))
    assert codes(await c.send_raw(auth_frame("avm_nope"))) == ["unauthorized"]
    assert (await c.request("container_list"))["containerIds"] == []


async def test_a_connection_cannot_switch_to_another_tenant(harness, sec):
    c = await keyed_client(harness, await new_key(harness.rt, "tenant-a"))
    await c.request("container_create", containerId="a-only")
    assert codes(await c.send_raw(auth_frame(await new_key(harness.rt, "tenant-b")))) == ["unauthorized"]
    assert (await c.request("container_list"))["containerIds"] == ["a-only"]


async def test_a_live_connection_whose_key_is_revoked_elsewhere_stops_within_the_cache_bound(
    harness, sec, clock
):
    token = await new_key(harness.rt, "acme")
    c = await keyed_client(harness, token)
    key_id = token.split("_")[1]
    await sec.auth.keys.store.revoke_key(key_id, revoked_at=clock.now_ms())  # another process
    assert "code" not in await c.request("container_list")
    clock.advance(sec.auth.cache_s)
    refused = await c.request("container_list")
    assert refused["code"] == "unauthorized" and refused["containerIds"] == []
    assert codes(await c.subscribe("sess_x")) == ["unauthorized"]


async def test_requests_beyond_the_keys_rate_limit_answer_rate_limited_until_the_next_minute(
    harness, sec, clock
):
    token = await new_key(harness.rt, "acme", rate_limit_per_minute=3)
    c = await keyed_client(harness, token)
    clock.ms = (clock.ms // 60_000) * 60_000 + 10_000  # 10 s into a minute
    for _ in range(3):
        assert "code" not in await c.request("container_list")
    limited = await c.request("container_list")
    assert limited["code"] == "rate_limited" and limited["containerIds"] == []
    assert limited["limit"] == 3 and limited["resetAt"] == (clock.ms // 60_000 + 1) * 60_000
    error = [f for f in c.frames if f["type"] == "system_error"][-1]["data"]
    assert error["details"] == {"code": "rate_limited", "limit": 3, "resetAt": limited["resetAt"]}
    clock.advance(50)
    assert "code" not in await c.request("container_list")


async def test_the_server_default_rate_limit_applies_and_zero_means_unlimited(harness, clock):
    secure(harness, clock, rate_limit_per_minute=2)
    clock.ms = (clock.ms // 60_000) * 60_000
    default = await keyed_client(harness, await new_key(harness.rt, "acme"))
    unlimited = await keyed_client(harness, await new_key(harness.rt, "acme", rate_limit_per_minute=0))
    assert [(await default.request("container_list")).get("code") for _ in range(3)] == [
        None,
        None,
        "rate_limited",
    ]
    for _ in range(10):
        assert "code" not in await unlimited.request("container_list")


async def test_subscribe_and_auth_frames_count_against_the_keys_rate_limit(harness, sec, clock):
    token = await new_key(harness.rt, "acme", rate_limit_per_minute=4)
    c = await keyed_client(harness, token)  # its auth frame was counted before it had a key
    clock.ms = (clock.ms // 60_000) * 60_000
    assert codes(await c.subscribe("sess_x")) == ["not_found"]
    assert await c.send_raw(auth_frame(token)) == []
    assert codes(await c.subscribe("sess_x")) == ["not_found"]
    assert "code" not in await c.request("container_list")
    assert codes(await c.subscribe("sess_x")) == ["rate_limited"]
    assert codes(await c.send_raw(auth_frame(token))) == ["rate_limited"]


async def test_a_connection_without_a_key_has_a_small_allowance_of_frames_auth_attempts_included(
    harness, clock
):
    secure(harness, clock, unauthenticated_per_minute=3)
    clock.ms = (clock.ms // 60_000) * 60_000
    c = await anonymous_client(harness)
    bad = auth_frame("avm_zzzzzzzzzzzz_" + "A" * 43)
    assert codes(await c.send_raw(bad)) == ["unauthorized"]
    assert codes(await c.subscribe("sess_x")) == ["unauthorized"]
    assert (await c.request("container_list"))["code"] == "unauthorized"
    # the fourth frame of the minute, even a valid auth frame, is refused without being checked
    limited = await c.send_raw(auth_frame(await new_key(harness.rt, "acme")))
    assert codes(limited) == ["rate_limited"]
    assert limited[0]["data"]["details"]["limit"] == 3
    other = await anonymous_client(harness)  # the allowance is per connection
    assert codes(await other.send_raw(bad)) == ["unauthorized"]
    clock.advance(60)
    assert await c.send_raw(auth_frame(await new_key(harness.rt, "acme"))) == []


async def test_without_an_authenticator_auth_frames_are_ignored(harness):
    c = await harness.client("local")
    assert await c.send_raw(auth_frame("anything")) == []
    assert (await c.request("container_list"))["containerIds"] == []
