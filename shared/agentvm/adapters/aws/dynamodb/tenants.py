"""The ``TenantStore`` port on DynamoDB (PynamoDB), on AgentVM's single table.

Every tenant is an item of one partition (pk ``TENANTS``, sk the tenant id; ``data`` the record's
JSON, ``status`` copied out for conditions and filters): the registry is written rarely and read
by platform admins, a page per Query; one partition serves thousands of tenants far below its
limits. Items written before statuses existed have no ``status`` and read as ``active``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pynamodb.attributes import UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.adapters.aws.dynamodb.store import conditional_write
from agentvm.records import TenantRecord

if TYPE_CHECKING:
    from collections.abc import Collection

    from pynamodb.expressions.condition import Condition

    from agentvm.records import TenantStatus

_PK = "TENANTS"


class TenantItem(TableItem):
    data = UnicodeAttribute()
    status = UnicodeAttribute(null=True)


class DynamoDbTenantStore:
    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(TenantItem, table_name, region, host)

    def _of(self, tenant: TenantRecord) -> TenantItem:
        return self._item(_PK, tenant.tenantId, data=tenant.model_dump_json(), status=tenant.status)

    def _in(self, statuses: Collection[TenantStatus]) -> Condition:
        condition = self._item.status.is_in(*statuses)
        if "active" in statuses:
            condition = condition | self._item.status.does_not_exist()
        return condition

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

    async def replace_tenant(self, tenant: TenantRecord, *, status: TenantStatus) -> bool:
        item = self._of(tenant)
        condition = self._item.pk.exists() & self._in([status])
        return await conditional_write(lambda: item.save(condition=condition))

    async def list_tenants(
        self, *, statuses: Collection[TenantStatus] | None = None, limit: int = 100, after: str | None = None
    ) -> tuple[list[TenantRecord], str | None]:
        def query() -> list[TenantItem]:
            # ``limit`` counts items that pass the filter: PynamoDB reads on until it has them.
            return list(
                self._item.query(
                    _PK,
                    None if after is None else self._item.sk > after,
                    filter_condition=None if statuses is None else self._in(statuses),
                    consistent_read=True,
                    limit=limit + 1,
                )
            )

        items = await asyncio.to_thread(query)
        page = [TenantRecord.model_validate_json(i.data) for i in items[:limit]]
        return page, page[-1].tenantId if len(items) > limit else None


__all__ = ["DynamoDbTenantStore", "TenantItem"]
