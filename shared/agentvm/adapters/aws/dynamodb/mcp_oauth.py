"""The ``McpOAuthRecords`` port on DynamoDB (PynamoDB): tenants' sealed OAuth records of MCP servers.

=========  ===================  ======  ========================  ==========  ====================
item       pk                   sk      gsi1pk                    gsi1sk      attributes
=========  ===================  ======  ========================  ==========  ====================
record     ``MCPOAUTH#<key>``   META    ``MCPOAUTH#<tenant>``     ``<key>``   tenantId, sealed,
                                                                              until?, expiresAt?
=========  ===================  ======  ========================  ==========  ====================

A record is its own partition, keyed by the key alone: the OAuth callback takes a pending
authorization knowing only its state, and learns the tenant from the item. Reads and deletes of a
tenant compare the stored ``tenantId`` (another tenant's key answers as a missing one). ``put`` is a
PutItem on condition that the key is free, the tenant's own, or expired: another tenant's live key
fails the condition and the write raises ``Conflict``. ``take`` is a DeleteItem on condition that
the item exists and has not expired, returning the old item (ALL_OLD): of concurrent takers, one
deletes it and the others fail the condition. ``until`` is the exact expiry (epoch seconds) every
read checks; ``expiresAt``, the same second rounded up, lets TTL drop the item (within about two
days: until then it is still returned, and ignored). ``delete_tenant`` is a Query of ``gsi1`` on the
tenant's partition and a conditional DeleteItem per record: no scan. Per record: 1 WRU a write or
delete (up to 16 KiB of sealed value: up to 17), 0.5-4 RRU a read.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PynamoDBException

from agentvm.adapters.aws.dynamodb.models import META, TableItem, bind_model
from agentvm.adapters.aws.dynamodb.store import CONDITION_FAILED, conditional_write
from agentvm.errors import Conflict
from agentvm.ports import check_mcp_oauth_record

if TYPE_CHECKING:
    from collections.abc import Callable

PREFIX = "MCPOAUTH#"


class McpOAuthItem(TableItem):
    tenantId = UnicodeAttribute()
    sealed = UnicodeAttribute()
    until = NumberAttribute(null=True)


class DynamoDbMcpOAuthRecords:
    """``agentvm.ports.McpOAuthRecords`` on the single table. Blocking calls run in a thread.
    ``now`` returns epoch seconds (tests pass their own to expire records)."""

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        host: str | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._item = bind_model(McpOAuthItem, table_name, region, host)
        self._now = now

    def _live(self, item: McpOAuthItem) -> bool:
        return item.until is None or item.until >= self._now()

    async def get(self, tenant_id: str, key: str) -> str | None:
        def read() -> McpOAuthItem | None:
            try:
                return self._item.get(PREFIX + key, META, consistent_read=True)
            except self._item.DoesNotExist:
                return None

        item = await asyncio.to_thread(read)
        if item is None or item.tenantId != tenant_id or not self._live(item):
            return None
        return item.sealed

    async def put(self, tenant_id: str, key: str, value: str, *, expires_at: float | None = None) -> None:
        check_mcp_oauth_record(key, value)
        model = self._item
        item = model(
            PREFIX + key,
            META,
            gsi1pk=PREFIX + tenant_id,
            gsi1sk=key,
            tenantId=tenant_id,
            sealed=value,
            until=expires_at,
            expiresAt=None if expires_at is None else datetime.fromtimestamp(math.ceil(expires_at), tz=UTC),
        )
        free = model.pk.does_not_exist() | (model.tenantId == tenant_id) | (model.until < self._now())
        if not await conditional_write(lambda: item.save(free)):
            raise Conflict("this MCP OAuth record belongs to another tenant")

    async def take(self, key: str) -> tuple[str, str] | None:
        model = self._item
        live = model.pk.exists() & (model.until.does_not_exist() | (model.until >= self._now()))
        connection = model._get_connection()

        def delete() -> dict[str, Any] | None:
            try:
                return connection.delete_item(PREFIX + key, META, condition=live, return_values="ALL_OLD")
            except PynamoDBException as exc:
                if exc.cause_response_code == CONDITION_FAILED:
                    return None
                raise

        answer = await asyncio.to_thread(delete)
        if answer is None:
            return None
        item = model.from_raw_data(answer["Attributes"])
        return item.tenantId, item.sealed

    async def delete(self, tenant_id: str, key: str) -> None:
        await self._delete_own(tenant_id, key)

    async def delete_tenant(self, tenant_id: str) -> int:
        model = self._item

        def keys() -> list[str]:
            return [str(item.gsi1sk) for item in model.gsi1.query(PREFIX + tenant_id)]

        deleted = 0
        for key in await asyncio.to_thread(keys):
            deleted += await self._delete_own(tenant_id, key)
        return deleted

    async def _delete_own(self, tenant_id: str, key: str) -> bool:
        model = self._item
        item = model(PREFIX + key, META)
        return await conditional_write(lambda: item.delete(model.tenantId == tenant_id))


__all__ = ["DynamoDbMcpOAuthRecords"]
