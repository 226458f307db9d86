"""The ``ReplyCache`` port on SQLite: a two-way set-associative table of cached replies in the data
dir's database (``ports/replies.py``): one row per ``(tenant, slot)``, slot = set * 2 + way, so a
tenant holds ``slots`` rows at most. A get is one primary-key range read of the key's set (the
stored key and expiry re-checked); a put reads the set, then upserts the way ``way_for`` picks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.ports import DEFAULT_REPLY_SLOTS, REPLY_WAYS, CachedReply, reply_set, way_for

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reply_cache (
    tenant_id     TEXT NOT NULL,
    slot          INTEGER NOT NULL,
    cache_key     TEXT NOT NULL,
    text          TEXT NOT NULL,
    model         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, slot)
) WITHOUT ROWID;
"""

_COLUMNS = "cache_key, text, model, input_tokens, output_tokens, created_at, expires_at"


class SqliteReplyCache:
    """``agentvm.ports.ReplyCache`` on SQLite; ``slots``: the entries a tenant may hold."""

    def __init__(self, path: str | Path, *, slots: int = DEFAULT_REPLY_SLOTS) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        self._slots = slots

    def close(self) -> None:
        self._conn.close()

    def _set(self, tenant_id: str, key: str) -> tuple[int, dict[int, CachedReply]]:
        """The first slot of the key's set, and what its ways hold (by way)."""
        first = reply_set(key, self._slots) * REPLY_WAYS
        rows = self._conn.execute(
            f"SELECT slot, {_COLUMNS} FROM reply_cache WHERE tenant_id = ? AND slot >= ? AND slot < ?",
            (tenant_id, first, first + REPLY_WAYS),
        ).fetchall()
        return first, {row[0] - first: CachedReply(*row[1:]) for row in rows}

    async def get(self, tenant_id: str, key: str, *, now_ms: int) -> CachedReply | None:
        _, held = self._set(tenant_id, key)
        return next((r for r in held.values() if r.key == key and r.expires_at > now_ms), None)

    async def put(self, tenant_id: str, reply: CachedReply) -> None:
        first, held = self._set(tenant_id, reply.key)
        self._conn.execute(
            f"INSERT OR REPLACE INTO reply_cache (tenant_id, slot, {_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tenant_id,
                first + way_for(held, reply.key, now_ms=reply.created_at),
                reply.key,
                reply.text,
                reply.model,
                reply.input_tokens,
                reply.output_tokens,
                reply.created_at,
                reply.expires_at,
            ),
        )

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete every reply of a deleted tenant (``tenant_purge``); how many there were."""
        return self._conn.execute("DELETE FROM reply_cache WHERE tenant_id = ?", (tenant_id,)).rowcount

    def count(self, tenant_id: str) -> int:
        """The entries the tenant holds (for tests and operators)."""
        row = self._conn.execute(
            "SELECT COUNT(*) FROM reply_cache WHERE tenant_id = ?", (tenant_id,)
        ).fetchone()
        return int(row[0])


__all__ = ["SqliteReplyCache"]
