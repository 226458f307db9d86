"""Schedules on the local host (turns/schedules.py, docs/schedules.md): real SQLite files, the echo
model, the queue's consumer run by the test, and a clock that moves only when told to."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from agentvm.config import Settings
from agentvm.hosts.local import LocalHost, local_runtime
from agentvm.images import ImageConfig, create
from agentvm.records import ScheduleRecord
from agentvm.turns.schedules import day_start, fire_due, latest_tick, next_tick
from agentvm.turns.worker import process_turn
from tests.security_harness import ManualClock

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.records import ImageRecord


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def host_at(tmp_path: Path, clock: ManualClock) -> LocalHost:
    host = local_runtime(Settings(data_dir=tmp_path))
    host.runtime.clock = clock
    return host


async def image_of(host: LocalHost) -> ImageRecord:
    return await create(
        host.runtime, "tenant-a", "user-alice", ImageConfig(name="Daily"), admin=True, by=None, notices=[]
    )


async def schedule_on(
    host: LocalHost, image: ImageRecord, cron: str = "0 * * * *", **fields: object
) -> ScheduleRecord:
    rt = host.runtime
    assert rt.schedules is not None
    now = rt.clock.now_ms()
    schedule = ScheduleRecord(
        tenantId="tenant-a",
        scheduleId=rt.ids.new("sch"),
        imageId=image.imageId,
        containerId=image.containerId,
        cron=cron,
        message="good morning",
        nextAt=next_tick(cron, "UTC", now),
        createdAt=now,
        updatedAt=now,
        **fields,  # type: ignore[arg-type]
    )
    await rt.schedules.put_schedule(schedule)
    return schedule


async def user_messages(host: LocalHost, image: ImageRecord) -> list[str]:
    messages = await host.runtime.store.list_messages(image.sessionId)
    return [m.content for m in messages if m.role == "user"]  # type: ignore[union-attr]


async def run_turns(host: LocalHost) -> None:
    await host.queue.drain(lambda job: process_turn(host.runtime, job))


def test_ticks_are_read_in_the_schedules_time_zone():
    # 09:00 in Paris (UTC+1 in January) is 08:00 UTC
    assert next_tick("0 9 * * *", "Europe/Paris", ms("2026-01-15T07:00:00")) == ms("2026-01-15T08:00:00")
    assert latest_tick("0 9 * * *", "Europe/Paris", ms("2026-01-15T08:00:00")) == ms("2026-01-15T08:00:00")
    assert latest_tick("0 9 * * *", "Europe/Paris", ms("2026-01-15T07:59:59")) == ms("2026-01-14T08:00:00")
    assert day_start("Europe/Paris", ms("2026-01-15T23:30:00")) == ms("2026-01-15T23:00:00")


async def test_a_tick_fires_once_across_a_restart(tmp_path):
    clock = ManualClock(ms("2026-01-15T09:59:30"))
    host = host_at(tmp_path, clock)
    image = await image_of(host)
    schedule = await schedule_on(host, image)
    assert await fire_due(host.runtime) == 0  # not due yet
    clock.ms = ms("2026-01-15T10:00:05")
    assert await fire_due(host.runtime) == 1
    assert await fire_due(host.runtime) == 0  # the same process again: nextAt moved on
    await run_turns(host)
    host.queue.close()

    # The process died after claiming the tick but before moving nextAt on (its row says so):
    # the restarted scheduler finds the tick claimed and sends nothing.
    restarted = host_at(tmp_path, clock)
    assert restarted.runtime.schedules is not None
    await restarted.runtime.schedules.put_schedule(schedule)  # nextAt back at 10:00
    assert await fire_due(restarted.runtime) == 0
    await run_turns(restarted)
    assert await user_messages(restarted, image) == ["good morning"]
    [run] = await restarted.runtime.schedules.list_runs("tenant-a", schedule.scheduleId)
    assert (run.tickAt, run.status, run.imageId) == (ms("2026-01-15T10:00:00"), "sent", image.imageId)
    turn = await restarted.runtime.store.get_turn(run.turnId or "")
    assert turn is not None and turn.status == "completed"

    # Down from 10:30 to 13:20: of the missed 11:00, 12:00 and 13:00 ticks only 13:00 runs, once.
    clock.ms = ms("2026-01-15T13:20:00")
    assert await fire_due(restarted.runtime) == 1
    assert await fire_due(restarted.runtime) == 0
    await run_turns(restarted)
    runs = await restarted.runtime.schedules.list_runs("tenant-a", schedule.scheduleId)
    assert [r.tickAt for r in runs] == [ms("2026-01-15T13:00:00"), ms("2026-01-15T10:00:00")]
    assert await user_messages(restarted, image) == ["good morning", "good morning"]
    current = await restarted.runtime.schedules.get_schedule("tenant-a", schedule.scheduleId)
    assert current is not None and current.nextAt == ms("2026-01-15T14:00:00")
    restarted.queue.close()


async def test_a_claim_whose_scheduler_died_is_sent_once(tmp_path):
    from agentvm.records import ScheduleRun
    from agentvm.turns.schedules import CLAIM_STALE_MS

    clock = ManualClock(ms("2026-01-15T10:00:05"))
    host = host_at(tmp_path, clock)
    rt = host.runtime
    assert rt.schedules is not None
    image = await image_of(host)
    schedule = await schedule_on(host, image)
    tick = ms("2026-01-15T10:00:00")
    # claimed, then the process died before sending
    claim = ScheduleRun(tenantId="tenant-a", scheduleId=schedule.scheduleId, tickAt=tick, claimedAt=clock.ms)
    assert await rt.schedules.claim_run(claim)
    assert not await rt.schedules.claim_run(claim)  # a tick is claimed once
    clock.ms += CLAIM_STALE_MS + 1
    assert await fire_due(rt) == 1
    assert await fire_due(rt) == 0
    await run_turns(host)
    assert await user_messages(host, image) == ["good morning"]
    host.queue.close()


async def test_a_new_session_per_run(tmp_path):
    clock = ManualClock(ms("2026-01-15T09:59:30"))
    host = host_at(tmp_path, clock)
    image = await image_of(host)
    await schedule_on(host, image, sessionPolicy="new")
    for hour in ("10", "11"):
        clock.ms = ms(f"2026-01-15T{hour}:00:01")
        assert await fire_due(host.runtime) == 1
    await run_turns(host)
    images = await host.runtime.store.list_images("tenant-a", "user-alice")
    made = [i for i in images if i.imageId != image.imageId]
    assert len(made) == 2 and all(i.name == "Daily" for i in made)
    assert [await user_messages(host, i) for i in made] == [["good morning"], ["good morning"]]
    assert await user_messages(host, image) == []
    host.queue.close()


@pytest.mark.parametrize("budget", ["tokensPerDay", "tokensPerRun"])
async def test_a_schedules_own_budget_stops_its_runs(tmp_path, budget):
    clock = ManualClock(ms("2026-01-15T09:59:30"))
    host = host_at(tmp_path, clock)
    rt = host.runtime
    assert rt.schedules is not None
    image = await image_of(host)
    schedule = await schedule_on(host, image, **{budget: 1})
    clock.ms = ms("2026-01-15T10:00:01")
    assert await fire_due(rt) == 1
    await run_turns(host)  # the echo model's turn uses more than 1 token
    clock.ms = ms("2026-01-15T11:00:01")
    assert await fire_due(rt) == 1
    runs = await rt.schedules.list_runs("tenant-a", schedule.scheduleId)
    assert [r.status for r in runs] == ["skipped" if budget == "tokensPerDay" else "failed", "sent"]
    assert runs[1].tokens is not None and runs[1].tokens > 1
    current = await rt.schedules.get_schedule("tenant-a", schedule.scheduleId)
    assert current is not None
    assert current.paused == (budget == "tokensPerRun")
    if budget == "tokensPerDay":  # the next day's runs go again
        clock.ms = ms("2026-01-16T10:00:01")
        assert await fire_due(rt) == 1
        assert (await rt.schedules.list_runs("tenant-a", schedule.scheduleId))[0].status == "sent"
    host.queue.close()


async def test_a_deleted_tenants_schedule_sends_nothing(tmp_path):
    from agentvm.records import TenantRecord

    clock = ManualClock(ms("2026-01-15T09:59:30"))
    host = host_at(tmp_path, clock)
    rt = host.runtime
    assert rt.schedules is not None and rt.tenants is not None
    image = await image_of(host)
    schedule = await schedule_on(host, image)
    await rt.tenants.create_tenant(
        TenantRecord(tenantId="tenant-a", name="A", status="deleted", createdAt=1, updatedAt=1)
    )
    clock.ms = ms("2026-01-15T10:00:01")
    assert await fire_due(rt) == 1
    [run] = await rt.schedules.list_runs("tenant-a", schedule.scheduleId)
    assert (run.status, run.turnId) == ("failed", None) and "deleted" in (run.reason or "")
    assert await user_messages(host, image) == []
    host.queue.close()
