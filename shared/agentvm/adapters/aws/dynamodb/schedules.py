"""The ``Schedules`` port on DynamoDB (PynamoDB), on AgentVM's single table (docs/schedules.md).

========  ====================  ======================  ==========  ================================
item      pk                    sk                      gsi2pk      gsi2sk
========  ====================  ======================  ==========  ================================
schedule  ``TENANT#<t>``        ``SCHED#<id>``          SCHEDDUE    ``<nextAt:013d>#<id>``
run       ``SCHEDRUN#<id>``     ``TICK#<tick:013d>``    SCHEDCLAIM  ``<claimedAt:013d>#<id>#<tick>``
========  ====================  ======================  ==========  ================================

The ``gsi2`` keys are there only while a schedule is unpaused, only while a run is ``claimed``.

A tenant's schedules live in its partition beside its containers (``list_schedules`` is one
consistent Query); a schedule's runs are one partition of their own (newest first is one Query).

**Due schedules** are the sparse ``gsi2`` partition ``SCHEDDUE``, sorted by ``nextAt``: an unpaused
schedule has both index keys, a paused one neither, so "what is due now" is one Query with a key
condition and nothing else is read. The index is eventually consistent, so it is only a hint: each
schedule it lists is read again (a consistent GetItem) and dropped if it was paused, deleted or
moved on meanwhile. **Stale claims** are likewise the sparse ``SCHEDCLAIM`` partition: a run has
its index keys while it is ``claimed`` and loses them when saved with any other status.

**Exactly once.** ``claim_run`` is a PutItem conditional on ``attribute_not_exists(pk)``: of any
number of sweepers (two invocations of the same minute, a retried one, a restarted one) one stores
the run and fires the tick; the others get ``ConditionalCheckFailed`` and fire nothing.
``advance`` is an UpdateItem of ``nextAt`` alone conditional on ``nextAt`` still being the value
read (a concurrent ``PATCH`` of the schedule's other fields is never overwritten): the ``nextAt``
attribute is the schedule's one source of that field (the record's JSON beside it is what the last
``put_schedule`` wrote). ``save_run`` is conditional on the run existing, so a deleted schedule's
runs stay deleted.

**Growth.** Runs expire (DynamoDB TTL) ``RUN_TTL_DAYS`` after their tick: an every-minute schedule
would otherwise keep 525,600 items a year. ``delete_schedule`` deletes the schedule, then its runs
newest first, at most ``DELETE_RUNS_INLINE`` of them in the request (BatchWriteItem, 25 a call); older
ones are unreachable (no schedule names them) and expire.

**Costs** (items ~0.5 KB): a schedule put 1 WRU + 1 for its index entry; an advance 1 WRU + 2
(its index entry moves); a claim 1 WRU + 1, the run's save 1 WRU + 1 (it leaves the index);
a sweep that finds nothing due: two ``gsi2`` Queries, 1 RRU. One ``SCHEDDUE`` partition for every
tenant: an every-minute schedule moves its entry once a minute, so 30,000 of them stay under a
partition's 1,000 writes a second; shard the key (``SCHEDDUE#<n>``, queried in parallel) beyond.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model, tenant_pk
from agentvm.adapters.aws.dynamodb.store import conditional_write
from agentvm.records import ScheduleRecord, ScheduleRun

if TYPE_CHECKING:
    from pynamodb.expressions.condition import Condition

SCHED_PREFIX = "SCHED#"
RUN_PK_PREFIX = "SCHEDRUN#"
TICK_PREFIX = "TICK#"
DUE_PK = "SCHEDDUE"
CLAIMED_PK = "SCHEDCLAIM"
RUN_TTL_DAYS = 90
DELETE_RUNS_INLINE = 2_000


class ScheduleItem(TableItem):
    tenantId = UnicodeAttribute()
    nextAt = NumberAttribute()  # the schedule's nextAt (the JSON's is what the last put wrote)
    data = UnicodeAttribute()


class RunItem(TableItem):
    tenantId = UnicodeAttribute()
    status = UnicodeAttribute()
    data = UnicodeAttribute()


def _run_pk(schedule_id: str) -> str:
    return f"{RUN_PK_PREFIX}{schedule_id}"


def _tick_sk(tick_at: int) -> str:
    return f"{TICK_PREFIX}{tick_at:013d}"


def _due_sk(schedule_id: str, next_at: int) -> str:
    return f"{next_at:013d}#{schedule_id}"


class DynamoDbSchedules:
    """``agentvm.ports.Schedules`` on the single DynamoDB table. Blocking calls run in a thread."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._sched = bind_model(ScheduleItem, table_name, region, host)
        self._run = bind_model(RunItem, table_name, region, host)

    # -- schedules ---------------------------------------------------------------------------------

    def _item(self, schedule: ScheduleRecord) -> ScheduleItem:
        due = not schedule.paused
        return self._sched(
            tenant_pk(schedule.tenantId),
            SCHED_PREFIX + schedule.scheduleId,
            tenantId=schedule.tenantId,
            nextAt=schedule.nextAt,
            data=schedule.model_dump_json(),
            gsi2pk=DUE_PK if due else None,
            gsi2sk=_due_sk(schedule.scheduleId, schedule.nextAt) if due else None,
        )

    @staticmethod
    def _record(item: ScheduleItem) -> ScheduleRecord:
        record = ScheduleRecord.model_validate_json(item.data)
        return record.model_copy(update={"nextAt": int(item.nextAt)})

    async def put_schedule(self, schedule: ScheduleRecord) -> None:
        await asyncio.to_thread(self._item(schedule).save)

    def _get(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None:
        try:
            item = self._sched.get(tenant_pk(tenant_id), SCHED_PREFIX + schedule_id, consistent_read=True)
        except self._sched.DoesNotExist:
            return None
        return self._record(item) if item.tenantId == tenant_id else None

    async def get_schedule(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None:
        return await asyncio.to_thread(self._get, tenant_id, schedule_id)

    async def list_schedules(self, tenant_id: str) -> list[ScheduleRecord]:
        def query() -> list[ScheduleRecord]:
            items = self._sched.query(
                tenant_pk(tenant_id), self._sched.sk.startswith(SCHED_PREFIX), consistent_read=True
            )
            return [self._record(i) for i in items if i.tenantId == tenant_id]

        return await asyncio.to_thread(query)

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        item = self._sched(tenant_pk(tenant_id), SCHED_PREFIX + schedule_id)
        deleted = await conditional_write(lambda: item.delete(condition=self._sched.pk.exists()))
        if deleted:
            await asyncio.to_thread(self._delete_runs, schedule_id)
        return deleted

    def _delete_runs(self, schedule_id: str) -> None:
        runs = self._run.query(
            _run_pk(schedule_id),
            self._run.sk.startswith(TICK_PREFIX),
            scan_index_forward=False,  # newest first: a claim still open is among them
            limit=DELETE_RUNS_INLINE,
            attributes_to_get=["pk", "sk"],
        )
        with self._run.batch_write() as batch:  # 25 deletes a request; unprocessed ones resent
            for run in runs:
                batch.delete(run)

    async def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRecord]:
        def query() -> list[ScheduleRecord]:
            hints = self._sched.gsi2.query(DUE_PK, self._sched.gsi2sk <= f"{now_ms:013d}~", limit=limit)
            out = []
            for hint in list(hints):
                current = self._get(hint.tenantId, hint.sk.removeprefix(SCHED_PREFIX))
                # the index lags its table: paused, deleted or moved on since, it is not due
                if current is not None and not current.paused and current.nextAt <= now_ms:
                    out.append(current)
            return out

        return await asyncio.to_thread(query)

    async def advance(self, schedule: ScheduleRecord, next_at: int) -> bool:
        item = self._sched(tenant_pk(schedule.tenantId), SCHED_PREFIX + schedule.scheduleId)
        # gsi2sk alone indexes nothing: a paused schedule (no gsi2pk) stays out of the index
        actions = [
            self._sched.nextAt.set(next_at),
            self._sched.gsi2sk.set(_due_sk(schedule.scheduleId, next_at)),
        ]
        condition = self._sched.nextAt == schedule.nextAt
        return await conditional_write(lambda: item.update(actions=actions, condition=condition))

    # -- runs ----------------------------------------------------------------------------------------

    def _run_item(self, run: ScheduleRun) -> RunItem:
        claimed = run.status == "claimed"
        expires = datetime.fromtimestamp(run.tickAt / 1000 + RUN_TTL_DAYS * 86_400, tz=UTC)
        return self._run(
            _run_pk(run.scheduleId),
            _tick_sk(run.tickAt),
            tenantId=run.tenantId,
            status=run.status,
            data=run.model_dump_json(),
            gsi2pk=CLAIMED_PK if claimed else None,
            gsi2sk=f"{run.claimedAt:013d}#{run.scheduleId}#{run.tickAt}" if claimed else None,
            expiresAt=expires,
        )

    async def _write_run(self, run: ScheduleRun, condition: Condition) -> bool:
        item = self._run_item(run)
        return await conditional_write(lambda: item.save(condition=condition))

    async def claim_run(self, run: ScheduleRun) -> bool:
        return await self._write_run(run, self._run.pk.does_not_exist())

    async def save_run(self, run: ScheduleRun) -> None:
        await self._write_run(run, self._run.pk.exists())  # never brings back a deleted one

    async def list_runs(
        self, tenant_id: str, schedule_id: str, *, since_ms: int = 0, limit: int = 100
    ) -> list[ScheduleRun]:
        def query() -> list[ScheduleRun]:
            items = self._run.query(
                _run_pk(schedule_id),
                self._run.sk.between(_tick_sk(max(since_ms, 0)), f"{TICK_PREFIX}~"),
                scan_index_forward=False,
                consistent_read=True,
                limit=limit,
            )
            return [ScheduleRun.model_validate_json(i.data) for i in items if i.tenantId == tenant_id]

        return await asyncio.to_thread(query)

    async def stale_claims(self, claimed_before_ms: int, limit: int) -> list[ScheduleRun]:
        def query() -> list[ScheduleRun]:
            hints = self._run.gsi2.query(
                CLAIMED_PK, self._run.gsi2sk < f"{claimed_before_ms:013d}", limit=limit
            )
            out = []
            for hint in list(hints):
                try:  # the index lags: the run may have been sent (or deleted) since
                    item = self._run.get(hint.pk, hint.sk, consistent_read=True)
                except self._run.DoesNotExist:
                    continue
                if item.status == "claimed":
                    out.append(ScheduleRun.model_validate_json(item.data))
            return out

        return await asyncio.to_thread(query)


__all__ = ["DynamoDbSchedules", "RunItem", "ScheduleItem"]
