"""The ``Schedules`` port on PostgreSQL (the cluster host; migration ``0150_schedules``).

Every node runs the scheduler. A run's primary key is its schedule and tick, so ``claim_run``'s
``INSERT ... ON CONFLICT DO NOTHING`` stores each tick once across nodes and restarts: the node whose
insert stored the row fires the tick, the others see ``rowcount`` 0. ``advance`` is a conditional
``UPDATE ... WHERE next_at = <the value read>``: of two nodes moving a schedule on, one does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import ScheduleRecord, ScheduleRun

if TYPE_CHECKING:
    from agentvm.adapters.postgres.database import Database


class PostgresSchedules:
    """``agentvm.ports.Schedules`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def put_schedule(self, schedule: ScheduleRecord) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO schedules (tenant_id, schedule_id, paused, next_at, record)"
                " VALUES (%s, %s, %s, %s, %s::jsonb) ON CONFLICT (tenant_id, schedule_id) DO UPDATE"
                " SET paused = excluded.paused, next_at = excluded.next_at, record = excluded.record",
                (
                    schedule.tenantId,
                    schedule.scheduleId,
                    schedule.paused,
                    schedule.nextAt,
                    schedule.model_dump_json(),
                ),
            )

    async def get_schedule(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM schedules WHERE tenant_id = %s AND schedule_id = %s",
                (tenant_id, schedule_id),
            )
            row = await cur.fetchone()
        return None if row is None else ScheduleRecord.model_validate_json(row[0])

    async def list_schedules(self, tenant_id: str) -> list[ScheduleRecord]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM schedules WHERE tenant_id = %s ORDER BY schedule_id", (tenant_id,)
            )
            rows = await cur.fetchall()
        return [ScheduleRecord.model_validate_json(r[0]) for r in rows]

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM schedules WHERE tenant_id = %s AND schedule_id = %s", (tenant_id, schedule_id)
            )
            if cur.rowcount != 1:
                return False
            await conn.execute(
                "DELETE FROM schedule_runs WHERE tenant_id = %s AND schedule_id = %s",
                (tenant_id, schedule_id),
            )
        return True

    async def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRecord]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM schedules WHERE NOT paused AND next_at <= %s"
                " ORDER BY next_at LIMIT %s",
                (now_ms, limit),
            )
            rows = await cur.fetchall()
        return [ScheduleRecord.model_validate_json(r[0]) for r in rows]

    async def advance(self, schedule: ScheduleRecord, next_at: int) -> bool:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "UPDATE schedules SET next_at = %s,"
                " record = jsonb_set(record, '{nextAt}', to_jsonb(%s::bigint))"
                " WHERE tenant_id = %s AND schedule_id = %s AND next_at = %s",
                (next_at, next_at, schedule.tenantId, schedule.scheduleId, schedule.nextAt),
            )
            return cur.rowcount == 1

    async def claim_run(self, run: ScheduleRun) -> bool:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO schedule_runs (schedule_id, tick_at, tenant_id, status, claimed_at, record)"
                " VALUES (%s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (schedule_id, tick_at) DO NOTHING",
                (run.scheduleId, run.tickAt, run.tenantId, run.status, run.claimedAt, run.model_dump_json()),
            )
            return cur.rowcount == 1

    async def save_run(self, run: ScheduleRun) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "UPDATE schedule_runs SET status = %s, record = %s::jsonb"
                " WHERE schedule_id = %s AND tick_at = %s",
                (run.status, run.model_dump_json(), run.scheduleId, run.tickAt),
            )

    async def list_runs(
        self, tenant_id: str, schedule_id: str, *, since_ms: int = 0, limit: int = 100
    ) -> list[ScheduleRun]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM schedule_runs WHERE tenant_id = %s AND schedule_id = %s"
                " AND tick_at >= %s ORDER BY tick_at DESC LIMIT %s",
                (tenant_id, schedule_id, since_ms, limit),
            )
            rows = await cur.fetchall()
        return [ScheduleRun.model_validate_json(r[0]) for r in rows]

    async def stale_claims(self, claimed_before_ms: int, limit: int) -> list[ScheduleRun]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM schedule_runs WHERE status = 'claimed' AND claimed_at < %s"
                " ORDER BY claimed_at LIMIT %s",
                (claimed_before_ms, limit),
            )
            rows = await cur.fetchall()
        return [ScheduleRun.model_validate_json(r[0]) for r in rows]


__all__ = ["PostgresSchedules"]
