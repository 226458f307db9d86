"""Per-tenant storage accounts (issue 25, item 1) on both counter stores (SQLite and DynamoDB on
moto): reserve before a write (all or nothing, exact under concurrency), give back, charge what
could not be reserved, the platform's per-tenant limit; and through the gateway: ``message_send``
past the quota is refused before anything is stored."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.counters import DynamoDbCounters
from agentvm.adapters.local.sqlite.counters import SqliteCounters
from agentvm.adapters.local.sqlite.tenants import SqliteTenantStore
from agentvm.errors import StorageQuotaExceeded
from agentvm.records import TenantLimitOverrides, TenantRecord
from agentvm.security.storage_quota import StorageQuota
from agentvm.security.tenant_limits import Limits, TenantLimits
from tests.contract.moto_table import backends
from tests.security_harness import ManualClock, keyed_client, new_key, secure


@pytest.fixture(params=backends(SqliteCounters, DynamoDbCounters, file="counters.db"))
async def counters(request, tmp_path):
    async with request.param(tmp_path) as instance:
        yield instance


async def test_a_tenant_is_refused_past_its_quota_and_others_are_not(counters):
    quota = StorageQuota(counters, limit_bytes=1000)
    assert await quota.reserve("acme", 600) == 600
    assert await quota.reserve("acme", 400) == 400  # exactly at the quota is still allowed
    with pytest.raises(StorageQuotaExceeded) as refused:
        await quota.reserve("acme", 1)
    assert refused.value.wire_fields() == {"limit": 1000, "used": 1000}
    await quota.give_back("acme", 400)
    with pytest.raises(StorageQuotaExceeded):
        await quota.reserve("acme", 401)  # refused whole: nothing of it taken
    assert await quota.used("acme") == 600
    assert await quota.reserve("globex", 1000) == 1000  # per tenant


async def test_concurrent_reservations_at_the_edge_never_pass_the_quota(counters):
    quota = StorageQuota(counters, limit_bytes=1000)
    await quota.reserve("acme", 900)
    results = await asyncio.gather(*(quota.reserve("acme", 10) for _ in range(50)), return_exceptions=True)
    assert sum(1 for r in results if r == 10) == 10
    assert all(isinstance(r, StorageQuotaExceeded) for r in results if r != 10)
    assert await quota.used("acme") == 1000


async def test_charges_pass_the_quota_and_then_refuse_until_given_back(counters):
    quota = StorageQuota(counters, limit_bytes=1000)
    await quota.charge("acme", 1500)  # written already (a sandbox job): counted, not refused
    with pytest.raises(StorageQuotaExceeded) as refused:
        await quota.refuse_if_full("acme")
    assert refused.value.wire_fields() == {"limit": 1000, "used": 1500}
    await quota.charge("acme", -1000)  # its files deleted
    await quota.refuse_if_full("acme")
    assert await quota.used("acme") == 500


async def test_giving_back_more_than_was_counted_leaves_the_account_at_zero(counters):
    quota = StorageQuota(counters, limit_bytes=1000)
    await quota.reserve("acme", 100)
    await quota.give_back("acme", 700)  # e.g. a resource published before storage was counted
    assert await quota.used("acme") == 0
    assert await quota.reserve("acme", 1000) == 1000  # no extra room came of it


async def test_a_zero_quota_means_no_quota_and_counts_nothing(counters):
    quota = StorageQuota(counters, limit_bytes=0)
    assert await quota.reserve("acme", 10**12) == 0
    await quota.charge("acme", 10**12)
    await quota.refuse_if_full("acme")
    assert await quota.used("acme") == 0


async def test_the_platform_sets_one_tenants_limit(counters):
    clock = ManualClock()
    tenants = SqliteTenantStore(":memory:")
    limits = TenantLimits(Limits(connections=0, api_keys=0, requests_per_minute=0, storage_bytes=100), clock)
    limits.read_overrides_from(lambda: tenants)
    await tenants.create_tenant(
        TenantRecord(
            tenantId="big",
            name="Big",
            createdAt=0,
            updatedAt=0,
            limits=TenantLimitOverrides(storageBytes=5000),
        )
    )
    quota = StorageQuota(counters, limit_bytes=100, tenant_limits=limits)
    assert await quota.reserve("big", 4000) == 4000
    with pytest.raises(StorageQuotaExceeded) as refused:
        await quota.reserve("small", 101)  # the server's limit for everyone else
    assert refused.value.wire_fields()["limit"] == 100


async def test_message_send_past_the_quota_is_refused_before_anything_is_stored(harness):
    secure(harness, ManualClock(), storage_bytes=3000)
    c = await keyed_client(harness, await new_key(harness.rt, "acme"))
    img = (await c.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    harness.model.add("short reply")
    assert "code" not in await c.request("message_send", imageId=img["imageId"], content="x" * 1000)
    await harness.run_turns()

    refused = await c.request("message_send", imageId=img["imageId"], content="y" * 2000)
    assert refused["code"] == "storage_quota_exceeded" and refused["limit"] == 3000
    assert refused["used"] > 1000  # the image, the first message and its reply
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]
    assert harness.queue.pending() == []
    other = await keyed_client(harness, await new_key(harness.rt, "globex"))  # another tenant
    img2 = (await other.request("image_create", containerId="bob", config={"name": "B"}))["record"]
    assert "code" not in await other.request("message_send", imageId=img2["imageId"], content="y" * 2000)
