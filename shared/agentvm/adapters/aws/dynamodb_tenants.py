"""The ``TenantStore`` port on DynamoDB (PynamoDB), on AgentVM's single table.

Every tenant is an item of one partition (pk ``TENANTS``, sk the tenant id): the registry is a
list a platform admin reads whole (one Query), written rarely; one partition serves thousands of
tenants far below its limits.
"""

from __future__ import annotations

import asyncio

from pynamodb.attributes import UnicodeAttribute

from agentvm.adapters.aws.dynamodb_models import TableItem, bind_model
from agentvm.adapters.aws.dynamodb_store import conditional_write
from agentvm.records import TenantRecord

_PK = "TENANTS"


class TenantItem(TableItem):
    data = UnicodeAttribute()


class DynamoDbTenantStore:
    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(TenantItem, table_name, region, host)

    def _of(self, tenant: TenantRecord) -> TenantItem:
        return self._item(_PK, tenant.tenantId, data=tenant.model_dump_json())

    async def create_tenant(self, tenant: TenantRecord) -> bool:
        item = self._of(tenant)
        return await conditional_write(lambda: item.save(condition=self._item.pk.does_not_exist()))

    async def get_tenant(self, tenant_id: str) -> TenantRecord | None:
        def get() -> TenantItem | None:
            try:
                return self._item.get(_PK, tenant_id, consistent_read=True)
            except self._item.DoesNotExist:
                return None

        item = await asyncio.to_thread(get)
        return None if item is None else TenantRecord.model_validate_json(item.data)

    async def put_tenant(self, tenant: TenantRecord) -> None:
        item = self._of(tenant)
        await conditional_write(lambda: item.save(condition=self._item.pk.exists()))

    async def list_tenants(self) -> list[TenantRecord]:
        def query() -> list[TenantRecord]:
            return [
                TenantRecord.model_validate_json(i.data) for i in self._item.query(_PK, consistent_read=True)
            ]

        tenants = await asyncio.to_thread(query)
        return sorted(tenants, key=lambda t: (t.createdAt, t.tenantId))

    async def delete_tenant(self, tenant_id: str) -> bool:
        item = self._item(_PK, tenant_id)
        return await conditional_write(lambda: item.delete(condition=self._item.pk.exists()))


__all__ = ["DynamoDbTenantStore", "TenantItem"]
