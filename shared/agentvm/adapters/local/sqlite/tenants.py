"""The ``TenantStore`` port on SQLite (the local host).

The status is read from the record's JSON (``json_extract``; records written before statuses
existed read as ``active``), so the table needs no migration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.records import TenantRecord

if TYPE_CHECKING:
    from collections.abc import Collection
    from pathlib import Path

    from agentvm.records import TenantStatus

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (
    tenant_id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, record TEXT NOT NULL
);
"""
_STATUS = "COALESCE(json_extract(record, '$.status'), 'active')"


class SqliteTenantStore:
    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def create_tenant(self, tenant: TenantRecord) -> bool:
        cur = self._conn.execute(
            "INSERT INTO tenants (tenant_id, created_at, record) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (tenant.tenantId, tenant.createdAt, tenant.model_dump_json()),
        )
        return cur.rowcount == 1

    async def get_tenant(self, tenant_id: str) -> TenantRecord | None:
        row = self._conn.execute("SELECT record FROM tenants WHERE tenant_id = ?", (tenant_id,)).fetchone()
        return None if row is None else TenantRecord.model_validate_json(row[0])

    async def replace_tenant(self, tenant: TenantRecord, *, status: TenantStatus) -> bool:
        cur = self._conn.execute(
            f"UPDATE tenants SET record = ? WHERE tenant_id = ? AND {_STATUS} = ?",
            (tenant.model_dump_json(), tenant.tenantId, status),
        )
        return cur.rowcount == 1

    async def list_tenants(
        self, *, statuses: Collection[TenantStatus] | None = None, limit: int = 100, after: str | None = None
    ) -> tuple[list[TenantRecord], str | None]:
        sql, args = "SELECT record FROM tenants WHERE tenant_id > ?", [after or ""]
        if statuses is not None:
            sql += f" AND {_STATUS} IN ({', '.join('?' * len(statuses))})"
            args += list(statuses)
        rows = self._conn.execute(f"{sql} ORDER BY tenant_id LIMIT ?", (*args, limit + 1)).fetchall()
        page = [TenantRecord.model_validate_json(r[0]) for r in rows[:limit]]
        return page, page[-1].tenantId if len(rows) > limit else None


__all__ = ["SqliteTenantStore"]
