"""The ``McpOAuthRecords`` port on PostgreSQL: tenants' sealed OAuth records of a cluster's MCP servers.

One row per key (migration ``0114_mcp_oauth_records``), so a browser flow started on one node is
finished by the callback on any other. ``take`` is one ``DELETE ... RETURNING``: of concurrent
takers, on any nodes, the row lock lets one delete it and the others find nothing. ``put`` is one
upsert whose update applies only to a row of the same tenant: another tenant's live key is left as
it is and the write raises ``Conflict``. Expired rows are invisible and deleted by the next ``put``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from agentvm.errors import Conflict
from agentvm.ports import check_mcp_oauth_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.adapters.postgres.database import Database

_LIVE = "(expires_at IS NULL OR expires_at >= %s)"


class PostgresMcpOAuthRecords:
    """``agentvm.ports.McpOAuthRecords`` on the node's ``Database``. ``now`` returns epoch seconds
    (tests pass their own to expire records)."""

    def __init__(self, database: Database, *, now: Callable[[], float] = time.time) -> None:
        self._db = database
        self._now = now

    async def get(self, tenant_id: str, key: str) -> str | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"SELECT value FROM mcp_oauth_records WHERE key = %s AND tenant_id = %s AND {_LIVE}",
                (key, tenant_id, self._now()),
            )
            row = await cur.fetchone()
        return None if row is None else str(row[0])

    async def put(self, tenant_id: str, key: str, value: str, *, expires_at: float | None = None) -> None:
        check_mcp_oauth_record(key, value)
        async with self._db.connection() as conn:
            await conn.execute("DELETE FROM mcp_oauth_records WHERE expires_at < %s", (self._now(),))
            cur = await conn.execute(
                "INSERT INTO mcp_oauth_records (key, tenant_id, value, expires_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
                " WHERE mcp_oauth_records.tenant_id = excluded.tenant_id",
                (key, tenant_id, value, expires_at),
            )
            written = cur.rowcount == 1
        if not written:
            raise Conflict("this MCP OAuth record belongs to another tenant")

    async def take(self, key: str) -> tuple[str, str] | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"DELETE FROM mcp_oauth_records WHERE key = %s AND {_LIVE} RETURNING tenant_id, value",
                (key, self._now()),
            )
            row = await cur.fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    async def delete(self, tenant_id: str, key: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "DELETE FROM mcp_oauth_records WHERE key = %s AND tenant_id = %s", (key, tenant_id)
            )

    async def delete_tenant(self, tenant_id: str) -> int:
        async with self._db.connection() as conn:
            cur = await conn.execute("DELETE FROM mcp_oauth_records WHERE tenant_id = %s", (tenant_id,))
            return cur.rowcount


__all__ = ["PostgresMcpOAuthRecords"]
