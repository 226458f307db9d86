"""The ``ToolWaits`` port on PostgreSQL (the cluster host): one row per wait, its record as JSON.

The columns beside ``record`` are what the queries filter on (partial indexes over the waits not
consumed yet). A change of a wait (``decide``, ``consume``, ``reschedule``) is one transaction that
reads the row ``FOR UPDATE``, so changes from several nodes queue on the row lock and each sees the
one before it: of two decisions sent at once to two nodes exactly one wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.records import ToolWait

if TYPE_CHECKING:
    from collections.abc import Mapping

    from psycopg import AsyncConnection

    from agentvm.adapters.postgres.database import Database

_LOCKED = "SELECT record::text FROM tool_waits WHERE turn_id = %s AND call_id = %s FOR UPDATE"


class PostgresToolWaits:
    """``agentvm.ports.ToolWaits`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def put_wait(self, wait: ToolWait) -> bool:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO tool_waits (turn_id, call_id, tenant_id, container_id, status, consumed,"
                " check_at, created_at, record) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)"
                " ON CONFLICT (turn_id, call_id) DO NOTHING",
                (
                    wait.turnId,
                    wait.toolCallId,
                    wait.tenantId,
                    wait.containerId,
                    wait.status,
                    wait.consumed,
                    wait.checkAt,
                    wait.createdAt,
                    wait.model_dump_json(),
                ),
            )
            return cur.rowcount == 1

    async def get_wait(self, turn_id: str, call_id: str) -> ToolWait | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM tool_waits WHERE turn_id = %s AND call_id = %s", (turn_id, call_id)
            )
            row = await cur.fetchone()
        return None if row is None else ToolWait.model_validate_json(row[0])

    async def turn_waits(self, turn_id: str) -> list[ToolWait]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM tool_waits WHERE turn_id = %s ORDER BY created_at, call_id",
                (turn_id,),
            )
            rows = await cur.fetchall()
        return [ToolWait.model_validate_json(r[0]) for r in rows]

    async def decide(self, turn_id: str, call_id: str, changes: Mapping[str, Any]) -> ToolWait | None:
        async with self._db.transaction() as conn:
            wait = await self._locked(conn, turn_id, call_id)
            if wait is None or wait.status != "pending":
                return None
            wait = wait.model_copy(update=dict(changes))
            await self._save(conn, wait)
        return wait

    async def consume(self, turn_id: str, call_id: str) -> None:
        async with self._db.transaction() as conn:
            wait = await self._locked(conn, turn_id, call_id)
            if wait is not None and not wait.consumed:
                await self._save(conn, wait.model_copy(update={"consumed": True}))

    async def reschedule(self, wait: ToolWait, check_at: int) -> None:
        async with self._db.transaction() as conn:
            current = await self._locked(conn, wait.turnId, wait.toolCallId)
            if current is not None and not current.consumed:
                await self._save(conn, current.model_copy(update={"checkAt": check_at}))

    async def list_waits(self, tenant_id: str, container_id: str | None = None) -> list[ToolWait]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM tool_waits WHERE tenant_id = %s AND NOT consumed"
                " AND (%s::text IS NULL OR container_id = %s) ORDER BY created_at, call_id",
                (tenant_id, container_id, container_id),
            )
            rows = await cur.fetchall()
        return [ToolWait.model_validate_json(r[0]) for r in rows]

    async def due_waits(self, now_ms: int, limit: int) -> list[ToolWait]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM tool_waits WHERE NOT consumed AND check_at <= %s"
                " ORDER BY check_at LIMIT %s",
                (now_ms, limit),
            )
            rows = await cur.fetchall()
        return [ToolWait.model_validate_json(r[0]) for r in rows]

    @staticmethod
    async def _locked(conn: AsyncConnection, turn_id: str, call_id: str) -> ToolWait | None:
        cur = await conn.execute(_LOCKED, (turn_id, call_id))
        row = await cur.fetchone()
        return None if row is None else ToolWait.model_validate_json(row[0])

    @staticmethod
    async def _save(conn: AsyncConnection, wait: ToolWait) -> None:
        await conn.execute(
            "UPDATE tool_waits SET status = %s, consumed = %s, check_at = %s, record = %s::jsonb"
            " WHERE turn_id = %s AND call_id = %s",
            (
                wait.status,
                wait.consumed,
                wait.checkAt,
                wait.model_dump_json(),
                wait.turnId,
                wait.toolCallId,
            ),
        )


__all__ = ["PostgresToolWaits"]
