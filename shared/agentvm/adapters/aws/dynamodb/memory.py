"""The ``MemoryStore`` port on DynamoDB (``ports/memory.py``): one partition per scope of a tenant.

=============  ===============================  =============  =====================================
item           pk                               sk             attributes
=============  ===============================  =============  =====================================
memory item    ``MEMORY#<tenant>#<scope>``      ``ITEM#<id>``  memoryId, tenantId, scope, topic, text,
                                                               source, createdAt, updatedAt, size
scope usage    ``MEMORY#<tenant>#<scope>``      ``USAGE``      itemCount, byteCount
=============  ===============================  =============  =====================================

A write is one ``TransactWriteItems`` of the item and the scope's usage item: an add puts the item
if its id is new and adds 1 and its size to the usage only while both stay within the limits (a
condition on the usage item), so racing writers cannot pass them together; an edit and a delete
are conditional on the item being as read. A cancelled transaction is read again and retried (a
few times) or answered: the id was stored already (an idempotent retry), or ``MemoryFull``.

Recall by words is **in process**: one strongly consistent Query of the scope's partition, then
``ranked_by_words``. That is bounded by the scope's limits (at most ``max_items`` items and
``max_bytes`` bytes: the default 256 KB is ~64 read units a recall), which is why the limits are
small; a search index (OpenSearch) would be the next step for larger memories. Stored ids re-check
the tenant and scope, as ``#`` may appear in client-chosen container ids.
"""

from __future__ import annotations

import asyncio

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.errors import StorageUnavailable
from agentvm.ports import MemoryItem, MemoryLimits, check_memory_room, item_size, ranked_by_words

PREFIX = "MEMORY#"
ITEM_PREFIX = "ITEM#"
USAGE_SK = "USAGE"
_ATTEMPTS = 8  # a write cancelled by a racing one is read again and retried this many times
_CHUNK = 50  # deletes per transaction when a scope is cleared (the limit is 100 actions)


class MemoryTableItem(TableItem):
    memoryId = UnicodeAttribute(null=True)
    tenantId = UnicodeAttribute(null=True)
    scope = UnicodeAttribute(null=True)
    topic = UnicodeAttribute(null=True)
    text = UnicodeAttribute(null=True)
    source = UnicodeAttribute(null=True)
    createdAt = NumberAttribute(null=True)
    updatedAt = NumberAttribute(null=True)
    size = NumberAttribute(null=True)
    itemCount = NumberAttribute(null=True)
    byteCount = NumberAttribute(null=True)


def memory_pk(tenant_id: str, scope: str) -> str:
    return f"{PREFIX}{tenant_id}#{scope}"


def _memory(row: MemoryTableItem) -> MemoryItem:
    return MemoryItem(
        id=str(row.memoryId),
        tenant_id=str(row.tenantId),
        scope=str(row.scope),
        text=str(row.text),
        topic=row.topic,
        source=str(row.source),
        created_at=int(row.createdAt or 0),
        updated_at=int(row.updatedAt or 0),
    )


class DynamoDbMemoryStore:
    """``agentvm.ports.MemoryStore`` on the single table. Blocking calls run in a thread."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(MemoryTableItem, table_name, region, host)

    def _connection(self) -> object:
        return self._item._get_connection().connection

    def _read(self, tenant_id: str, scope: str, memory_id: str) -> MemoryTableItem | None:
        try:
            row = self._item.get(
                memory_pk(tenant_id, scope), f"{ITEM_PREFIX}{memory_id}", consistent_read=True
            )
        except self._item.DoesNotExist:
            return None
        if row.tenantId != tenant_id or row.scope != scope:
            return None
        return row

    def _usage(self, tenant_id: str, scope: str) -> tuple[int, int]:
        try:
            row = self._item.get(memory_pk(tenant_id, scope), USAGE_SK, consistent_read=True)
        except self._item.DoesNotExist:
            return 0, 0
        return int(row.itemCount or 0), int(row.byteCount or 0)

    def _usage_row(self, tenant_id: str, scope: str) -> MemoryTableItem:
        return self._item(memory_pk(tenant_id, scope), USAGE_SK)

    async def add(self, item: MemoryItem, limits: MemoryLimits) -> tuple[MemoryItem, bool]:
        size = item.size
        check_memory_room(1, size, limits, held=0, used=0)  # one item alone within the bytes
        model = self._item
        row = model(
            memory_pk(item.tenant_id, item.scope),
            f"{ITEM_PREFIX}{item.id}",
            memoryId=item.id,
            tenantId=item.tenant_id,
            scope=item.scope,
            topic=item.topic,
            text=item.text,
            source=item.source,
            createdAt=item.created_at,
            updatedAt=item.updated_at,
            size=size,
        )
        room = model.itemCount.does_not_exist() | (
            (model.itemCount <= limits.max_items - 1) & (model.byteCount <= limits.max_bytes - size)
        )

        def write() -> tuple[MemoryItem, bool]:
            for _ in range(_ATTEMPTS):
                try:
                    with TransactWrite(connection=self._connection()) as tx:
                        tx.save(row, condition=model.pk.does_not_exist())
                        tx.update(
                            self._usage_row(item.tenant_id, item.scope),
                            actions=[model.itemCount.add(1), model.byteCount.add(size)],
                            condition=room,
                        )
                    return item, True
                except TransactWriteError as exc:
                    if exc.cause_response_code != "TransactionCanceledException":
                        raise
                held = self._read(item.tenant_id, item.scope, item.id)
                if held is not None:
                    return _memory(held), False
                count, used = self._usage(item.tenant_id, item.scope)
                check_memory_room(count + 1, used + size, limits, held=count, used=used)
            raise StorageUnavailable("memory is too busy to write: try again")

        return await asyncio.to_thread(write)

    async def get(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None:
        row = await asyncio.to_thread(self._read, tenant_id, scope, memory_id)
        return None if row is None else _memory(row)

    async def edit(
        self,
        tenant_id: str,
        scope: str,
        memory_id: str,
        *,
        text: str,
        topic: str | None,
        now_ms: int,
        limits: MemoryLimits,
    ) -> tuple[MemoryItem, MemoryItem] | None:
        model = self._item
        size = item_size(text, topic)

        def write() -> tuple[MemoryItem, MemoryItem] | None:
            for _ in range(_ATTEMPTS):
                row = self._read(tenant_id, scope, memory_id)
                if row is None:
                    return None
                before = _memory(row)
                grow = size - int(row.size or 0)
                if grow > 0:
                    count, used = self._usage(tenant_id, scope)
                    check_memory_room(count, used + grow, limits, held=count, used=used)
                topic_action = model.topic.set(topic) if topic is not None else model.topic.remove()
                try:
                    with TransactWrite(connection=self._connection()) as tx:
                        tx.update(
                            row,
                            actions=[
                                model.text.set(text),
                                topic_action,
                                model.updatedAt.set(now_ms),
                                model.size.set(size),
                            ],
                            condition=(model.size == int(row.size or 0)) & (model.text == before.text),
                        )
                        tx.update(
                            self._usage_row(tenant_id, scope),
                            actions=[model.byteCount.add(grow)],
                            condition=(model.byteCount <= limits.max_bytes - grow) if grow > 0 else None,
                        )
                except TransactWriteError as exc:
                    if exc.cause_response_code != "TransactionCanceledException":
                        raise
                    continue
                after = MemoryItem(
                    memory_id, tenant_id, scope, text, topic, before.source, before.created_at, now_ms
                )
                return before, after
            raise StorageUnavailable("memory is too busy to write: try again")

        return await asyncio.to_thread(write)

    def _delete_rows(self, tenant_id: str, scope: str, rows: list[MemoryTableItem]) -> bool:
        """Delete ``rows`` as read and take them off the usage, at once; False if one changed."""
        model = self._item
        size = sum(int(r.size or 0) for r in rows)
        try:
            with TransactWrite(connection=self._connection()) as tx:
                for r in rows:
                    tx.delete(r, condition=model.size == int(r.size or 0))
                tx.update(
                    self._usage_row(tenant_id, scope),
                    actions=[model.itemCount.add(-len(rows)), model.byteCount.add(-size)],
                )
        except TransactWriteError as exc:
            if exc.cause_response_code != "TransactionCanceledException":
                raise
            return False
        return True

    async def delete(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None:
        def write() -> MemoryItem | None:
            for _ in range(_ATTEMPTS):
                row = self._read(tenant_id, scope, memory_id)
                if row is None:
                    return None
                if self._delete_rows(tenant_id, scope, [row]):
                    return _memory(row)
            raise StorageUnavailable("memory is too busy to write: try again")

        return await asyncio.to_thread(write)

    def _rows(self, tenant_id: str, scope: str) -> list[MemoryTableItem]:
        condition = self._item.sk.startswith(ITEM_PREFIX)
        rows = self._item.query(memory_pk(tenant_id, scope), condition, consistent_read=True)
        return [r for r in rows if r.tenantId == tenant_id and r.scope == scope]

    async def items(self, tenant_id: str, scope: str) -> list[MemoryItem]:
        rows = await asyncio.to_thread(self._rows, tenant_id, scope)
        return sorted((_memory(r) for r in rows), key=lambda i: (i.created_at, i.id))

    async def recall(self, tenant_id: str, scope: str, query: str, *, limit: int) -> list[MemoryItem]:
        return ranked_by_words(await self.items(tenant_id, scope), query, limit=limit)

    async def usage(self, tenant_id: str, scope: str) -> tuple[int, int]:
        return await asyncio.to_thread(self._usage, tenant_id, scope)

    async def clear(self, tenant_id: str, scope: str) -> tuple[int, int]:
        def write() -> tuple[int, int]:
            count = size = 0
            for _ in range(_ATTEMPTS):
                rows = self._rows(tenant_id, scope)
                if not rows:
                    return count, size
                for start in range(0, len(rows), _CHUNK):
                    chunk = rows[start : start + _CHUNK]
                    if self._delete_rows(tenant_id, scope, chunk):
                        count += len(chunk)
                        size += sum(int(r.size or 0) for r in chunk)
            raise StorageUnavailable("memory is too busy to clear: try again")

        return await asyncio.to_thread(write)


__all__ = ["DynamoDbMemoryStore", "MemoryTableItem", "memory_pk"]
