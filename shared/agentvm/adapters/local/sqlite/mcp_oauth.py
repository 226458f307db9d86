"""The ``McpOAuthRecords`` port on SQLite: tenants' sealed OAuth records of remote MCP servers.

One row per key in ``agentvm.db``, shared by ``avm serve --workers N``: the worker that starts a
browser flow writes the pending authorization, the one the callback reaches takes it with one
``DELETE ... RETURNING`` (SQLite runs one writer at a time, so of two takers one gets the row).
``put`` is one upsert whose update applies only to a row of the same tenant (or an expired one):
another tenant's live key is left as it is and the write raises ``Conflict``. Expired rows are
invisible to reads and deleted by the next ``put``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.errors import Conflict
from agentvm.ports import check_mcp_oauth_record

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_oauth_records (
    key        TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    value      TEXT NOT NULL,
    expires_at REAL
);
CREATE INDEX IF NOT EXISTS mcp_oauth_records_by_tenant ON mcp_oauth_records (tenant_id);
CREATE INDEX IF NOT EXISTS mcp_oauth_records_by_expiry ON mcp_oauth_records (expires_at)
    WHERE expires_at IS NOT NULL;
"""
_LIVE = "(expires_at IS NULL OR expires_at >= ?)"


class SqliteMcpOAuthRecords:
    """``agentvm.ports.McpOAuthRecords`` on one SQLite file (or ``":memory:"``). ``now`` returns
    epoch seconds (tests pass their own to expire records)."""

    def __init__(self, path: str | Path, *, now: Callable[[], float] = time.time) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        self._now = now

    def close(self) -> None:
        self._conn.close()

    async def get(self, tenant_id: str, key: str) -> str | None:
        row = self._conn.execute(
            f"SELECT value FROM mcp_oauth_records WHERE key = ? AND tenant_id = ? AND {_LIVE}",
            (key, tenant_id, self._now()),
        ).fetchone()
        return None if row is None else str(row[0])

    async def put(self, tenant_id: str, key: str, value: str, *, expires_at: float | None = None) -> None:
        check_mcp_oauth_record(key, value)
        now = self._now()
        self._conn.execute("DELETE FROM mcp_oauth_records WHERE expires_at < ?", (now,))
        cursor = self._conn.execute(
            "INSERT INTO mcp_oauth_records (key, tenant_id, value, expires_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
            " WHERE mcp_oauth_records.tenant_id = excluded.tenant_id",
            (key, tenant_id, value, expires_at),
        )
        if cursor.rowcount != 1:
            raise Conflict("this MCP OAuth record belongs to another tenant")

    async def take(self, key: str) -> tuple[str, str] | None:
        row = self._conn.execute(
            f"DELETE FROM mcp_oauth_records WHERE key = ? AND {_LIVE} RETURNING tenant_id, value",
            (key, self._now()),
        ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    async def delete(self, tenant_id: str, key: str) -> None:
        self._conn.execute("DELETE FROM mcp_oauth_records WHERE key = ? AND tenant_id = ?", (key, tenant_id))

    async def delete_tenant(self, tenant_id: str) -> int:
        cursor = self._conn.execute("DELETE FROM mcp_oauth_records WHERE tenant_id = ?", (tenant_id,))
        return cursor.rowcount


__all__ = ["SqliteMcpOAuthRecords"]
