"""The ``ReplyCache`` port on SQLite: a direct-mapped table of cached replies in the data dir's
database (``ports/replies.py``): one row per ``(tenant, slot)``, so a tenant holds ``slots`` rows at
most. A get is one primary-key read (the stored key and expiry re-checked), a put one upsert."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.ports import DEFAULT_REPLY_SLOTS, CachedReply, reply_slot

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

    async def get(self, tenant_id: str, key: str, *, now_ms: int) -> CachedReply | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM reply_cache WHERE tenant_id = ? AND slot = ?",
            (tenant_id, reply_slot(key, self._slots)),
        ).fetchone()
        if row is None or row[0] != key or row[6] <= now_ms:
            return None
        return CachedReply(*row)

    async def put(self, tenant_id: str, reply: CachedReply) -> None:
        self._conn.execute(
            f"INSERT OR REPLACE INTO reply_cache (tenant_id, slot, {_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tenant_id,
                reply_slot(reply.key, self._slots),
                reply.key,
                reply.text,
                reply.model,
                reply.input_tokens,
                reply.output_tokens,
                reply.created_at,
                reply.expires_at,
            ),
        )

    def count(self, tenant_id: str) -> int:
        """The entries the tenant holds (for tests and operators)."""
        return int(
            self._conn.execute(
                "SELECT COUNT(*) FROM reply_cache WHERE tenant_id = ?", (tenant_id,)
            ).fetchone()[0]
        )


__all__ = ["SqliteReplyCache"]
