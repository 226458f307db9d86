"""The ``BudgetStore`` port on SQLite (the local host). A tenant-wide budget has ``container_id = ''``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.records import BudgetRecord

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,  -- '' for the tenant-wide budget
    record       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, container_id)
) WITHOUT ROWID;
"""
# '' cannot be a container id: the protocol requires container ids of at least one character.


class SqliteBudgetStore:
    """``agentvm.ports.BudgetStore`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def put_budget(self, budget: BudgetRecord) -> None:
        self._conn.execute(
            "INSERT INTO budgets (tenant_id, container_id, record) VALUES (?, ?, ?)"
            " ON CONFLICT (tenant_id, container_id) DO UPDATE SET record = excluded.record",
            (budget.tenantId, budget.containerId or "", budget.model_dump_json()),
        )

    async def get_budget(self, tenant_id: str, container_id: str | None = None) -> BudgetRecord | None:
        row = self._conn.execute(
            "SELECT record FROM budgets WHERE tenant_id = ? AND container_id = ?",
            (tenant_id, container_id or ""),
        ).fetchone()
        return None if row is None else BudgetRecord.model_validate_json(row[0])

    async def delete_budgets(self, tenant_id: str) -> int:
        return self._conn.execute("DELETE FROM budgets WHERE tenant_id = ?", (tenant_id,)).rowcount


__all__ = ["SqliteBudgetStore"]
