"""The ``TenantStore`` port on PostgreSQL (the cluster host).

A tenant is created with ``ON CONFLICT DO NOTHING`` (once, whichever node asks first; a tombstone
keeps its id) and replaced by an ``UPDATE`` conditional on the status the caller read, so a node
that read the tenant before another began deleting it cannot revive it. The status is read from
the record (``record->>'status'``; records written before statuses existed read as ``active``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import TenantRecord

if TYPE_CHECKING:
    from collections.abc import Collection

    from agentvm.adapters.postgres.database import Database
    from agentvm.records import TenantStatus

_STATUS = "COALESCE(record->>'status', 'active')"


class PostgresTenantStore:
    """``agentvm.ports.TenantStore`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def create_tenant(self, tenant: TenantRecord) -> bool:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO tenants (tenant_id, created_at, record) VALUES (%s, %s, %s::jsonb)"
                " ON CONFLICT DO NOTHING",
                (tenant.tenantId, tenant.createdAt, tenant.model_dump_json()),
            )
            return cur.rowcount == 1

    async def get_tenant(self, tenant_id: str) -> TenantRecord | None:
        async with self._db.connection() as conn:
            cur = await conn.execute("SELECT record::text FROM tenants WHERE tenant_id = %s", (tenant_id,))
            row = await cur.fetchone()
        return None if row is None else TenantRecord.model_validate_json(row[0])

    async def replace_tenant(self, tenant: TenantRecord, *, status: TenantStatus) -> bool:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"UPDATE tenants SET record = %s::jsonb WHERE tenant_id = %s AND {_STATUS} = %s",
                (tenant.model_dump_json(), tenant.tenantId, status),
            )
            return cur.rowcount == 1

    async def list_tenants(
        self, *, statuses: Collection[TenantStatus] | None = None, limit: int = 100, after: str | None = None
    ) -> tuple[list[TenantRecord], str | None]:
        sql = "SELECT record::text FROM tenants WHERE tenant_id > %(after)s"
        if statuses is not None:
            sql += f" AND {_STATUS} = ANY(%(statuses)s::text[])"
        async with self._db.connection() as conn:
            cur = await conn.execute(
                sql + " ORDER BY tenant_id LIMIT %(limit)s",
                {"after": after or "", "statuses": list(statuses or ()), "limit": limit + 1},
            )
            rows = await cur.fetchall()
        page = [TenantRecord.model_validate_json(r[0]) for r in rows[:limit]]
        return page, page[-1].tenantId if len(rows) > limit else None


__all__ = ["PostgresTenantStore"]
