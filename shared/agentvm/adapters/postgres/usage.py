"""The ``UsageRollups`` port on PostgreSQL: the usage table summed with SQL, per hour or per day.

As on SQLite there is nothing to pre-aggregate: a tenant's records of a period are one range scan
of ``usage_by_tenant`` (tenant, created_at), and the sums are always exactly those of the records,
whichever node wrote them. Fields a record written before they existed lacks (``kind``,
``estimated``, cache tokens, the reply cache's saved tokens) count as their defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.observability.periods import DAY_MS, HOUR_MS
from agentvm.ports import UsageCell

if TYPE_CHECKING:
    from agentvm.adapters.postgres.database import Database

# Each record's JSON is parsed once (the subquery's ``r``), then summed.
_RECORDS = (
    "(SELECT created_at, container_id, record::jsonb AS r FROM usage"
    " WHERE tenant_id = %s AND created_at >= %s AND created_at < %s{extra} OFFSET 0) AS u"
)
_SUMS = """
    COUNT(*),
    COALESCE(SUM((r->>'inputTokens')::bigint), 0),
    COALESCE(SUM((r->>'outputTokens')::bigint), 0),
    COALESCE(SUM((r->>'cacheReadTokens')::bigint), 0),
    COALESCE(SUM((r->>'cacheWriteTokens')::bigint), 0),
    COUNT(*) FILTER (WHERE (r->>'estimated')::boolean),
    COALESCE(SUM((r->>'savedInputTokens')::bigint), 0),
    COALESCE(SUM((r->>'savedOutputTokens')::bigint), 0)
"""
_MODEL = "r->>'model'"
_KIND = "COALESCE(r->>'kind', 'turn')"
_IMAGE = "r->>'imageId'"


class PostgresUsageRollups:
    """``agentvm.ports.UsageRollups`` over ``PostgresStore``'s usage table."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def _rows(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._db.connection() as conn:
            cursor = await conn.execute(query.encode(), params)
            return await cursor.fetchall()

    async def hour_cells(self, tenant_id: str, start_ms: int, end_ms: int) -> list[UsageCell]:
        rows = await self._rows(
            f"SELECT created_at - created_at %% {HOUR_MS} AS b, {_MODEL}, {_KIND}, {_SUMS}"
            f" FROM {_RECORDS.format(extra='')} GROUP BY 1, 2, 3",
            (tenant_id, start_ms, end_ms),
        )
        return [UsageCell.from_sums(tenant_id, row[0], row[1], row[2], row[3:]) for row in rows]

    async def day_cells(
        self, tenant_id: str, start_ms: int, end_ms: int, container_id: str | None = None
    ) -> list[UsageCell]:
        params: tuple[Any, ...] = (tenant_id, start_ms, end_ms)
        extra = ""
        if container_id is not None:
            extra = " AND container_id = %s"
            params += (container_id,)
        rows = await self._rows(
            f"SELECT created_at - created_at %% {DAY_MS} AS b, container_id, {_IMAGE}, {_MODEL}, {_KIND},"
            f" {_SUMS} FROM {_RECORDS.format(extra=extra)} GROUP BY 1, 2, 3, 4, 5",
            params,
        )
        return [
            UsageCell.from_sums(
                tenant_id, row[0], row[3], row[4], row[5:], container_id=row[1], image_id=row[2]
            )
            for row in rows
        ]

    async def tenants_with_usage(self, start_ms: int, end_ms: int) -> list[str]:
        rows = await self._rows(
            "SELECT DISTINCT tenant_id FROM usage WHERE created_at >= %s AND created_at < %s ORDER BY 1",
            (start_ms, end_ms),
        )
        return [row[0] for row in rows]


__all__ = ["PostgresUsageRollups"]
