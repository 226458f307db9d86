"""The ``BudgetStore`` port on PostgreSQL (the cluster host). A tenant-wide budget has
``container_id = ''`` (the protocol requires container ids of at least one character)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import BudgetRecord

if TYPE_CHECKING:
    from agentvm.adapters.postgres.database import Database


class PostgresBudgetStore:
    """``agentvm.ports.BudgetStore`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def put_budget(self, budget: BudgetRecord) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO budgets (tenant_id, container_id, record) VALUES (%s, %s, %s::jsonb)"
                " ON CONFLICT (tenant_id, container_id) DO UPDATE SET record = excluded.record",
                (budget.tenantId, budget.containerId or "", budget.model_dump_json()),
            )

    async def get_budget(self, tenant_id: str, container_id: str | None = None) -> BudgetRecord | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM budgets WHERE tenant_id = %s AND container_id = %s",
                (tenant_id, container_id or ""),
            )
            row = await cur.fetchone()
        return None if row is None else BudgetRecord.model_validate_json(row[0])

    async def delete_budgets(self, tenant_id: str) -> int:
        async with self._db.connection() as conn:
            cur = await conn.execute("DELETE FROM budgets WHERE tenant_id = %s", (tenant_id,))
            return cur.rowcount


__all__ = ["PostgresBudgetStore"]
