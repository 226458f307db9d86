"""The ``KeyStore`` contract, on SQLite, DynamoDB (moto) and PostgreSQL: one suite, so they cannot drift."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.keys import DynamoDbKeyStore
from agentvm.adapters.local.sqlite.keys import SqliteKeyStore
from agentvm.adapters.postgres.keys import PostgresKeyStore
from agentvm.records import ApiKeyRecord
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteKeyStore, DynamoDbKeyStore, file="keys.db", postgres=PostgresKeyStore))
async def keys(request, tmp_path):
    async with request.param(tmp_path) as store:
        yield store


def key(key_id="k00000000001", tenant="acme", created=1_000, **kw) -> ApiKeyRecord:
    return ApiKeyRecord(
        keyId=key_id,
        tenantId=tenant,
        scopes=kw.pop("scopes", ["client"]),
        secretHash="ab" * 32,
        secretId="0123456789abcdef",
        createdAt=created,
        **kw,
    )


async def test_put_then_get_round_trips_every_field(keys):
    record = key(name="ci", scopes=["admin", "client"], rateLimitPerMinute=30)
    await keys.put_key(record)
    assert await keys.get_key(record.keyId) == record


async def test_unknown_key_reads_as_none(keys):
    assert await keys.get_key("nosuchkey000") is None


async def test_put_replaces_the_key_with_the_same_id(keys):
    await keys.put_key(key())
    rehashed = key().model_copy(update={"secretHash": "cd" * 32, "secretId": "fedcba9876543210"})
    await keys.put_key(rehashed)
    assert await keys.get_key(rehashed.keyId) == rehashed
    assert [k.keyId for k in await keys.list_keys("acme")] == [rehashed.keyId]


async def test_list_keys_is_per_tenant_oldest_first_revoked_included(keys):
    await keys.put_key(key("k00000000002", created=2_000))
    await keys.put_key(key("k00000000001", created=1_000))
    await keys.put_key(key("k00000000003", tenant="other", created=1_500))
    await keys.revoke_key("k00000000002", revoked_at=3_000)
    listed = await keys.list_keys("acme")
    assert [(k.keyId, k.revokedAt) for k in listed] == [("k00000000001", None), ("k00000000002", 3_000)]
    assert [k.keyId for k in await keys.list_keys("other")] == ["k00000000003"]
    assert await keys.list_keys("nobody") == []


async def test_revoke_marks_the_key_and_keeps_the_first_revocation_time(keys):
    await keys.put_key(key())
    revoked = await keys.revoke_key("k00000000001", revoked_at=5_000)
    assert revoked is not None and revoked.revokedAt == 5_000
    again = await keys.revoke_key("k00000000001", revoked_at=9_000)
    assert again is not None and again.revokedAt == 5_000
    stored = await keys.get_key("k00000000001")
    assert stored is not None and stored.revokedAt == 5_000
    assert stored.model_copy(update={"revokedAt": None}) == key()


async def test_revoke_scoped_to_another_tenant_reads_as_absent_and_changes_nothing(keys):
    await keys.put_key(key())
    assert await keys.revoke_key("k00000000001", revoked_at=5_000, tenant_id="other") is None
    stored = await keys.get_key("k00000000001")
    assert stored is not None and stored.revokedAt is None
    scoped = await keys.revoke_key("k00000000001", revoked_at=6_000, tenant_id="acme")
    assert scoped is not None and scoped.revokedAt == 6_000


async def test_revoke_of_an_unknown_key_returns_none(keys):
    assert await keys.revoke_key("nosuchkey000", revoked_at=1) is None
    assert await keys.get_key("nosuchkey000") is None


async def test_concurrent_revocations_agree_on_one_revocation_time(keys):
    await keys.put_key(key())
    results = await asyncio.gather(
        *(keys.revoke_key("k00000000001", revoked_at=t) for t in range(5_000, 5_008))
    )
    stored = await keys.get_key("k00000000001")
    assert stored is not None and stored.revokedAt in range(5_000, 5_008)
    assert {r.revokedAt for r in results if r is not None} == {stored.revokedAt}
