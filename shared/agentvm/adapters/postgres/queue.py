"""The ``TurnQueue`` port on PostgreSQL, plus its consumer: the cluster's stand-in for SQS FIFO.

Every node enqueues and every node consumes; the table ``turn_jobs`` (migration 0200) is the queue.
The guarantees are the SQLite queue's (``adapters/local/sqlite/queue.py``), across machines:

- durable: a job is a committed row before ``enqueue`` returns; idempotent by ``TurnJob.jobKey``;
- ordered per session: a row runs only when no earlier row of its session is live (queued or
  running), so one turn of a session runs at a time, in enqueue order, whichever node runs it.
  ``enqueue`` takes the session's transaction-level advisory lock, so a session's rows commit in
  ``seq`` order and no node can see a later row before an earlier one;
- fair across tenants: a node fills a free slot with the waiting tenant that has the fewest running
  turns in the whole cluster (oldest head first), at most ``max_per_tenant`` running per tenant
  (read cluster-wide before each claim; nodes claiming at the same instant may overshoot it by a
  turn each), at most ``max_concurrency`` per node. A flood from one tenant leaves slots for all;
- claims are one ``UPDATE ... WHERE seq IN (SELECT ... FOR UPDATE SKIP LOCKED)``: nodes claiming
  at once never wait on each other's rows and never claim the same row;
- leases with heartbeats: a claimed row records its owner and ``lease_until`` (the database's
  clock). The owner renews all its rows in one statement every ``lease_s / 4``; any node re-queues
  rows whose lease ran out (a dead or partitioned node) and they run again elsewhere within about
  ``lease_s`` seconds. Each claim bumps the row's ``claim`` (a fencing token): an outcome is written
  only by the claim that still holds the row, so a node that lost its lease cannot delete or retry
  a row another node now runs; a heartbeat that finds one of its turns taken cancels it locally;
- delivery is at least once, exactly as on the other hosts: a turn run again resumes from its
  stored steps (turn and tool-step keys, ``turns/worker``), so nothing is lost and nothing runs twice;
- failures re-queue after ``retry_delay_s`` keeping the row's place, then go ``dead`` after
  ``max_attempts``; a stopped consumer (``run`` cancelled: SIGTERM) hands its running rows back at
  once, so another node resumes them without waiting for the lease;
- wake-ups: ``enqueue`` and finished jobs ``NOTIFY avm_turn_jobs`` (in the same transaction, so a
  notification never precedes its row), and every node listening (``Notifications``) claims at
  once; the poll every ``poll_interval_s`` is the backstop for a missed notification.

Why hand-written SQL and not a PostgreSQL queue library: procrastinate and PgQueuer are maintained
and use the same ``SKIP LOCKED`` claim, but neither has what defines this queue: per-session
order that survives retries (procrastinate's ``lock`` serialises but a failed job does not keep its
place; PgQueuer has no per-key order), fairness by tenant with a cluster-wide share (both order by
priority/id, and PgQueuer's limits are per entrypoint), and outcomes fenced by a claim token. Each
would bring its own schema, worker loop and connection handling beside the node's pool, and still
need this module's scheduling on top. The queue here is the claim query, a heartbeat and a
handful of ``UPDATE``s on the pool the stores already use, in the same transactions model.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

import psycopg

from agentvm.errors import StorageUnavailable
from agentvm.records import TurnJob

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.adapters.postgres.database import Database
    from agentvm.adapters.postgres.notifications import Notifications

    Handler = Callable[[TurnJob], Awaitable[None]]

log = logging.getLogger("agentvm.queue")

CHANNEL = "avm_turn_jobs"
LEASE_S = 10.0  # a running row whose owner has not renewed it for this long is run again elsewhere

_ENQUEUE = """
INSERT INTO turn_jobs (job_key, session_id, tenant_id, state, enqueued_at, job)
VALUES (%(key)s, %(session)s, %(tenant)s, 'queued', %(enqueued_at)s, %(job)s)
ON CONFLICT (job_key) DO NOTHING
"""

# Up to %(per_tenant)s ready heads of each tenant with waiting rows: a row is a head when no earlier
# row of its session is live. One index probe per candidate (turn_jobs_live_by_session).
HAND_BACK_S = 5.0  # a stop waits at most this long for its cancelled turns to end

_READY_HEADS = """
SELECT h.seq, h.tenant_id FROM (SELECT DISTINCT tenant_id FROM turn_jobs WHERE state = 'queued') AS w,
LATERAL (
    SELECT t.seq, t.tenant_id FROM turn_jobs AS t
    WHERE t.tenant_id = w.tenant_id AND t.state = 'queued' AND t.available_at <= now()
      AND t.seq <> ALL(%(ours)s)
      AND NOT EXISTS (SELECT 1 FROM turn_jobs AS p
                      WHERE p.session_id = t.session_id AND p.state <> 'dead' AND p.seq < t.seq)
    ORDER BY t.seq LIMIT %(per_tenant)s
) AS h
"""

_CLAIM = """
UPDATE turn_jobs AS t
SET state = 'running', owner = %(node)s, claim = t.claim + 1,
    lease_until = now() + make_interval(secs => %(lease)s)
FROM (SELECT seq FROM turn_jobs WHERE seq = ANY(%(seqs)s) AND state = 'queued'
      ORDER BY seq FOR UPDATE SKIP LOCKED) AS c
WHERE t.seq = c.seq
RETURNING t.seq, t.claim, t.attempts, t.job
"""


class PostgresTurnQueue:
    """A durable per-session FIFO of ``TurnJob`` shared by the nodes of a cluster (``run``/``drain``)."""

    def __init__(
        self,
        database: Database,
        *,
        node: str,
        notifications: Notifications | None = None,
        max_attempts: int = 3,
        retry_delay_s: float = 1.0,
        max_concurrency: int = 1000,
        max_per_tenant: int | None = None,
        poll_interval_s: float = 1.0,
        lease_s: float = LEASE_S,
    ) -> None:
        self._db = database
        self.node = node
        self.max_attempts = max_attempts
        self.retry_delay_s = retry_delay_s
        self.max_concurrency = max_concurrency
        self.max_per_tenant = max_concurrency if max_per_tenant is None else max_per_tenant
        self.poll_interval_s = poll_interval_s  # a backstop: notifications wake the consumer
        self.lease_s = lease_s
        self._wake = asyncio.Event()
        self._inflight: dict[int, tuple[TurnJob, int, asyncio.Task[None]]] = {}  # seq -> job, claim, task
        self._unsettled: dict[int, Callable[[], Awaitable[object]]] = {}  # seq -> outcome write that failed
        self._heartbeat_at = 0.0
        self._consuming = False
        # Awaited before a turn that ran elsewhere before (claimed again: a retry or a resume) starts
        # here: the cluster sets it to ``PostgresPush.barrier`` so the old attempt's frames reach
        # this node's sockets before the new attempt's.
        self.before_resume: Callable[[], Awaitable[None]] | None = None
        if notifications is not None:
            notifications.on(CHANNEL, lambda _payload: self._wake.set())
            notifications.on_reconnect(self._wake.set)

    # producer side (the TurnQueue port)

    async def enqueue(self, job: TurnJob) -> None:
        # One round trip (pipeline mode): BEGIN, the session's lock, the row, the wake-up, COMMIT. A
        # duplicate's wake-up is harmless (nothing new to claim), so it is not made conditional.
        async with self._db.connection() as conn, conn.pipeline(), conn.transaction():
            # rows of one session commit in seq order (see the module docstring)
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 28))", (job.sessionId,))
            await conn.execute(
                _ENQUEUE,
                {
                    "key": job.jobKey,
                    "session": job.sessionId,
                    "tenant": job.tenantId,
                    "enqueued_at": job.enqueuedAt,
                    "job": job.model_dump_json(),
                },
            )
            await conn.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
        self._wake.set()

    def wake(self) -> None:
        """Look at the queue now."""
        self._wake.set()

    # inspection, for tests and operators

    async def has_job(self, turn_id: str) -> bool:
        """Whether the turn's job is queued or running on any node."""
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT 1 FROM turn_jobs WHERE job_key = %s AND state <> 'dead'", (turn_id,)
            )
            return await cursor.fetchone() is not None

    async def pending(self) -> list[TurnJob]:
        """Jobs queued or running, oldest first."""
        return await self._jobs("state IN ('queued', 'running')")

    async def dead(self) -> list[TurnJob]:
        """Jobs that failed ``max_attempts`` times, oldest first."""
        return await self._jobs("state = 'dead'")

    async def _jobs(self, where: str) -> list[TurnJob]:
        async with self._db.connection() as conn:
            cursor = await conn.execute(f"SELECT job FROM turn_jobs WHERE {where} ORDER BY seq")  # noqa: S608
            return [TurnJob.model_validate_json(row[0]) for row in await cursor.fetchall()]

    async def depth_by_tenant(self) -> dict[str, tuple[int, int]]:
        """Jobs waiting to start, by tenant: (how many, the oldest one's ``enqueuedAt`` in epoch ms)."""
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT tenant_id, COUNT(*), MIN(enqueued_at) FROM turn_jobs WHERE state = 'queued'"
                " GROUP BY tenant_id"
            )
            return {tenant: (int(count), int(oldest)) for tenant, count, oldest in await cursor.fetchall()}

    async def dead_count(self) -> int:
        async with self._db.connection() as conn:
            cursor = await conn.execute("SELECT COUNT(*) FROM turn_jobs WHERE state = 'dead'")
            row = await cursor.fetchone()
            return int(row[0]) if row else 0

    # consumer side

    async def run(self, handler: Handler) -> None:
        """Consume forever; stop with ``task.cancel()`` (running turns are handed back)."""
        await self._consume(handler, until_idle=False)

    async def drain(self, handler: Handler) -> None:
        """Consume until no job is queued or running on any node, then return."""
        await self._consume(handler, until_idle=True)

    async def _consume(self, handler: Handler, *, until_idle: bool) -> None:
        if self._consuming:
            raise RuntimeError("this queue already has a consumer")
        self._consuming = True
        try:
            # rows this node left running when it last stopped (a restart under the same node id)
            await self._execute(
                "UPDATE turn_jobs SET state = 'queued', owner = NULL, lease_until = NULL"
                " WHERE state = 'running' AND owner = %s",
                (self.node,),
            )
            while True:
                self._wake.clear()  # before the pass: a wake-up during it makes another pass
                next_retry_in: float | None = None
                try:
                    await self._heartbeat()
                    await self._settle_pending()
                    await self._start_ready(handler)
                    next_retry_in = await self._next_retry_in()
                    if until_idle and not self._inflight and not self._unsettled and not await self._live():
                        return
                except (psycopg.OperationalError, StorageUnavailable, OSError):
                    log.warning("postgres unavailable in a queue pass; trying again")
                timeout = (
                    self.poll_interval_s
                    if next_retry_in is None
                    else min(self.poll_interval_s, next_retry_in)
                )
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, timeout)):
                        await self._wake.wait()
        finally:
            await self._hand_back()
            self._consuming = False

    async def _hand_back(self) -> None:
        """Stopped (SIGTERM, shutdown): cancel our turns and re-queue their rows now, so another
        node resumes them at once; a handler cut off may have had effects, which the turn's stored
        steps make safe to run again (as after a crash, where the lease does the same later)."""
        entries = list(self._inflight.items())
        for _, (_, _, task) in entries:
            task.cancel()
        # Bounded: a turn cut off while it writes to a database that is away (a failover) may not
        # finish cancelling until the pool gives up, and a handler may swallow its cancel; the stop
        # must not wait for either. ``asyncio.wait`` returns at the bound whatever the turns do
        # (``gather`` under a timeout would wait for every turn to end). A turn still running is
        # handed back all the same and resumed elsewhere from its stored steps, as after a crash.
        tasks = [task for _, (_, _, task) in entries]
        if tasks:
            await asyncio.wait(tasks, timeout=HAND_BACK_S)
        self._inflight.clear()
        unsettled, self._unsettled = self._unsettled, {}
        entries = [entry for entry in entries if entry[0] not in unsettled]  # finished: not handed back
        if not entries and not unsettled:
            return
        try:
            async with asyncio.timeout(5):
                for outcome in unsettled.values():
                    await outcome()  # an outcome still unwritten is written, not run again
                async with self._db.transaction() as conn:
                    for seq, (_, claim, _) in entries:
                        await conn.execute(
                            "UPDATE turn_jobs SET state = 'queued', owner = NULL, lease_until = NULL"
                            " WHERE seq = %s AND claim = %s AND state = 'running'",
                            (seq, claim),
                        )
                    await conn.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
        except Exception:  # their leases run out instead
            log.warning("could not hand back running turns at shutdown; their leases will expire")

    async def _execute(self, statement: str, params: tuple[object, ...] | dict[str, object] = ()) -> int:
        async with self._db.connection() as conn:
            cursor = await conn.execute(statement, params)
            return cursor.rowcount

    async def _live(self) -> bool:
        async with self._db.connection() as conn:
            cursor = await conn.execute("SELECT 1 FROM turn_jobs WHERE state <> 'dead' LIMIT 1")
            return await cursor.fetchone() is not None

    async def _heartbeat(self) -> None:
        """Renew our rows' leases (at most every ``lease_s / 4``), cancel the turns we no longer
        hold, and re-queue the rows of nodes whose lease ran out."""
        now = time.monotonic()
        if now - self._heartbeat_at < self.lease_s / 4:
            return
        self._heartbeat_at = now
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE turn_jobs SET lease_until = now() + make_interval(secs => %s)"
                " WHERE state = 'running' AND owner = %s RETURNING seq, claim",
                (self.lease_s, self.node),
            )
            held = {(seq, claim) for seq, claim in await cursor.fetchall()}
            cursor = await conn.execute(
                "UPDATE turn_jobs SET state = 'queued', owner = NULL, lease_until = NULL"
                " WHERE state = 'running' AND lease_until < now() RETURNING seq"
            )
            expired = len(await cursor.fetchall())
            if expired:
                await conn.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
                log.warning(
                    "re-queued the running turns of a node whose lease ran out", extra={"turns": expired}
                )
        for seq, (job, claim, task) in list(self._inflight.items()):
            if (seq, claim) not in held and seq not in self._unsettled and not task.done():
                log.warning("lost the lease of turn %s; another node runs it now", job.turnId)
                task.cancel()
                del self._inflight[seq]

    async def _next_retry_in(self) -> float | None:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT EXTRACT(EPOCH FROM MIN(available_at) - now()) FROM turn_jobs"
                " WHERE state = 'queued' AND available_at > now()"
            )
            row = await cursor.fetchone()
        return None if row is None or row[0] is None else float(row[0])

    async def _start_ready(self, handler: Handler) -> None:
        """Claim the session heads this node may run now, fairly across tenants, and start them."""
        free = self.max_concurrency - len(self._inflight)
        if free <= 0:
            return
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT tenant_id, COUNT(*) FROM turn_jobs WHERE state = 'running' GROUP BY tenant_id"
            )
            running = {tenant: int(count) for tenant, count in await cursor.fetchall()}
            # ``ours``: a row we still run whose lease lapsed (a heartbeat that came too late) and
            # was re-queued is not claimed again here: that would run the turn twice on this node.
            # Our next heartbeat finds it gone and cancels our attempt; then any node resumes it.
            # (Left out in SQL, so it takes none of its tenant's ``per_tenant`` heads.)
            cursor = await conn.execute(_READY_HEADS, {"per_tenant": free, "ours": list(self._inflight)})
            waiting: dict[str, deque[int]] = {}
            for seq, tenant in sorted(await cursor.fetchall()):
                waiting.setdefault(tenant, deque()).append(seq)
            # a free slot goes to the waiting tenant with the fewest running turns (ties: oldest head)
            ready = [(running.get(t, 0), heads[0], t) for t, heads in waiting.items()]
            heapq.heapify(ready)
            chosen: list[int] = []
            while ready and len(chosen) < free:
                count, _, tenant = heapq.heappop(ready)
                if count >= self.max_per_tenant:
                    continue
                chosen.append(waiting[tenant].popleft())
                if waiting[tenant]:
                    heapq.heappush(ready, (count + 1, waiting[tenant][0], tenant))
            if not chosen:
                return
            cursor = await conn.execute(_CLAIM, {"node": self.node, "lease": self.lease_s, "seqs": chosen})
            claimed = sorted(await cursor.fetchall())
        for seq, claim, attempts, job_json in claimed:
            job = TurnJob.model_validate_json(job_json)
            task = asyncio.create_task(
                self._run_one(handler, seq, claim, job, attempts), name=f"turn-{job.turnId}"
            )
            self._inflight[seq] = (job, claim, task)

    async def _run_one(self, handler: Handler, seq: int, claim: int, job: TurnJob, attempts: int) -> None:
        outcome: Callable[[], Awaitable[object]]
        try:
            if claim > 1 and self.before_resume is not None:
                await self.before_resume()
            await handler(job)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # stopping, or our lease was lost: the row is handed back or already re-run
            outcome = lambda: self._record_failure(seq, claim, job, attempts + 1, "CancelledError")  # noqa: E731
        except Exception as exc:
            error = type(exc).__name__
            outcome = lambda: self._record_failure(seq, claim, job, attempts + 1, error)  # noqa: E731
        else:
            outcome = lambda: self._finish(seq, claim)  # noqa: E731
        finally:
            self._wake.set()
        try:
            await outcome()
        except (psycopg.OperationalError, StorageUnavailable, OSError):
            log.warning("could not record a turn's outcome (postgres unavailable); will retry")
            self._unsettled[seq] = outcome
        else:
            self._inflight.pop(seq, None)

    async def _settle_pending(self) -> None:
        for seq, outcome in list(self._unsettled.items()):
            await outcome()  # an error leaves it for the next pass
            del self._unsettled[seq]
            self._inflight.pop(seq, None)

    async def _finish(self, seq: int, claim: int) -> None:
        async with self._db.connection() as conn, conn.pipeline(), conn.transaction():  # one round trip
            await conn.execute("DELETE FROM turn_jobs WHERE seq = %s AND claim = %s", (seq, claim))
            await conn.execute("SELECT pg_notify(%s, '')", (CHANNEL,))  # the session's next turn

    async def _record_failure(self, seq: int, claim: int, job: TurnJob, attempts: int, error: str) -> None:
        # Logs carry ids and the exception type only: exception text may quote user content.
        async with self._db.transaction() as conn:
            if attempts < self.max_attempts:
                await conn.execute(
                    "UPDATE turn_jobs SET state = 'queued', owner = NULL, lease_until = NULL, attempts = %s,"
                    " available_at = now() + make_interval(secs => %s) WHERE seq = %s AND claim = %s",
                    (attempts, self.retry_delay_s, seq, claim),
                )
                log.warning(
                    "turn %s (session %s) failed with %s, attempt %d of %d; retrying",
                    job.turnId,
                    job.sessionId,
                    error,
                    attempts,
                    self.max_attempts,
                )
            else:
                await conn.execute(
                    "UPDATE turn_jobs SET state = 'dead', owner = NULL, lease_until = NULL, attempts = %s"
                    " WHERE seq = %s AND claim = %s",
                    (attempts, seq, claim),
                )
                log.error(
                    "turn %s (session %s) failed with %s after %d attempts; moved to dead letters",
                    job.turnId,
                    job.sessionId,
                    error,
                    attempts,
                )
            await conn.execute("SELECT pg_notify(%s, '')", (CHANNEL,))


__all__ = ["CHANNEL", "LEASE_S", "PostgresTurnQueue"]
