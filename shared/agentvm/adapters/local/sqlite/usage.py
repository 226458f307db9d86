"""The ``UsageRollups`` port on SQLite: the usage table summed with SQL, per hour or per day.

Locally there is nothing to pre-aggregate: the records are in one indexed table
(``usage_by_tenant``: tenant, created_at), a range of them is one index range scan, and SQL sums
it. The sums are therefore always exactly those of the records. Fields a record written before
they existed lacks (``kind``, ``estimated``, cache tokens, the reply cache's saved tokens) count
as their defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.observability.periods import DAY_MS, HOUR_MS
from agentvm.ports import UsageCell

if TYPE_CHECKING:
    from agentvm.adapters.local.sqlite.store import SqliteStore

_SUMS = """
    COUNT(*),
    COALESCE(SUM(json_extract(record, '$.inputTokens')), 0),
    COALESCE(SUM(json_extract(record, '$.outputTokens')), 0),
    COALESCE(SUM(json_extract(record, '$.cacheReadTokens')), 0),
    COALESCE(SUM(json_extract(record, '$.cacheWriteTokens')), 0),
    COALESCE(SUM(json_extract(record, '$.estimated')), 0),
    COALESCE(SUM(json_extract(record, '$.savedInputTokens')), 0),
    COALESCE(SUM(json_extract(record, '$.savedOutputTokens')), 0)
"""
_MODEL = "json_extract(record, '$.model')"
_KIND = "COALESCE(json_extract(record, '$.kind'), 'turn')"
_IMAGE = "json_extract(record, '$.imageId')"


class SqliteUsageRollups:
    """``agentvm.ports.UsageRollups`` over a ``SqliteStore``'s usage table (same connection)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._store.read_all(sql, params)

    async def hour_cells(self, tenant_id: str, start_ms: int, end_ms: int) -> list[UsageCell]:
        rows = self._rows(
            f"SELECT created_at - created_at % {HOUR_MS} AS b, {_MODEL}, {_KIND}, {_SUMS}"
            " FROM usage WHERE tenant_id = ? AND created_at >= ? AND created_at < ?"
            " GROUP BY b, 2, 3",
            (tenant_id, start_ms, end_ms),
        )
        return [UsageCell.from_sums(tenant_id, row[0], row[1], row[2], row[3:]) for row in rows]

    async def day_cells(
        self, tenant_id: str, start_ms: int, end_ms: int, container_id: str | None = None
    ) -> list[UsageCell]:
        where = "tenant_id = ? AND created_at >= ? AND created_at < ?"
        params: tuple[Any, ...] = (tenant_id, start_ms, end_ms)
        if container_id is not None:
            where += " AND container_id = ?"
            params += (container_id,)
        rows = self._rows(
            f"SELECT created_at - created_at % {DAY_MS} AS b, container_id, {_IMAGE}, {_MODEL}, {_KIND},"
            f" {_SUMS} FROM usage WHERE {where} GROUP BY b, 2, 3, 4, 5",
            params,
        )
        return [
            UsageCell.from_sums(
                tenant_id, row[0], row[3], row[4], row[5:], container_id=row[1], image_id=row[2]
            )
            for row in rows
        ]

    async def tenants_with_usage(self, start_ms: int, end_ms: int) -> list[str]:
        rows = self._rows(
            "SELECT DISTINCT tenant_id FROM usage WHERE created_at >= ? AND created_at < ? ORDER BY 1",
            (start_ms, end_ms),
        )
        return [row[0] for row in rows]


__all__ = ["SqliteUsageRollups"]
