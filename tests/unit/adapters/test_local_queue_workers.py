"""``SqliteTurnQueue`` consumed by several worker processes at once (``avm serve --workers N``).

Two queues on one file stand for two workers (each has its own connection, as each process has):
every job runs exactly once, a session's turns still run one at a time in order whichever worker
takes them, and the running turns of a worker that stopped are run again by another one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite import queue as sqlite_queue
from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from tests.unit.adapters.test_local_queue import FAST, job

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.records import TurnJob


class Shared:
    """One handler for both workers: who ran what, and whether a session ever ran twice at once."""

    def __init__(self, hold_s: float = 0.02) -> None:
        self.hold_s = hold_s
        self.ran: list[tuple[str, str]] = []  # (worker, turn id)
        self.active_sessions: set[str] = set()
        self.overlaps = 0

    def handler(self, worker: str):
        async def run(job: TurnJob) -> None:
            if job.sessionId in self.active_sessions:
                self.overlaps += 1
            self.active_sessions.add(job.sessionId)
            try:
                await asyncio.sleep(self.hold_s)
                self.ran.append((worker, job.turnId))
            finally:
                self.active_sessions.discard(job.sessionId)

        return run


async def _until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_two_workers_run_every_job_once_and_keep_each_session_in_order(tmp_path: Path) -> None:
    # Two slots each: five sessions at once need both workers.
    a = SqliteTurnQueue(tmp_path / "queue.db", worker_id="w0", max_concurrency=2, **FAST)
    b = SqliteTurnQueue(tmp_path / "queue.db", worker_id="w1", max_concurrency=2, **FAST)
    a.on_change, b.on_change = b.wake, a.wake  # what the workers' relay does
    shared = Shared()
    consumers = [asyncio.create_task(q.run(shared.handler(q.worker_id or ""))) for q in (a, b)]
    expected = [f"t{s}_{i}" for s in range(5) for i in range(6)]
    for i in range(6):
        for s in range(5):
            await (a if (s + i) % 2 else b).enqueue(job(f"t{s}_{i}", session_id=f"ses_{s}"))
    await _until(lambda: len(shared.ran) == len(expected))
    for task in consumers:
        task.cancel()
    await asyncio.gather(*consumers, return_exceptions=True)

    turns = [turn for _, turn in shared.ran]
    assert sorted(turns) == sorted(expected)  # each exactly once
    for s in range(5):  # each session in enqueue order
        assert [t for t in turns if t.startswith(f"t{s}_")] == [f"t{s}_{i}" for i in range(6)]
    assert shared.overlaps == 0
    assert {worker for worker, _ in shared.ran} == {"w0", "w1"}  # both took work
    a.close()
    b.close()


async def test_the_running_turns_of_a_stopped_worker_run_again_on_another(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(sqlite_queue, "LEASE_S", 0.3)
    a = SqliteTurnQueue(tmp_path / "queue.db", worker_id="w0", **FAST)
    started = asyncio.Event()

    async def stuck(job: TurnJob) -> None:
        started.set()
        await asyncio.sleep(3600)

    consumer = asyncio.create_task(a.run(stuck))
    await a.enqueue(job("t1"))
    await asyncio.wait_for(started.wait(), 5)
    consumer.cancel()  # the worker stops (a crash leaves the same row: running, owned by w0)
    with contextlib.suppress(asyncio.CancelledError):
        await consumer
    row = sqlite3.connect(tmp_path / "queue.db").execute("SELECT state, owner FROM turn_jobs").fetchone()
    assert row == ("running", "w0")

    b = SqliteTurnQueue(tmp_path / "queue.db", worker_id="w1", **FAST)
    shared = Shared(hold_s=0)
    other = asyncio.create_task(b.run(shared.handler("w1")))
    await asyncio.sleep(0.1)
    assert shared.ran == []  # w0's lease has not run out yet: its turn is not taken from it
    await _until(lambda: shared.ran == [("w1", "t1")])
    other.cancel()
    await asyncio.gather(other, return_exceptions=True)
    a.close()
    b.close()
