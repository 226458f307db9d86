"""The ``RunningTurns`` port on PostgreSQL: the unfinished turns of the whole cluster, so that
``/v1/turns`` and the session centre on any node see every node's.

``mark`` is an idempotent insert (``ON CONFLICT DO NOTHING``), ``unmark`` a delete, a listing one
indexed range read. ``stale`` lists every tenant's marks queued by a time, for the sweeper of turns
with no job (``agent.orphan_turns``). A turn's tokens so far are summed from the Store's ``usage``
table (``0001_store``: its own record and its ``:step:<n>`` ones, a bytewise range of the
``usage_by_turn_bytewise`` index), for every turn asked in one statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.ports import RunningTurn, TurnTokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database

_COLUMNS = "tenant_id, container_id, image_id, session_id, turn_id, queued_at, model"
_FIELDS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
_SUMS = ", ".join(f"COALESCE(SUM((u.record::jsonb->>'{f}')::bigint), 0)" for f in _FIELDS)
# the turn's own record, and its steps' ("<turn>:step:<n>": the range after "<turn>:step:")
_TOKENS = f"""
SELECT t.id, COUNT(u.record), {_SUMS}
FROM unnest(%s::text[]) AS t (id)
LEFT JOIN LATERAL (
    SELECT record FROM usage WHERE turn_id = t.id
    UNION ALL
    SELECT record FROM usage
    WHERE turn_id COLLATE "C" >= (t.id || ':step:') COLLATE "C"
      AND turn_id COLLATE "C" < (t.id || ':step;') COLLATE "C"
) AS u ON true
GROUP BY t.id
"""


class PostgresRunningTurns:
    """``agentvm.ports.RunningTurns`` on the node's ``Database`` (the Store's, for the usage)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def mark(self, turn: RunningTurn) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                f"INSERT INTO running_turns ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (
                    turn.tenant_id,
                    turn.container_id,
                    turn.image_id,
                    turn.session_id,
                    turn.turn_id,
                    turn.queued_at,
                    turn.model,
                ),
            )

    async def unmark(self, tenant_id: str, container_id: str, turn_id: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "DELETE FROM running_turns WHERE tenant_id = %s AND turn_id = %s AND container_id = %s",
                (tenant_id, turn_id, container_id),
            )

    async def running(
        self, tenant_id: str, container_id: str | None = None, limit: int = 500
    ) -> list[RunningTurn]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM running_turns"
                " WHERE tenant_id = %s AND (%s::text IS NULL OR container_id = %s)"
                " ORDER BY queued_at, turn_id LIMIT %s",
                (tenant_id, container_id, container_id, limit),
            )
            rows = await cur.fetchall()
        return [RunningTurn(*row) for row in rows]

    async def stale(self, queued_by_ms: int, limit: int) -> list[RunningTurn]:
        """Every tenant's marks queued at or before ``queued_by_ms``, oldest first."""
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM running_turns WHERE queued_at <= %s"
                " ORDER BY queued_at, turn_id LIMIT %s",
                (queued_by_ms, limit),
            )
            rows = await cur.fetchall()
        return [RunningTurn(*row) for row in rows]

    async def tokens(self, turn_ids: Sequence[str]) -> dict[str, TurnTokens]:
        if not turn_ids:
            return {}
        async with self._db.connection() as conn:
            cur = await conn.execute(_TOKENS, (list(turn_ids),))
            rows = await cur.fetchall()
        return {row[0]: TurnTokens(*(int(v) for v in row[1:])) for row in rows}


__all__ = ["PostgresRunningTurns"]
