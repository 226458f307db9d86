"""The ``Schedules`` port: tenants' cron schedules and their runs (``turns/schedules.py``).

A run's key is its schedule and tick: ``claim_run`` stores it only if no run of that tick exists
(``INSERT ... ON CONFLICT DO NOTHING``), so of any number of schedulers (nodes, restarts) exactly
one fires each tick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agentvm.records import ScheduleRecord, ScheduleRun


class Schedules(Protocol):
    async def put_schedule(self, schedule: ScheduleRecord) -> None: ...
    async def get_schedule(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None: ...
    async def list_schedules(self, tenant_id: str) -> list[ScheduleRecord]: ...
    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        """Delete the schedule and its runs; False if the tenant has no such schedule."""
        ...

    async def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRecord]:
        """Unpaused schedules whose ``nextAt`` has passed, across tenants (for the scheduler)."""
        ...

    async def advance(self, schedule: ScheduleRecord, next_at: int) -> bool:
        """Move ``nextAt`` on, only if it still is ``schedule.nextAt`` (False: someone else did)."""
        ...

    async def claim_run(self, run: ScheduleRun) -> bool:
        """Store the run if its (schedule, tick) has none yet; True if this call stored it."""
        ...

    async def save_run(self, run: ScheduleRun) -> None: ...
    async def list_runs(
        self, tenant_id: str, schedule_id: str, *, since_ms: int = 0, limit: int = 100
    ) -> list[ScheduleRun]:
        """The schedule's runs, newest tick first (those of ticks at or after ``since_ms``)."""
        ...

    async def stale_claims(self, claimed_before_ms: int, limit: int) -> list[ScheduleRun]:
        """Runs still ``claimed`` (their scheduler died before sending), across tenants."""
        ...


__all__ = ["Schedules"]
