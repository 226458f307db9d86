"""The ``TenantStore`` port on SQLite (the local host)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite_store import connect
from agentvm.records import TenantRecord

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (
    tenant_id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, record TEXT NOT NULL
);
"""


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

    async def put_tenant(self, tenant: TenantRecord) -> None:
        self._conn.execute(
            "UPDATE tenants SET record = ? WHERE tenant_id = ?", (tenant.model_dump_json(), tenant.tenantId)
        )

    async def list_tenants(self) -> list[TenantRecord]:
        rows = self._conn.execute("SELECT record FROM tenants ORDER BY created_at, tenant_id").fetchall()
        return [TenantRecord.model_validate_json(r[0]) for r in rows]

    async def delete_tenant(self, tenant_id: str) -> bool:
        return self._conn.execute("DELETE FROM tenants WHERE tenant_id = ?", (tenant_id,)).rowcount == 1


__all__ = ["SqliteTenantStore"]
