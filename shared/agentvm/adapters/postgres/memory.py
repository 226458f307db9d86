"""The ``MemoryStore`` port on PostgreSQL (the cluster host; ``ports/memory.py``): one row per item
in ``memory_items`` (migration ``0110_memory``), its words a generated ``tsvector`` ('simple'
configuration: lower-cased whole words, no stemming) under a GIN index, so recall is one query
ranked by ``ts_rank``.

A write is one transaction holding a transaction-level advisory lock on its scope (class
``_LOCK_CLASS``): the scope's count and bytes are read, checked and written under it, so two nodes
writing one scope at once cannot pass its limits together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.ports import MemoryItem, MemoryLimits, check_memory_room, item_size, memory_words

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from agentvm.adapters.postgres.database import Database

_COLUMNS = "id, tenant_id, scope, text, topic, source, created_at, updated_at"
# the advisory-lock class of memory scopes: b"avmm" as a signed 32-bit integer
_LOCK_CLASS = int.from_bytes(b"avmm", "big", signed=True)
_LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s || '#' || %s))"
_USAGE = "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM memory_items WHERE tenant_id = %s AND scope = %s"
_GET = f"SELECT {_COLUMNS} FROM memory_items WHERE tenant_id = %s AND scope = %s AND id = %s"


def _item(row: Any) -> MemoryItem:
    return MemoryItem(*row)


class PostgresMemoryStore:
    """``agentvm.ports.MemoryStore`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def _locked(self, conn: AsyncConnection, tenant_id: str, scope: str) -> tuple[int, int]:
        """Take the scope's lock; what it holds: ``(items, bytes)``."""
        async with conn.pipeline():
            await conn.execute(_LOCK, (_LOCK_CLASS, tenant_id, scope))
            cur = await conn.execute(_USAGE, (tenant_id, scope))
        row = await cur.fetchone()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    async def add(self, item: MemoryItem, limits: MemoryLimits) -> tuple[MemoryItem, bool]:
        async with self._db.transaction() as conn:
            count, used = await self._locked(conn, item.tenant_id, item.scope)
            cur = await conn.execute(_GET, (item.tenant_id, item.scope, item.id))
            row = await cur.fetchone()
            if row is not None:
                return _item(row), False
            check_memory_room(count + 1, used + item.size, limits, held=count, used=used)
            await conn.execute(
                f"INSERT INTO memory_items ({_COLUMNS}, size) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    item.id,
                    item.tenant_id,
                    item.scope,
                    item.text,
                    item.topic,
                    item.source,
                    item.created_at,
                    item.updated_at,
                    item.size,
                ),
            )
        return item, True

    async def get(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(_GET, (tenant_id, scope, memory_id))
            row = await cur.fetchone()
        return None if row is None else _item(row)

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
        async with self._db.transaction() as conn:
            count, used = await self._locked(conn, tenant_id, scope)
            cur = await conn.execute(_GET, (tenant_id, scope, memory_id))
            row = await cur.fetchone()
            if row is None:
                return None
            before = _item(row)
            size = item_size(text, topic)
            if size > before.size:
                check_memory_room(count, used - before.size + size, limits, held=count, used=used)
            await conn.execute(
                "UPDATE memory_items SET text = %s, topic = %s, updated_at = %s, size = %s"
                " WHERE tenant_id = %s AND scope = %s AND id = %s",
                (text, topic, now_ms, size, tenant_id, scope, memory_id),
            )
        after = MemoryItem(before.id, tenant_id, scope, text, topic, before.source, before.created_at, now_ms)
        return before, after

    async def delete(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM memory_items WHERE tenant_id = %s AND scope = %s AND id = %s"
                f" RETURNING {_COLUMNS}",
                (tenant_id, scope, memory_id),
            )
            row = await cur.fetchone()
        return None if row is None else _item(row)

    async def items(self, tenant_id: str, scope: str) -> list[MemoryItem]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM memory_items WHERE tenant_id = %s AND scope = %s"
                " ORDER BY created_at, id",
                (tenant_id, scope),
            )
            rows = await cur.fetchall()
        return [_item(r) for r in rows]

    async def recall(self, tenant_id: str, scope: str, query: str, *, limit: int) -> list[MemoryItem]:
        words = memory_words(query)
        async with self._db.connection() as conn:
            if not words:
                cur = await conn.execute(
                    f"SELECT {_COLUMNS} FROM memory_items WHERE tenant_id = %s AND scope = %s"
                    " ORDER BY updated_at DESC, id DESC LIMIT %s",
                    (tenant_id, scope, limit),
                )
            else:
                # each word a quoted lexeme (no tsquery syntax gets through), any of them matching
                tsquery = " | ".join("'" + w.replace("'", "''").replace("\\", "\\\\") + "'" for w in words)
                cur = await conn.execute(
                    f"SELECT {_COLUMNS} FROM memory_items, to_tsquery('simple', %s) q"
                    " WHERE tenant_id = %s AND scope = %s AND words @@ q"
                    " ORDER BY ts_rank(words, q) DESC, updated_at DESC LIMIT %s",
                    (tsquery, tenant_id, scope, limit),
                )
            rows = await cur.fetchall()
        return [_item(r) for r in rows]

    async def usage(self, tenant_id: str, scope: str) -> tuple[int, int]:
        async with self._db.connection() as conn:
            cur = await conn.execute(_USAGE, (tenant_id, scope))
            row = await cur.fetchone()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    async def clear(self, tenant_id: str, scope: str) -> tuple[int, int]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "WITH gone AS (DELETE FROM memory_items WHERE tenant_id = %s AND scope = %s RETURNING size)"
                " SELECT COUNT(*), COALESCE(SUM(size), 0) FROM gone",
                (tenant_id, scope),
            )
            row = await cur.fetchone()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete every item of a deleted tenant; how many there were."""
        async with self._db.connection() as conn:
            cur = await conn.execute("DELETE FROM memory_items WHERE tenant_id = %s", (tenant_id,))
            return cur.rowcount


__all__ = ["PostgresMemoryStore"]
