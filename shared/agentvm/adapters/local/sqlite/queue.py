"""The ``TurnQueue`` port on SQLite, plus its consumer: the local host's stand-in for SQS FIFO.

A job is a row in ``turn_jobs``, written before ``enqueue`` returns, so an accepted turn survives
a crash of the process. The consumer runs in the same process and event loop:

- turns of one session run one at a time in enqueue order (the session's oldest live row is its
  head; nothing behind it starts until it is gone), turns of different sessions run concurrently;
- slots are shared fairly between tenants: at most ``max_concurrency`` turns run, at most
  ``max_per_tenant`` of them for one tenant, and a free slot goes to the waiting tenant with the
  fewest running turns (oldest head first within a tenant). One tenant's thousand slow turns
  leave slots for everybody else, and a newcomer's turn starts at the next free slot;
- success deletes the row; a failure re-queues it after ``retry_delay_s`` without losing its place,
  and after ``max_attempts`` failures moves it to the ``dead`` state, out of the session's line;
- rows left ``running`` by a crash (or a cancelled ``run``) are re-queued when a consumer starts,
  so delivery is at least once and handlers must be idempotent by ``turnId``;
- a job's outcome that cannot be written (the disk is full) is kept in memory and written again on
  every pass until it lands: the row never stays ``running`` for the life of the process, and the
  session's next turn runs as soon as space returns, with no restart.

Several worker processes of one data dir (``avm serve --workers N``, docs/scaling.md) may each
run a consumer on the same file when each has its own ``worker_id``: a row is claimed by an atomic
``UPDATE ... WHERE state = 'queued'`` that records its owner, so exactly one worker runs it, and a
session's next turn still waits for the running one whichever worker runs it. Each consumer
renews a lease in ``queue_workers``; at start a worker re-queues its own rows left ``running``,
and any worker re-queues the rows of one whose lease ran out (it crashed). Slots and tenant
shares are per worker. Without a ``worker_id`` (one process), a consumer at start re-queues every
``running`` row, as before: then one consumer per file.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import Counter, deque
from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import add_column, connect
from agentvm.errors import StorageUnavailable
from agentvm.records import TurnJob

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    Handler = Callable[[TurnJob], Awaitable[None]]

log = logging.getLogger("agentvm.queue")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turn_jobs (
    seq          INTEGER PRIMARY KEY,   -- enqueue order
    turn_id      TEXT NOT NULL UNIQUE,  -- the job's key: its turnId, or turnId#resume for a continuation
    session_id   TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    available_at REAL NOT NULL,         -- wall-clock seconds: retry timers outlive the process
    job          TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turn_jobs_by_session ON turn_jobs (session_id, state, seq);
CREATE INDEX IF NOT EXISTS turn_jobs_by_state ON turn_jobs (state, seq);
CREATE TABLE IF NOT EXISTS queue_workers (
    worker      TEXT PRIMARY KEY,
    alive_until REAL NOT NULL  -- wall-clock seconds: past it, the worker's running rows are re-queued
);
"""
LEASE_S = 15.0  # a worker that has not renewed its lease for this long is taken for dead
STOP_WAIT_S = 5.0  # a stopped consumer waits this long for its cancelled handlers to end

# Each live session's head (its oldest row not dead) when that head is waiting to run. A head
# that is 'running' or waiting for a retry blocks the rest of its session.
_HEADS = """
SELECT seq, session_id, attempts, available_at, job, json_extract(job, '$.tenantId') FROM turn_jobs AS t
WHERE state = 'queued'
  AND seq = (SELECT MIN(seq) FROM turn_jobs WHERE session_id = t.session_id AND state != 'dead')
ORDER BY seq
"""


class SqliteTurnQueue:
    """A durable per-session FIFO of ``TurnJob`` with an in-process consumer (``run``/``drain``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_attempts: int = 3,
        retry_delay_s: float = 1.0,
        max_concurrency: int = 1000,
        max_per_tenant: int | None = None,
        poll_interval_s: float = 1.0,
        worker_id: str | None = None,
    ) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        add_column(self._conn, "turn_jobs", "owner", "TEXT")  # files made before workers
        self.worker_id = worker_id
        self._lease_renewed_at = 0.0
        # Told when a job is enqueued or finished, so other workers look at the queue at once
        # (adapters/local/relay.py); their poll is the safety net.
        self.on_change: Callable[[], None] | None = None
        self.max_attempts = max_attempts
        self.retry_delay_s = retry_delay_s
        self.max_concurrency = max_concurrency
        self.max_per_tenant = max_concurrency if max_per_tenant is None else max_per_tenant
        # Only a safety net: enqueue and finished jobs wake the consumer through the event.
        self.poll_interval_s = poll_interval_s
        self._wake = asyncio.Event()
        self._inflight: dict[str, asyncio.Task[None]] = {}  # session id -> its running job
        self._running: Counter[str] = Counter()  # tenant id -> its running jobs
        self._unsettled: dict[int, Callable[[], object]] = {}  # seq -> the outcome write that failed
        self._consuming = False

    def close(self) -> None:
        self._conn.close()

    # producer side (the TurnQueue port)

    async def enqueue(self, job: TurnJob) -> None:
        # The commit happens before we return: the turn is durable once the caller acks it.
        self._conn.execute(
            "INSERT INTO turn_jobs (turn_id, session_id, state, available_at, job)"
            " VALUES (?, ?, 'queued', ?, ?) ON CONFLICT (turn_id) DO NOTHING",
            (job.jobKey, job.sessionId, time.time(), job.model_dump_json()),
        )
        self._wake.set()
        if self.on_change is not None:
            self.on_change()

    def wake(self) -> None:
        """Look at the queue now (another worker enqueued or finished a job)."""
        self._wake.set()

    # inspection, for tests and operators

    async def has_job(self, turn_id: str) -> bool:
        """Whether the turn's job is queued or running here (``turns.orphans.JobLookup``; async as
        the cluster's, whose table is a network round trip away; here one indexed local read)."""
        row = self._conn.execute(
            "SELECT 1 FROM turn_jobs WHERE turn_id = ? AND state != 'dead'", (turn_id,)
        ).fetchone()
        return row is not None

    def pending(self) -> list[TurnJob]:
        """Jobs queued or running, oldest first."""
        rows = self._conn.execute(
            "SELECT job FROM turn_jobs WHERE state IN ('queued', 'running') ORDER BY seq"
        ).fetchall()
        return [TurnJob.model_validate_json(r[0]) for r in rows]

    def dead(self) -> list[TurnJob]:
        """Jobs that failed ``max_attempts`` times, oldest first."""
        rows = self._conn.execute("SELECT job FROM turn_jobs WHERE state = 'dead' ORDER BY seq").fetchall()
        return [TurnJob.model_validate_json(r[0]) for r in rows]

    def depth_by_tenant(self) -> dict[str, tuple[int, int]]:
        """Jobs waiting to start (queued, not running), by tenant: (how many, the oldest one's
        ``enqueuedAt`` in epoch ms). For ``/v1/metrics``: one indexed scan of the queued rows."""
        rows = self._conn.execute(
            "SELECT json_extract(job, '$.tenantId'), COUNT(*), MIN(json_extract(job, '$.enqueuedAt'))"
            " FROM turn_jobs WHERE state = 'queued' GROUP BY 1"
        ).fetchall()
        return {str(tenant or ""): (int(count), int(oldest or 0)) for tenant, count, oldest in rows}

    def dead_count(self) -> int:
        """Jobs moved to the dead letters (failed ``max_attempts`` times)."""
        return int(self._conn.execute("SELECT COUNT(*) FROM turn_jobs WHERE state = 'dead'").fetchone()[0])

    # consumer side

    async def run(self, handler: Handler) -> None:
        """Consume forever; stop with ``task.cancel()``."""
        await self._consume(handler, until_idle=False)

    async def drain(self, handler: Handler) -> None:
        """Consume until nothing is queued or running (waiting out retry delays), then return."""
        await self._consume(handler, until_idle=True)

    async def _consume(self, handler: Handler, *, until_idle: bool) -> None:
        if self._consuming:
            raise RuntimeError("this queue already has a consumer")
        self._consuming = True
        try:
            # Whatever is 'running' now was started by a consumer that is gone (crash or cancel):
            # every such row with one worker; this worker's own (and dead workers') with several.
            if self.worker_id is None:
                self._conn.execute("UPDATE turn_jobs SET state = 'queued' WHERE state = 'running'")
            else:
                self._conn.execute(
                    "UPDATE turn_jobs SET state = 'queued', owner = NULL"
                    " WHERE state = 'running' AND owner = ?",
                    (self.worker_id,),
                )
            while True:
                # Cleared before scanning: an enqueue or a finished job after the scan sets it again.
                self._wake.clear()
                if self.worker_id is not None:
                    self._renew_lease()
                self._settle_pending()
                next_retry_at = self._start_ready(handler)
                if until_idle and not self._inflight and not self._unsettled and not self._has_live_jobs():
                    return
                timeout = self.poll_interval_s
                if next_retry_at is not None:
                    timeout = min(timeout, max(0.0, next_retry_at - time.time()))
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that lands
                # as the event is set (a finished job), and run() would never stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
        finally:
            # Cancelled (shutdown): stop the handlers but leave their rows 'running'. A handler
            # cut off mid-turn may already have had effects, and we cannot tell how far it got;
            # the next consumer's start-up re-queues the row, exactly as after a crash, so both
            # paths share one tested recovery, and an interrupted attempt is not counted as a
            # failure of the turn.
            # Bounded: a handler that ignores its cancel must not hold the process's shutdown (its
            # row stays 'running' all the same, re-queued as above).
            tasks = list(self._inflight.values())
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=STOP_WAIT_S)
            # A task cancelled before its first step never ran its own cleanup.
            self._inflight.clear()
            self._running.clear()
            self._consuming = False

    def _renew_lease(self) -> None:
        """Say this worker is alive (at most every few seconds), and re-queue the running rows of
        workers whose lease ran out: they crashed, and their turns run again here or elsewhere."""
        now = time.time()
        if now - self._lease_renewed_at < LEASE_S / 5:
            return
        self._lease_renewed_at = now
        self._conn.execute(
            "INSERT INTO queue_workers (worker, alive_until) VALUES (?, ?)"
            " ON CONFLICT (worker) DO UPDATE SET alive_until = excluded.alive_until",
            (self.worker_id, now + LEASE_S),
        )
        requeued = self._conn.execute(
            "UPDATE turn_jobs SET state = 'queued', owner = NULL WHERE state = 'running'"
            " AND (owner IS NULL OR (owner != ? AND owner NOT IN"
            " (SELECT worker FROM queue_workers WHERE alive_until > ?)))",
            (self.worker_id, now),
        ).rowcount
        if requeued:
            log.warning("re-queued the running turns of a worker that stopped", extra={"turns": requeued})

    def _has_live_jobs(self) -> bool:
        row = self._conn.execute("SELECT 1 FROM turn_jobs WHERE state != 'dead' LIMIT 1").fetchone()
        return row is not None

    def _start_ready(self, handler: Handler) -> float | None:
        """Start the session heads that may run now, fairly across tenants; return the earliest
        pending retry time."""
        now = time.time()
        next_retry_at: float | None = None
        waiting: dict[str, deque[tuple[int, int, str]]] = {}  # tenant -> its ready heads, oldest first
        for seq, session_id, attempts, available_at, job_json, tenant in self._conn.execute(_HEADS):
            if session_id in self._inflight:
                continue
            if available_at > now:
                next_retry_at = available_at if next_retry_at is None else min(next_retry_at, available_at)
                continue
            waiting.setdefault(tenant or "", deque()).append((seq, attempts, job_json))
        # A free slot goes to the waiting tenant with the fewest running turns (ties: oldest head).
        ready = [(self._running[t], heads[0][0], t) for t, heads in waiting.items()]
        heapq.heapify(ready)
        while ready and len(self._inflight) < self.max_concurrency:
            running, _, tenant = heapq.heappop(ready)
            if running >= self.max_per_tenant:
                continue  # this tenant is at its share; the others still get slots
            seq, attempts, job_json = waiting[tenant].popleft()
            started = self._start(handler, seq, TurnJob.model_validate_json(job_json), attempts)
            if waiting[tenant]:
                heapq.heappush(ready, (running + started, waiting[tenant][0][0], tenant))
        return next_retry_at

    def _start(self, handler: Handler, seq: int, job: TurnJob, attempts: int) -> int:
        """Claim the row and run it: 1, or 0 if another worker claimed it first."""
        claimed = self._conn.execute(
            "UPDATE turn_jobs SET state = 'running', owner = ? WHERE seq = ? AND state = 'queued'",
            (self.worker_id, seq),
        ).rowcount
        if not claimed:
            return 0
        self._running[job.tenantId] += 1
        self._inflight[job.sessionId] = asyncio.create_task(
            self._run_one(handler, seq, job, attempts), name=f"turn-{job.turnId}"
        )
        return 1

    async def _run_one(self, handler: Handler, seq: int, job: TurnJob, attempts: int) -> None:
        try:
            await handler(job)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # we are being cancelled: leave the row 'running' (see _consume)
            self._settle(seq, lambda: self._record_failure(seq, job, attempts + 1, "CancelledError"))
        except Exception as exc:
            error = type(exc).__name__
            self._settle(seq, lambda: self._record_failure(seq, job, attempts + 1, error))
        else:
            self._settle(seq, lambda: self._conn.execute("DELETE FROM turn_jobs WHERE seq = ?", (seq,)))
        finally:
            self._inflight.pop(job.sessionId, None)
            self._running[job.tenantId] -= 1
            if self._running[job.tenantId] <= 0:
                del self._running[job.tenantId]
            self._wake.set()
            if self.on_change is not None:
                self.on_change()  # the session's next turn may wait on another worker

    def _settle(self, seq: int, write: Callable[[], object]) -> None:
        """Write a job's outcome; if storage is unavailable, keep it and try again each pass (the
        row stays ``running`` until then, holding its session's line, never the process's)."""
        try:
            write()
        except StorageUnavailable:
            log.warning("could not record a turn's outcome (storage unavailable); will retry")
            self._unsettled[seq] = write

    def _settle_pending(self) -> None:
        for seq, write in list(self._unsettled.items()):
            try:
                write()
            except StorageUnavailable:
                return  # still no space: try again on the next pass
            del self._unsettled[seq]

    def _record_failure(self, seq: int, job: TurnJob, attempts: int, error: str) -> None:
        # Logs carry ids and the exception type only: exception text may quote user content.
        if attempts < self.max_attempts:
            self._conn.execute(
                "UPDATE turn_jobs SET state = 'queued', owner = NULL, attempts = ?, available_at = ?"
                " WHERE seq = ?",
                (attempts, time.time() + self.retry_delay_s, seq),
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
            self._conn.execute(
                "UPDATE turn_jobs SET state = 'dead', attempts = ? WHERE seq = ?", (attempts, seq)
            )
            log.error(
                "turn %s (session %s) failed with %s after %d attempts; moved to dead letters",
                job.turnId,
                job.sessionId,
                error,
                attempts,
            )


__all__ = ["SqliteTurnQueue"]
