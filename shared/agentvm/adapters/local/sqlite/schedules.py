"""The ``Schedules`` port on SQLite (the local host): a row per schedule and a row per run, each
record as JSON beside the columns the queries filter on. A run's primary key is its schedule and
tick, so ``claim_run`` (``INSERT ... ON CONFLICT DO NOTHING``) stores each tick once, whoever asks
and however often (a restart that fires the same tick again finds it claimed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect, transaction
from agentvm.records import ScheduleRecord, ScheduleRun

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    tenant_id   TEXT NOT NULL,
    schedule_id TEXT NOT NULL,
    paused      INTEGER NOT NULL,
    next_at     INTEGER NOT NULL,
    record      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, schedule_id)
);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (paused, next_at);
CREATE TABLE IF NOT EXISTS schedule_runs (
    schedule_id TEXT NOT NULL,
    tick_at     INTEGER NOT NULL,
    tenant_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    claimed_at  INTEGER NOT NULL,
    record      TEXT NOT NULL,
    PRIMARY KEY (schedule_id, tick_at)
);
CREATE INDEX IF NOT EXISTS schedule_runs_claimed ON schedule_runs (status, claimed_at);
"""


class SqliteSchedules:
    """``agentvm.ports.Schedules`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def put_schedule(self, schedule: ScheduleRecord) -> None:
        self._conn.execute(
            "INSERT INTO schedules (tenant_id, schedule_id, paused, next_at, record) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (tenant_id, schedule_id) DO UPDATE SET paused = excluded.paused,"
            " next_at = excluded.next_at, record = excluded.record",
            (
                schedule.tenantId,
                schedule.scheduleId,
                int(schedule.paused),
                schedule.nextAt,
                schedule.model_dump_json(),
            ),
        )

    async def get_schedule(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None:
        row = self._conn.execute(
            "SELECT record FROM schedules WHERE tenant_id = ? AND schedule_id = ?", (tenant_id, schedule_id)
        ).fetchone()
        return None if row is None else ScheduleRecord.model_validate_json(row[0])

    async def list_schedules(self, tenant_id: str) -> list[ScheduleRecord]:
        rows = self._conn.execute(
            "SELECT record FROM schedules WHERE tenant_id = ? ORDER BY schedule_id", (tenant_id,)
        ).fetchall()
        return [ScheduleRecord.model_validate_json(r[0]) for r in rows]

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        with transaction(self._conn):
            cur = self._conn.execute(
                "DELETE FROM schedules WHERE tenant_id = ? AND schedule_id = ?", (tenant_id, schedule_id)
            )
            if cur.rowcount != 1:
                return False
            self._conn.execute(
                "DELETE FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ?", (tenant_id, schedule_id)
            )
        return True

    async def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRecord]:
        rows = self._conn.execute(
            "SELECT record FROM schedules WHERE paused = 0 AND next_at <= ? ORDER BY next_at LIMIT ?",
            (now_ms, limit),
        ).fetchall()
        return [ScheduleRecord.model_validate_json(r[0]) for r in rows]

    async def advance(self, schedule: ScheduleRecord, next_at: int) -> bool:
        with transaction(self._conn):
            current = await self.get_schedule(schedule.tenantId, schedule.scheduleId)
            if current is None or current.nextAt != schedule.nextAt:
                return False
            moved = current.model_copy(update={"nextAt": next_at})
            self._conn.execute(
                "UPDATE schedules SET next_at = ?, record = ? WHERE tenant_id = ? AND schedule_id = ?",
                (next_at, moved.model_dump_json(), schedule.tenantId, schedule.scheduleId),
            )
        return True

    async def claim_run(self, run: ScheduleRun) -> bool:
        cur = self._conn.execute(
            "INSERT INTO schedule_runs (schedule_id, tick_at, tenant_id, status, claimed_at, record)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (schedule_id, tick_at) DO NOTHING",
            (run.scheduleId, run.tickAt, run.tenantId, run.status, run.claimedAt, run.model_dump_json()),
        )
        return cur.rowcount == 1

    async def save_run(self, run: ScheduleRun) -> None:
        self._conn.execute(
            "UPDATE schedule_runs SET status = ?, record = ? WHERE schedule_id = ? AND tick_at = ?",
            (run.status, run.model_dump_json(), run.scheduleId, run.tickAt),
        )

    async def list_runs(
        self, tenant_id: str, schedule_id: str, *, since_ms: int = 0, limit: int = 100
    ) -> list[ScheduleRun]:
        rows = self._conn.execute(
            "SELECT record FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? AND tick_at >= ?"
            " ORDER BY tick_at DESC LIMIT ?",
            (tenant_id, schedule_id, since_ms, limit),
        ).fetchall()
        return [ScheduleRun.model_validate_json(r[0]) for r in rows]

    async def stale_claims(self, claimed_before_ms: int, limit: int) -> list[ScheduleRun]:
        rows = self._conn.execute(
            "SELECT record FROM schedule_runs WHERE status = 'claimed' AND claimed_at < ?"
            " ORDER BY claimed_at LIMIT ?",
            (claimed_before_ms, limit),
        ).fetchall()
        return [ScheduleRun.model_validate_json(r[0]) for r in rows]
