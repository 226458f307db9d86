"""Run an image's turn on a cron schedule (docs/schedules.md).

A schedule names an image of the tenant, a cron expression (``croniter``) read in an IANA time
zone, the message each run sends, the session policy (``same``: the image's own session; ``new``:
a new image made from its config per run) and its own budget (tokens per run, per day).

``fire_due`` is the scheduler's one step, run by the host every ``AVM_SCHEDULE_TICK_S`` (the local
server's loop; each node of a cluster runs it too). For each schedule whose ``nextAt`` has passed:

1. the tick to run is the *latest* tick at or before now (missed ticks after downtime run once,
   as that one tick; the others are not run and leave no row);
2. the run is claimed: a row keyed by (schedule, tick), stored only if absent. Of any number of
   schedulers, and of the same one after a restart, exactly one claims a tick;
3. the claimer sends the message with the request id ``schedule:<id>:<tick>``, which the message
   append is keyed by (``turns.submit``): a second send of that run never appends nor queues twice;
4. ``nextAt`` moves to the first tick after now (a conditional write: a scheduler that lost the
   race leaves it).

A scheduler that dies between 2 and 3 leaves its run ``claimed``: ``fire_due`` sends runs claimed
more than ``CLAIM_STALE_MS`` ago again (the request id makes that at most once). Budgets: a tick
reached once the day's runs (the schedule's day, in its time zone) used ``tokensPerDay`` is
``skipped``; a run whose turn used more than ``tokensPerRun`` pauses the schedule
(``pausedReason``). The tenant's and container's own budgets apply to every run as to any turn.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentvm.errors import AgentVMError, BadRequest, NotFound
from agentvm.records import TERMINAL, ScheduleRecord, ScheduleRun

if TYPE_CHECKING:
    from agentvm.ports import Schedules
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.turns.schedules")

CLAIM_STALE_MS = 60_000  # a run claimed this long ago and not sent: its scheduler died; send it
DUE_BATCH = 100  # schedules read per step
MIN_INTERVAL_MS = 60_000  # cron's own resolution: one tick a minute at most


def schedules_of(rt: Runtime) -> Schedules:
    if rt.schedules is None:
        raise BadRequest("schedules are not enabled on this server")
    return rt.schedules


def _zone(timezone: str) -> ZoneInfo:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BadRequest(f"timezone: unknown time zone {timezone!r}") from exc


def check_cron(cron: str, timezone: str) -> None:
    """Refuse an expression ``croniter`` cannot read (5 fields: minute hour day month weekday)."""
    from croniter import croniter

    _zone(timezone)
    if len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise BadRequest(f"cron: not a 5-field cron expression: {cron!r}")


def next_tick(cron: str, timezone: str, after_ms: int) -> int:
    """The first tick strictly after ``after_ms`` (epoch ms)."""
    from croniter import croniter

    start = datetime.fromtimestamp(after_ms / 1000, tz=_zone(timezone))
    return int(croniter(cron, start).get_next(float) * 1000)


def latest_tick(cron: str, timezone: str, at_ms: int) -> int:
    """The last tick at or before ``at_ms``."""
    from croniter import croniter

    start = datetime.fromtimestamp((at_ms + 1) / 1000, tz=_zone(timezone))
    return int(croniter(cron, start).get_prev(float) * 1000)


def day_start(timezone: str, at_ms: int) -> int:
    """Midnight of ``at_ms``'s day in the time zone, epoch ms."""
    local = datetime.fromtimestamp(at_ms / 1000, tz=_zone(timezone))
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return int(midnight.astimezone(UTC).timestamp() * 1000)


async def fire_due(rt: Runtime, *, limit: int = DUE_BATCH) -> int:
    """One scheduler step: fire every due tick this scheduler claims, send stale claims again.
    Returns how many runs this call sent or recorded. One schedule's failure never stops others."""
    schedules = schedules_of(rt)
    now = rt.clock.now_ms()
    done = 0
    for run in await schedules.stale_claims(now - CLAIM_STALE_MS, limit):
        schedule = await schedules.get_schedule(run.tenantId, run.scheduleId)
        if schedule is not None:
            await _run(rt, schedule, run)
            done += 1
    for schedule in await schedules.due_schedules(now, limit):
        try:
            done += await _fire(rt, schedule, now)
        except Exception as exc:  # the store is busy: the next step tries again
            log.warning(
                "firing a schedule failed",
                extra={"schedule_id": schedule.scheduleId, "error": type(exc).__name__},
            )
    return done


async def _fire(rt: Runtime, schedule: ScheduleRecord, now: int) -> int:
    assert rt.schedules is not None
    tick = latest_tick(schedule.cron, schedule.timezone, now)
    fired = 0
    if tick >= schedule.nextAt:  # else nextAt was moved past now by an update: nothing is due
        run = ScheduleRun(
            tenantId=schedule.tenantId, scheduleId=schedule.scheduleId, tickAt=tick, claimedAt=now
        )
        if await rt.schedules.claim_run(run):
            await _run(rt, schedule, run)
            fired = 1
    await rt.schedules.advance(schedule, next_tick(schedule.cron, schedule.timezone, now))
    return fired


async def _run(rt: Runtime, schedule: ScheduleRecord, run: ScheduleRun) -> None:
    """Send the claimed run's message (or record why not). Never raises for the run's own failure."""
    from agentvm.security.tenants import refuse_deleted
    from agentvm.turns.submit import Sender, send_message

    assert rt.schedules is not None
    try:
        await refuse_deleted(rt, schedule.tenantId)  # a deleted tenant's schedules spend nothing
        await _settle_budget(rt, schedule)
        if schedule.tokensPerDay is not None:
            used = await tokens_since(rt, schedule, day_start(schedule.timezone, run.tickAt))
            if used >= schedule.tokensPerDay:
                await rt.schedules.save_run(
                    run.model_copy(update={"status": "skipped", "reason": "tokensPerDay reached"})
                )
                return
        image = await _target(rt, schedule, run)
        run = run.model_copy(update={"imageId": image.imageId, "sessionId": image.sessionId})
        if schedule.sessionPolicy == "new":  # the image exists: a resent claim reuses it
            await rt.schedules.save_run(run)
        sent = await send_message(
            rt,
            schedule.tenantId,
            image,
            schedule.message,
            request_id=f"schedule:{schedule.scheduleId}:{run.tickAt}",
            sender=Sender(connection_id=f"sched_{schedule.scheduleId}"),
            concurrency="queue",
            notices=[],
        )
        await rt.schedules.save_run(run.model_copy(update={"status": "sent", "turnId": sent.turn_id}))
    except AgentVMError as exc:  # a budget, a deleted image, a full store: recorded on the run
        await rt.schedules.save_run(run.model_copy(update={"status": "failed", "reason": str(exc)[:500]}))


async def _target(rt: Runtime, schedule: ScheduleRecord, run: ScheduleRun) -> ImageRecord:
    from agentvm.images import ImageConfig, create

    image = await rt.store.get_image(schedule.tenantId, run.imageId or schedule.imageId)
    if image is None:
        raise NotFound(f"image {schedule.imageId} no longer exists")
    if schedule.sessionPolicy == "same" or run.imageId is not None:
        return image
    fields = image.model_dump(exclude_none=True)
    config = ImageConfig.model_validate({k: v for k, v in fields.items() if k in ImageConfig.model_fields})
    return await create(
        rt, schedule.tenantId, image.containerId, config, admin=True, by=schedule.createdBy, notices=[]
    )


async def tokens_since(rt: Runtime, schedule: ScheduleRecord, since_ms: int) -> int:
    """Input + output tokens of the schedule's runs since ``since_ms`` (their turns' usage)."""
    assert rt.schedules is not None
    runs = await rt.schedules.list_runs(schedule.tenantId, schedule.scheduleId, since_ms=since_ms, limit=1000)
    turns = {r.turnId for r in runs if r.turnId is not None}
    if not turns:
        return 0
    usage = await rt.store.list_usage(schedule.tenantId, since_ms=since_ms)
    return sum(u.inputTokens + u.outputTokens for u in usage if u.turnId in turns)


async def _settle_budget(rt: Runtime, schedule: ScheduleRecord) -> None:
    """Record the tokens of runs whose turns ended; a run past ``tokensPerRun`` pauses the
    schedule (raises, so this tick fails with the reason)."""
    assert rt.schedules is not None
    for run in await rt.schedules.list_runs(schedule.tenantId, schedule.scheduleId, limit=20):
        if run.turnId is None or run.tokens is not None:
            continue
        turn = await rt.store.get_turn(run.turnId)
        if turn is None or turn.status not in TERMINAL:
            continue
        usage = [
            u
            for u in await rt.store.list_usage(schedule.tenantId, since_ms=run.claimedAt)
            if u.turnId == run.turnId
        ]
        tokens = sum(u.inputTokens + u.outputTokens for u in usage)
        await rt.schedules.save_run(run.model_copy(update={"tokens": tokens}))
        if schedule.tokensPerRun is not None and tokens > schedule.tokensPerRun:
            reason = f"a run used {tokens} tokens, over tokensPerRun {schedule.tokensPerRun}"
            now = rt.clock.now_ms()
            paused = schedule.model_copy(update={"paused": True, "pausedReason": reason, "updatedAt": now})
            await rt.schedules.put_schedule(paused)
            raise QuotaReached(reason)


class QuotaReached(AgentVMError):
    """A schedule's own budget was reached."""

    code = "quota_exceeded"


__all__ = [
    "CLAIM_STALE_MS",
    "check_cron",
    "day_start",
    "fire_due",
    "latest_tick",
    "next_tick",
    "schedules_of",
    "tokens_since",
]
