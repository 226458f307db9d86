"""The ``TenantStore`` contract, on SQLite, DynamoDB (moto) and PostgreSQL: created once (tombstones keep
their id), replaced only in the status the caller read, listed by id a page at a time, filtered by
status; records written before statuses existed read as active."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.tenants import DynamoDbTenantStore
from agentvm.adapters.local.sqlite.tenants import SqliteTenantStore
from agentvm.adapters.postgres.tenants import PostgresTenantStore
from agentvm.records import TenantRecord
from tests.contract.moto_table import backends


@pytest.fixture(
    params=backends(SqliteTenantStore, DynamoDbTenantStore, file="agentvm.db", postgres=PostgresTenantStore)
)
async def store(request, tmp_path):
    async with request.param(tmp_path) as s:
        yield s


def tenant(tenant_id: str, at: int = 1, name: str = "Acme", **more) -> TenantRecord:
    return TenantRecord(tenantId=tenant_id, name=name, createdAt=at, updatedAt=at, **more)


async def ids(store, **kw) -> list[str]:
    page, _ = await store.list_tenants(**kw)
    return [t.tenantId for t in page]


async def test_a_tenant_is_created_once_and_read_back_as_written(store):
    made = tenant("acme", 5, description="d")
    assert await store.create_tenant(made)
    assert not await store.create_tenant(tenant("acme", 6, name="Other"))
    assert await store.get_tenant("acme") == made
    assert (await store.get_tenant("acme")).status == "active"
    assert await store.get_tenant("nobody") is None


async def test_a_replacement_needs_the_status_the_caller_read(store):
    await store.create_tenant(tenant("acme"))
    assert await store.replace_tenant(tenant("acme", name="Renamed"), status="active")
    assert (await store.get_tenant("acme")).name == "Renamed"
    deleting = tenant("acme", status="deleting", deletedAt=9)
    assert await store.replace_tenant(deleting, status="active")
    # an update read before the deletion began cannot revive the tenant
    assert not await store.replace_tenant(tenant("acme", name="Late"), status="active")
    assert await store.get_tenant("acme") == deleting
    assert await store.replace_tenant(
        tenant("acme", status="deleted", deletedAt=9, purgedAt=10), status="deleting"
    )
    assert (await store.get_tenant("acme")).purgedAt == 10
    assert not await store.replace_tenant(tenant("nobody"), status="active")  # never creates
    assert await store.get_tenant("nobody") is None
    assert not await store.create_tenant(tenant("acme"))  # a tombstone keeps its id


async def test_tenants_are_listed_by_id_a_page_at_a_time(store):
    for tenant_id in ("c", "a", "e", "b", "d"):
        await store.create_tenant(tenant(tenant_id))
    page, after = await store.list_tenants(limit=2)
    assert ([t.tenantId for t in page], after) == (["a", "b"], "b")
    page, after = await store.list_tenants(limit=2, after=after)
    assert ([t.tenantId for t in page], after) == (["c", "d"], "d")
    page, after = await store.list_tenants(limit=2, after=after)
    assert ([t.tenantId for t in page], after) == (["e"], None)
    page, after = await store.list_tenants(limit=5)
    assert len(page) == 5 and after is None
    assert await ids(store) == ["a", "b", "c", "d", "e"]
    assert await store.list_tenants(after="e") == ([], None)


async def test_listings_filter_by_status_and_still_fill_their_pages(store):
    for tenant_id in ("a", "b", "c", "d", "e", "f"):
        await store.create_tenant(tenant(tenant_id))
    for tenant_id in ("b", "c", "e"):
        await store.replace_tenant(tenant(tenant_id, status="deleted", deletedAt=2), status="active")
    await store.replace_tenant(tenant("f", status="deleting", deletedAt=2), status="active")
    page, after = await store.list_tenants(statuses=["active"], limit=1)
    assert ([t.tenantId for t in page], after) == (["a"], "a")
    page, after = await store.list_tenants(statuses=["active"], limit=1, after="a")
    assert ([t.tenantId for t in page], after) == (["d"], None)  # b and c passed over, the page full
    page, after = await store.list_tenants(statuses=["active"], limit=2)
    assert ([t.tenantId for t in page], after) == (["a", "d"], None)
    assert await ids(store, statuses=["active", "deleting"]) == ["a", "d", "f"]
    assert await ids(store, statuses=["deleted"]) == ["b", "c", "e"]
    assert await ids(store, statuses=None) == ["a", "b", "c", "d", "e", "f"]


async def test_records_written_before_statuses_existed_read_as_active(store):
    old = tenant("legacy")
    if isinstance(store, SqliteTenantStore):
        legacy = old.model_dump_json(exclude={"status", "deletedAt", "purgedAt"})
        store._conn.execute(
            "INSERT INTO tenants (tenant_id, created_at, record) VALUES (?, ?, ?)", ("legacy", 1, legacy)
        )
    elif isinstance(store, PostgresTenantStore):
        async with store._db.connection() as conn:
            await conn.execute(
                "INSERT INTO tenants (tenant_id, created_at, record) VALUES (%s, %s, %s::jsonb)",
                ("legacy", 1, old.model_dump_json(exclude={"status", "deletedAt", "purgedAt"})),
            )
    else:
        store._item("TENANTS", "legacy", data=old.model_dump_json(exclude={"status"})).save()
    assert (await store.get_tenant("legacy")).status == "active"
    assert await ids(store, statuses=["active"]) == ["legacy"]
    assert await store.replace_tenant(tenant("legacy", name="Now"), status="active")
    assert (await store.get_tenant("legacy")).name == "Now"


async def test_of_concurrent_creations_of_one_id_exactly_one_wins(store):
    results = await asyncio.gather(*(store.create_tenant(tenant("acme", n, name=f"N{n}")) for n in range(8)))
    assert sum(results) == 1
    assert (await store.get_tenant("acme")).name == f"N{results.index(True)}"
