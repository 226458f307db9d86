"""The ``MemoryStore`` port on SQLite (``ports/memory.py``): one row per item in ``memory_items``,
and its words in the FTS5 table ``memory_fts`` (same rowid; the ``unicode61`` tokenizer: case- and
accent-insensitive whole words), so recall is one FTS5 query ranked by ``bm25``.

Each write runs in one ``BEGIN IMMEDIATE`` transaction (the scope's count and bytes read, checked
and written together), so two processes sharing the file cannot pass a scope's limits together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.ports import MemoryItem, MemoryLimits, check_memory_room, item_size, memory_words

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_items (
    rowid      INTEGER PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    id         TEXT NOT NULL,
    topic      TEXT,
    text       TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    size       INTEGER NOT NULL,
    UNIQUE (tenant_id, scope, id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(topic, text, tokenize = 'unicode61');
"""

_COLUMNS = "id, tenant_id, scope, text, topic, source, created_at, updated_at"
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))


def _item(row: tuple[object, ...]) -> MemoryItem:
    return MemoryItem(*row)  # type: ignore[arg-type]


class SqliteMemoryStore:
    """``agentvm.ports.MemoryStore`` on SQLite."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    def _transaction(self) -> _Immediate:
        return _Immediate(self._conn)

    def _usage(self, tenant_id: str, scope: str) -> tuple[int, int]:
        row = self._conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM memory_items WHERE tenant_id = ? AND scope = ?",
            (tenant_id, scope),
        ).fetchone()
        return int(row[0]), int(row[1])

    def _get(self, tenant_id: str, scope: str, memory_id: str) -> tuple[int, MemoryItem] | None:
        row = self._conn.execute(
            f"SELECT rowid, {_COLUMNS} FROM memory_items WHERE tenant_id = ? AND scope = ? AND id = ?",
            (tenant_id, scope, memory_id),
        ).fetchone()
        return None if row is None else (int(row[0]), _item(row[1:]))

    async def add(self, item: MemoryItem, limits: MemoryLimits) -> tuple[MemoryItem, bool]:
        with self._transaction():
            held = self._get(item.tenant_id, item.scope, item.id)
            if held is not None:
                return held[1], False
            count, used = self._usage(item.tenant_id, item.scope)
            check_memory_room(count + 1, used + item.size, limits, held=count, used=used)
            cur = self._conn.execute(
                f"INSERT INTO memory_items ({_COLUMNS}, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            self._conn.execute(
                "INSERT INTO memory_fts (rowid, topic, text) VALUES (?, ?, ?)",
                (cur.lastrowid, item.topic or "", item.text),
            )
        return item, True

    async def get(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None:
        held = self._get(tenant_id, scope, memory_id)
        return None if held is None else held[1]

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
        with self._transaction():
            held = self._get(tenant_id, scope, memory_id)
            if held is None:
                return None
            rowid, before = held
            size = item_size(text, topic)
            if size > before.size:
                count, used = self._usage(tenant_id, scope)
                check_memory_room(count, used - before.size + size, limits, held=count, used=used)
            after = MemoryItem(
                before.id, tenant_id, scope, text, topic, before.source, before.created_at, now_ms
            )
            self._conn.execute(
                "UPDATE memory_items SET text = ?, topic = ?, updated_at = ?, size = ? WHERE rowid = ?",
                (text, topic, now_ms, size, rowid),
            )
            self._conn.execute(
                "UPDATE memory_fts SET topic = ?, text = ? WHERE rowid = ?", (topic or "", text, rowid)
            )
        return before, after

    async def delete(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None:
        with self._transaction():
            held = self._get(tenant_id, scope, memory_id)
            if held is None:
                return None
            self._conn.execute("DELETE FROM memory_items WHERE rowid = ?", (held[0],))
            self._conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (held[0],))
        return held[1]

    async def items(self, tenant_id: str, scope: str) -> list[MemoryItem]:
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM memory_items WHERE tenant_id = ? AND scope = ? ORDER BY created_at, id",
            (tenant_id, scope),
        ).fetchall()
        return [_item(r) for r in rows]

    async def recall(self, tenant_id: str, scope: str, query: str, *, limit: int) -> list[MemoryItem]:
        words = memory_words(query)
        if not words:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM memory_items WHERE tenant_id = ? AND scope = ?"
                " ORDER BY updated_at DESC, id DESC LIMIT ?",
                (tenant_id, scope, limit),
            ).fetchall()
            return [_item(r) for r in rows]
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self._conn.execute(
            f"SELECT {_M_COLUMNS} FROM memory_fts JOIN memory_items m ON m.rowid = memory_fts.rowid"
            " WHERE memory_fts MATCH ? AND m.tenant_id = ? AND m.scope = ?"
            " ORDER BY bm25(memory_fts), m.updated_at DESC LIMIT ?",
            (match, tenant_id, scope, limit),
        ).fetchall()
        return [_item(r) for r in rows]

    async def usage(self, tenant_id: str, scope: str) -> tuple[int, int]:
        return self._usage(tenant_id, scope)

    async def clear(self, tenant_id: str, scope: str) -> tuple[int, int]:
        with self._transaction():
            count, used = self._usage(tenant_id, scope)
            self._conn.execute(
                "DELETE FROM memory_fts WHERE rowid IN"
                " (SELECT rowid FROM memory_items WHERE tenant_id = ? AND scope = ?)",
                (tenant_id, scope),
            )
            self._conn.execute(
                "DELETE FROM memory_items WHERE tenant_id = ? AND scope = ?", (tenant_id, scope)
            )
        return count, used

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete every item of a deleted tenant; how many there were."""
        with self._transaction():
            self._conn.execute(
                "DELETE FROM memory_fts WHERE rowid IN (SELECT rowid FROM memory_items WHERE tenant_id = ?)",
                (tenant_id,),
            )
            return self._conn.execute("DELETE FROM memory_items WHERE tenant_id = ?", (tenant_id,)).rowcount


class _Immediate:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an exception) on an autocommit
    connection; inside a transaction already (a shared connection's), it joins it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._own = False

    def __enter__(self) -> None:
        if not self._conn.in_transaction:
            self._conn.execute("BEGIN IMMEDIATE")
            self._own = True

    def __exit__(self, kind: object, *_: object) -> None:
        if self._own:
            self._conn.execute("ROLLBACK" if kind is not None else "COMMIT")


__all__ = ["SqliteMemoryStore"]
