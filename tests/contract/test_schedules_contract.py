"""The ``Schedules`` contract, on SQLite, DynamoDB (moto) and PostgreSQL: one suite, so the hosts'
schedulers cannot drift (each tick claimed once, ``nextAt`` moved by one of any number of racers)."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.schedules import DynamoDbSchedules
from agentvm.adapters.local.sqlite.schedules import SqliteSchedules
from agentvm.adapters.postgres.schedules import PostgresSchedules
from agentvm.records import ScheduleRecord, ScheduleRun
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteSchedules, DynamoDbSchedules, file="s.db", postgres=PostgresSchedules))
async def schedules(request, tmp_path):
    async with request.param(tmp_path) as store:
        yield store


def schedule(sid: str = "sch_1", *, tenant: str = "acme", next_at: int = 60_000, **fields) -> ScheduleRecord:
    values = {"imageId": "img_1", "containerId": "alice", "cron": "* * * * *", "message": "good morning"}
    return ScheduleRecord(
        tenantId=tenant, scheduleId=sid, nextAt=next_at, createdAt=1, updatedAt=1, **{**values, **fields}
    )


def run(
    tick: int, sid: str = "sch_1", *, tenant: str = "acme", claimed: int | None = None, **fields
) -> ScheduleRun:
    return ScheduleRun(
        tenantId=tenant, scheduleId=sid, tickAt=tick, claimedAt=tick if claimed is None else claimed, **fields
    )


async def test_a_schedule_is_read_back_by_its_tenant_only(schedules):
    await schedules.put_schedule(schedule("sch_b"))
    await schedules.put_schedule(schedule("sch_a", tokensPerDay=5, timezone="Europe/Paris"))
    await schedules.put_schedule(schedule("sch_x", tenant="other"))
    assert await schedules.get_schedule("acme", "sch_a") == schedule(
        "sch_a", tokensPerDay=5, timezone="Europe/Paris"
    )
    assert await schedules.get_schedule("other", "sch_a") is None
    assert await schedules.get_schedule("acme", "sch_x") is None
    assert [s.scheduleId for s in await schedules.list_schedules("acme")] == ["sch_a", "sch_b"]
    assert [s.scheduleId for s in await schedules.list_schedules("other")] == ["sch_x"]
    assert await schedules.list_schedules("nobody") == []


async def test_a_put_replaces_the_schedule(schedules):
    await schedules.put_schedule(schedule())
    changed = schedule(message="good evening", paused=True, pausedReason="why", next_at=120_000)
    await schedules.put_schedule(changed)
    assert await schedules.get_schedule("acme", "sch_1") == changed
    assert len(await schedules.list_schedules("acme")) == 1


async def test_due_schedules_are_the_unpaused_ones_whose_tick_passed_soonest_first(schedules):
    await schedules.put_schedule(schedule("sch_late", next_at=90_000))
    await schedules.put_schedule(schedule("sch_early", next_at=30_000, tenant="other"))
    await schedules.put_schedule(schedule("sch_now", next_at=60_000))
    await schedules.put_schedule(schedule("sch_paused", next_at=10_000, paused=True))
    await schedules.put_schedule(schedule("sch_future", next_at=600_000))
    assert [s.scheduleId for s in await schedules.due_schedules(90_000, 10)] == [
        "sch_early",
        "sch_now",
        "sch_late",
    ]
    assert [s.scheduleId for s in await schedules.due_schedules(60_000, 10)] == ["sch_early", "sch_now"]
    assert [s.scheduleId for s in await schedules.due_schedules(90_000, 1)] == ["sch_early"]
    assert await schedules.due_schedules(29_999, 10) == []
    # resumed, it is due again; paused, it is not
    await schedules.put_schedule(schedule("sch_paused", next_at=10_000))
    await schedules.put_schedule(schedule("sch_now", next_at=60_000, paused=True))
    assert [s.scheduleId for s in await schedules.due_schedules(60_000, 10)] == ["sch_paused", "sch_early"]


async def test_advance_moves_next_at_once_and_keeps_the_other_fields(schedules):
    read = schedule()
    await schedules.put_schedule(read)
    # a client paused it after the scheduler read it (nextAt unchanged): the advance keeps that
    await schedules.put_schedule(schedule(paused=True, pausedReason="by hand"))
    assert await schedules.advance(read, 120_000) is True
    assert await schedules.advance(read, 180_000) is False  # someone else moved it on: read is stale
    current = await schedules.get_schedule("acme", "sch_1")
    assert current is not None
    assert (current.nextAt, current.paused, current.pausedReason) == (120_000, True, "by hand")
    assert await schedules.due_schedules(10**12, 10) == []  # paused: not due at any time
    assert await schedules.advance(schedule("sch_missing"), 120_000) is False


async def test_of_racing_advances_one_moves_next_at(schedules):
    read = schedule()
    await schedules.put_schedule(read)
    moved = await asyncio.gather(*(schedules.advance(read, 120_000 + i) for i in range(8)))
    assert moved.count(True) == 1
    [due] = await schedules.due_schedules(10**12, 10)
    assert due.nextAt == 120_000 + moved.index(True)
    assert await schedules.due_schedules(119_999, 10) == []


async def test_a_tick_is_claimed_once_however_many_ask(schedules):
    await schedules.put_schedule(schedule())
    claims = await asyncio.gather(*(schedules.claim_run(run(60_000, claimed=60_000 + i)) for i in range(8)))
    assert claims.count(True) == 1
    assert await schedules.claim_run(run(60_000)) is False  # a retry, a restart: still claimed
    assert await schedules.claim_run(run(60_000, "sch_2")) is True  # another schedule's tick is its own
    [stored] = await schedules.list_runs("acme", "sch_1")
    assert stored.claimedAt == 60_000 + claims.index(True)


async def test_a_saved_run_replaces_its_claim_and_a_missing_run_is_not_made(schedules):
    await schedules.claim_run(run(60_000))
    sent = run(60_000, status="sent", imageId="img_1", sessionId="sess_1", turnId="turn_1")
    await schedules.save_run(sent)
    await schedules.save_run(sent.model_copy(update={"tokens": 42}))
    await schedules.save_run(run(120_000, status="sent"))  # never claimed: nothing stored
    assert await schedules.list_runs("acme", "sch_1") == [sent.model_copy(update={"tokens": 42})]


async def test_runs_are_listed_newest_tick_first_for_their_tenant(schedules):
    for tick in (60_000, 180_000, 120_000, 240_000):
        await schedules.claim_run(run(tick))
    await schedules.claim_run(run(60_000, "sch_2"))
    assert [r.tickAt for r in await schedules.list_runs("acme", "sch_1")] == [
        240_000,
        180_000,
        120_000,
        60_000,
    ]
    assert [r.tickAt for r in await schedules.list_runs("acme", "sch_1", limit=2)] == [240_000, 180_000]
    assert [r.tickAt for r in await schedules.list_runs("acme", "sch_1", since_ms=120_000)] == [
        240_000,
        180_000,
        120_000,
    ]
    assert await schedules.list_runs("other", "sch_1") == []
    assert await schedules.list_runs("acme", "sch_missing") == []


async def test_stale_claims_are_the_runs_still_claimed_before_the_time(schedules):
    await schedules.claim_run(run(60_000, claimed=61_000))
    await schedules.claim_run(run(120_000, claimed=121_000))
    await schedules.claim_run(run(60_000, "sch_2", tenant="other", claimed=62_000))
    await schedules.claim_run(run(180_000, claimed=181_000))
    await schedules.save_run(run(120_000, claimed=121_000, status="sent", turnId="turn_1"))
    stale = await schedules.stale_claims(170_000, 10)
    assert sorted((r.scheduleId, r.tickAt) for r in stale) == [("sch_1", 60_000), ("sch_2", 60_000)]
    assert len(await schedules.stale_claims(170_000, 1)) == 1
    assert await schedules.stale_claims(61_000, 10) == []
    await schedules.save_run(run(60_000, claimed=61_000, status="failed", reason="image gone"))
    assert [(r.scheduleId, r.tickAt) for r in await schedules.stale_claims(170_000, 10)] == [
        ("sch_2", 60_000)
    ]


async def test_deleting_a_schedule_deletes_its_runs_and_only_its_tenant_can(schedules):
    await schedules.put_schedule(schedule())
    await schedules.put_schedule(schedule("sch_2"))
    for tick in (60_000, 120_000):
        await schedules.claim_run(run(tick))
    await schedules.claim_run(run(60_000, "sch_2"))
    assert await schedules.delete_schedule("other", "sch_1") is False
    assert await schedules.get_schedule("acme", "sch_1") is not None
    assert await schedules.delete_schedule("acme", "sch_1") is True
    assert await schedules.delete_schedule("acme", "sch_1") is False
    assert await schedules.get_schedule("acme", "sch_1") is None
    assert await schedules.list_runs("acme", "sch_1") == []
    assert await schedules.stale_claims(10**12, 10) == [run(60_000, "sch_2")]
    assert await schedules.due_schedules(10**12, 10) == [schedule("sch_2")]
    await schedules.save_run(run(60_000, status="sent"))  # a sweeper finishing late brings nothing back
    assert await schedules.list_runs("acme", "sch_1") == []
