"""The ``TenantStore`` contract, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

import pytest

from agentvm.adapters.aws.dynamodb_tenants import DynamoDbTenantStore
from agentvm.adapters.local.sqlite_tenants import SqliteTenantStore
from agentvm.records import TenantRecord
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteTenantStore, DynamoDbTenantStore))
async def store(request, tmp_path):
    async with request.param(tmp_path) as s:
        yield s


def tenant(tenant_id: str, at: int, name: str = "Acme") -> TenantRecord:
    return TenantRecord(tenantId=tenant_id, name=name, createdAt=at, updatedAt=at)


async def test_tenants_are_created_once_listed_oldest_first_updated_and_deleted(store):
    assert await store.create_tenant(tenant("tenant_b", 2))
    assert await store.create_tenant(tenant("tenant_a", 1))
    assert not await store.create_tenant(tenant("tenant_a", 3, name="Other"))
    assert [t.tenantId for t in await store.list_tenants()] == ["tenant_a", "tenant_b"]
    await store.put_tenant(tenant("tenant_a", 1, name="Renamed"))
    assert (await store.get_tenant("tenant_a")).name == "Renamed"
    assert await store.delete_tenant("tenant_a")
    assert not await store.delete_tenant("tenant_a")
    assert await store.get_tenant("tenant_a") is None
    assert [t.tenantId for t in await store.list_tenants()] == ["tenant_b"]
