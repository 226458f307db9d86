"""Per-tenant storage quotas (issue 15, finding 5) on both counter stores (SQLite and DynamoDB on
moto), and through the gateway: ``message_send`` past the quota is refused before anything is
stored."""

from __future__ import annotations

import pytest

from agentvm.adapters.aws.dynamodb_counters import DynamoDbCounters
from agentvm.adapters.local.sqlite_counters import SqliteCounters
from agentvm.errors import StorageQuotaExceeded
from agentvm.security.storage_quota import StorageQuota
from tests.contract.moto_table import backends
from tests.security_harness import ManualClock, keyed_client, new_key, secure


@pytest.fixture(params=backends(SqliteCounters, DynamoDbCounters, file="counters.db"))
async def counters(request, tmp_path):
    async with request.param(tmp_path) as instance:
        yield instance


async def test_a_tenant_is_refused_past_its_quota_and_others_are_not(counters):
    quota = StorageQuota(counters, limit_bytes=1000)
    await quota.check("acme", 600)
    await quota.add("acme", 600)
    await quota.check("acme", 400)  # exactly at the quota is still allowed
    with pytest.raises(StorageQuotaExceeded) as refused:
        await quota.check("acme", 401)
    assert refused.value.wire_fields() == {"limit": 1000, "used": 600}
    await quota.check("globex", 1000)  # per tenant
    assert await quota.used("acme") == 600 and await quota.used("globex") == 0


async def test_a_zero_quota_means_no_quota_and_counts_nothing(counters):
    quota = StorageQuota(counters, limit_bytes=0)
    await quota.add("acme", 10**12)
    await quota.check("acme", 10**12)
    assert await quota.used("acme") == 0


async def test_message_send_past_the_quota_is_refused_before_anything_is_stored(harness):
    secure(harness, ManualClock(), storage_bytes=3000)
    c = await keyed_client(harness, await new_key(harness.rt, "acme"))
    img = (await c.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    harness.model.add("short reply")
    assert "code" not in await c.request("message_send", imageId=img["imageId"], content="x" * 1000)
    await harness.run_turns()

    refused = await c.request("message_send", imageId=img["imageId"], content="y" * 2000)
    assert refused["code"] == "storage_quota_exceeded" and refused["limit"] == 3000
    assert refused["used"] > 1000  # the first message and its reply
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]
    assert harness.queue.pending() == []
    other = await keyed_client(harness, await new_key(harness.rt, "globex"))  # another tenant
    img2 = (await other.request("image_create", containerId="bob", config={"name": "B"}))["record"]
    assert "code" not in await other.request("message_send", imageId=img2["imageId"], content="y" * 2000)
