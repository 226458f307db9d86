"""Per-tenant limits (issue 25, ``security/tenant_limits.py``): keys add up per tenant instead of
multiplying. Each test runs on the local wiring (SQLite counters and keys) and on the AWS one
(``aws_runtime`` and ``aws_security`` on moto), through the real HTTP app and gateway.

On main, 5 keys of one tenant admitted 5 x the per-key limit, a tenant admin minted keys without
end, a tenant opened WebSockets without end and bad keys were answered 401 without end: each test
below fails there.
"""

from __future__ import annotations

import dataclasses
import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agentvm.api.app import create_app
from agentvm.config import Settings
from tests.contract.moto_table import atomic_moto
from tests.harness import Harness
from tests.security_harness import SERVER_SECRET, ManualClock, anonymous_client, keyed_client, new_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.runtime import Runtime

MINUTE_MS = 60_000
LIMITS = {
    "rate_limit_per_minute": 60,
    "tenant_rate_limit_per_minute": 100,
    "max_api_keys_per_tenant": 3,
    "max_connections_per_tenant": 3,
    "unauthorized_per_minute": 5,
}


@dataclass
class World:
    h: Harness
    clock: ManualClock

    @property
    def rt(self) -> Runtime:
        return self.h.rt

    @asynccontextmanager
    async def http(self, token: str | None) -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.ASGITransport(app=create_app(self.rt), raise_app_exceptions=False)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
            yield client


def _clock() -> ManualClock:
    # The start of the minute after next: the counters expire items by the real time, so the
    # windows the tests use end a minute or more from now.
    return ManualClock(now_ms=(int(time.time() * 1000) // MINUTE_MS + 2) * MINUTE_MS)


@asynccontextmanager
async def local_world(tmp_path: Any) -> AsyncIterator[World]:
    from agentvm.adapters.local.sqlite.budgets import SqliteBudgetStore
    from agentvm.adapters.local.sqlite.counters import SqliteCounters
    from agentvm.adapters.local.sqlite.keys import SqliteKeyStore
    from agentvm.security.apikeys import ServerSecrets
    from agentvm.security.setup import build_security

    h, clock = Harness(tmp_path), _clock()
    settings = Settings(data_dir=tmp_path, **LIMITS)
    db = tmp_path / "security.db"
    build_security(
        settings,
        clock,
        keys=SqliteKeyStore(db),
        budgets=SqliteBudgetStore(db),
        counters=SqliteCounters(db, now=lambda: clock.now_ms() / 1000),
        secrets_=ServerSecrets(SERVER_SECRET),
    ).attach(h.rt)
    try:
        yield World(h, clock)
    finally:
        h.queue.close()
        h.store.close()


@asynccontextmanager
async def aws_world(tmp_path: Any) -> AsyncIterator[World]:
    from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
    from agentvm.hosts.aws import aws_runtime, aws_security

    h, clock = Harness(tmp_path), _clock()
    local_store = h.store
    with atomic_moto():
        settings = Settings(table_name="agentvm-limits", auth_secret=SERVER_SECRET.decode(), **LIMITS)
        DynamoDbStore(settings.table_name).create_table(wait=True)
        rt = aws_runtime(settings)
        h.rt = dataclasses.replace(rt, queue=h.queue, push=h.push, models=h.rt.models, turns=h.rt.turns)
        aws_security(settings, clock).attach(h.rt)
        try:
            yield World(h, clock)
        finally:
            h.queue.close()
            local_store.close()


@pytest.fixture(
    params=[pytest.param(local_world, id="local"), pytest.param(aws_world, id="aws", marks=pytest.mark.aws)]
)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        yield w


async def test_five_keys_of_one_tenant_share_its_request_budget(world):
    """The issue's 5 keys x 600 per minute, scaled: 5 keys x 40 requests, each key under its own 60,
    the tenant's 100 shared. On main all 200 were admitted."""
    tokens = [await new_key(world.rt, "acme", "admin") for _ in range(5)]
    statuses: list[int] = []
    refusal: dict[str, Any] = {}
    for token in tokens:
        async with world.http(token) as http:
            for _ in range(40):
                answer = await http.get("/v1/auth/keys")
                statuses.append(answer.status_code)
                if answer.status_code == 429:
                    refusal = answer.json()["error"]
    assert statuses.count(200) == 100 and statuses.count(429) == 100
    assert refusal["code"] == "rate_limited" and refusal["limit"] == 100 and "tenant" in refusal["message"]
    async with world.http(await new_key(world.rt, "globex", "admin")) as other:
        assert (await other.get("/v1/auth/keys")).status_code == 200  # its own budget
    world.clock.advance(60)  # the next minute: the budget is whole again
    async with world.http(tokens[0]) as http:
        assert (await http.get("/v1/auth/keys")).status_code == 200


async def test_a_tenant_admin_cannot_mint_keys_past_the_tenants_cap(world):
    admin = await new_key(world.rt, "acme", "admin")  # 1 of 3
    async with world.http(admin) as http:
        made = [await http.post("/v1/auth/keys", json={"scopes": ["client"]}) for _ in range(2)]
        assert [m.status_code for m in made] == [201, 201]
        refused = await http.post("/v1/auth/keys", json={"scopes": ["client"]})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "conflict" and refused.json()["error"]["limit"] == 3
        keys = (await http.get("/v1/auth/keys")).json()["keys"]
        assert len(keys) == 3  # nothing was made
        revoked = made[0].json()["key"]["keyId"]
        assert (await http.delete(f"/v1/auth/keys/{revoked}")).status_code == 200
        assert (await http.post("/v1/auth/keys", json={"scopes": ["client"]})).status_code == 201
    async with world.http(await new_key(world.rt, "globex", "admin")) as other:
        assert (await other.post("/v1/auth/keys", json={"scopes": ["client"]})).status_code == 201


async def test_a_platform_admin_sets_one_tenants_limits(world):
    platform = await new_key(world.rt, "platform", "admin")
    acme = await new_key(world.rt, "acme", "admin")
    async with world.http(platform) as http:
        assert (await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})).status_code == 201
        changed = await http.patch(
            "/v1/tenants/acme", json={"limits": {"maxApiKeys": 1, "rateLimitPerMinute": 0}}
        )
        assert changed.status_code == 200, changed.text
        assert changed.json()["limits"] == {"maxApiKeys": 1, "rateLimitPerMinute": 0}
        assert (await http.get("/v1/tenants/acme")).json()["limits"]["maxApiKeys"] == 1
    async with world.http(acme) as http:
        refused = await http.post("/v1/auth/keys", json={"scopes": ["client"]})
        assert refused.status_code == 409 and refused.json()["error"]["limit"] == 1
        # a tenant admin may not change its own limits
        assert (await http.patch("/v1/tenants/acme", json={"limits": None})).status_code == 403
        # its requests per minute: no tenant limit now, only the key's own 60
        statuses = [(await http.get("/v1/auth/keys")).status_code for _ in range(70)]
        assert statuses.count(200) == 58 and statuses[-1] == 429  # + the refused POST and PATCH = 60
    async with world.http(platform) as http:
        reset = await http.patch("/v1/tenants/acme", json={"limits": None})
        assert "limits" not in reset.json()  # the server's again


async def test_a_tenant_holds_at_most_its_cap_of_websockets_whatever_its_keys(world):
    tokens = [await new_key(world.rt, "acme") for _ in range(3)]
    clients = [await keyed_client(world.h, token) for token in tokens]  # 3 keys, one each
    late = await anonymous_client(world.h)
    [refused] = await late.send_raw(
        json.dumps({"type": "auth", "headers": {"Authorization": f"Bearer {tokens[0]}"}})
    )
    assert refused["type"] == "system_error" and "tenant" in refused["data"]["message"]
    assert refused["data"]["details"]["code"] == "rate_limited" and refused["data"]["details"]["limit"] == 3
    await keyed_client(world.h, await new_key(world.rt, "globex"))  # another tenant has its own
    await clients[0].disconnect()
    await keyed_client(world.h, tokens[0])  # a slot freed


async def test_bad_keys_from_one_address_are_refused_before_their_key_is_read(world):
    good = await new_key(world.rt, "acme", "admin")
    async with world.http(good) as http:
        assert (await http.get("/v1/auth/keys")).status_code == 200  # verified: known to this process
    bad = "avm_000000000000_" + "A" * 43
    async with world.http(bad) as http:
        statuses = [(await http.get("/v1/auth/keys")).status_code for _ in range(8)]
    assert statuses == [401] * 5 + [429] * 3
    reads = 0
    verify = world.rt.auth.keys.verify

    async def counted(token: str) -> Any:
        nonlocal reads
        reads += 1
        return await verify(token)

    world.rt.auth.keys.verify = counted  # type: ignore[method-assign]
    async with world.http(bad) as http:
        assert (await http.get("/v1/auth/keys")).status_code == 429
    async with world.http(None) as http:
        assert (await http.get("/v1/auth/keys")).status_code == 429  # no key at all: the same address
    assert reads == 0  # refused without a look-up
    async with world.http(good) as http:  # a key this process verified still gets in
        assert (await http.get("/v1/auth/keys")).status_code == 200
    world.clock.advance(60)
    async with world.http(bad) as http:
        assert (await http.get("/v1/auth/keys")).status_code == 401


async def test_a_lost_disconnect_on_aws_frees_its_slot_within_two_windows(tmp_path):
    """API Gateway's ``$disconnect`` is best-effort: a slot it never gave back is counted in its
    window and the next (a connection lives at most one window), then no more."""
    from agentvm.adapters.aws.dynamodb.tenant_connection_count import WINDOW_MS, TenantConnectionCount
    from agentvm.adapters.local.sqlite.counters import SqliteCounters
    from agentvm.errors import RateLimited

    now_ms = 1_800_000_000_000 // WINDOW_MS * WINDOW_MS + 1000
    count = TenantConnectionCount(SqliteCounters(tmp_path / "c.db", now=lambda: now_ms / 1000))
    lost = await count.take("acme", 2, now_ms)  # its $disconnect never comes
    kept = await count.take("acme", 2, now_ms)
    with pytest.raises(RateLimited):
        await count.take("acme", 2, now_ms)
    await count.give_back("acme", kept, now_ms)
    now_ms += WINDOW_MS  # the next window: the lost one may still be live, so it counts
    again = await count.take("acme", 2, now_ms)
    with pytest.raises(RateLimited):
        await count.take("acme", 2, now_ms)
    await count.give_back("acme", again, now_ms)
    now_ms += WINDOW_MS  # two windows on: the lost connection is closed for sure
    await count.take("acme", 2, now_ms)
    await count.take("acme", 2, now_ms)
    await count.give_back("acme", lost, now_ms)  # a late $disconnect of a past window changes nothing
    with pytest.raises(RateLimited):
        await count.take("acme", 2, now_ms)
