"""``SqliteTurnQueue``: durable enqueue, per-session FIFO, concurrency, retries, dead letters, recovery."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest

from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.records import TurnJob

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

FAST = {"retry_delay_s": 0.01, "poll_interval_s": 0.05}


def job(turn_id: str, session_id: str = "ses_1", tenant_id: str = "tenant-a") -> TurnJob:
    return TurnJob(
        turnId=turn_id,
        tenantId=tenant_id,
        containerId="user-alice",
        imageId=f"img_{session_id}",
        sessionId=session_id,
        agentId="agt_1",
        userMessageId=f"msg_{turn_id}",
        requestId=f"req_{turn_id}",
        enqueuedAt=1,
    )


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[SqliteTurnQueue]:
    q = SqliteTurnQueue(tmp_path / "queue.db", max_attempts=3, **FAST)
    yield q
    q.close()


class Recorder:
    """A handler that records what ran, tracks overlap, and fails the turns told to fail."""

    def __init__(self, fail: dict[str, int] | None = None, hold_s: float = 0.0) -> None:
        self.fail = dict(fail or {})  # turn id -> how many more times to fail
        self.hold_s = hold_s
        self.calls: list[str] = []
        self.done: list[str] = []
        self.active = 0
        self.max_active = 0

    async def __call__(self, job: TurnJob) -> None:
        self.calls.append(job.turnId)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.hold_s)
            if self.fail.get(job.turnId, 0) > 0:
                self.fail[job.turnId] -= 1
                raise RuntimeError("secret user text")
            self.done.append(job.turnId)
        finally:
            self.active -= 1


async def drain(queue: SqliteTurnQueue, handler: Callable[[TurnJob], Awaitable[None]]) -> None:
    async with asyncio.timeout(5):
        await queue.drain(handler)


async def stop(consumer: asyncio.Task[None]) -> None:
    """Cancel a ``run`` task and check that it really ended (a swallowed cancel would hang it)."""
    consumer.cancel()
    await asyncio.wait([consumer], timeout=5)
    assert consumer.cancelled()


async def test_jobs_of_one_session_run_one_at_a_time_in_enqueue_order(queue: SqliteTurnQueue) -> None:
    for i in range(5):
        await queue.enqueue(job(f"turn_{i}"))
    handler = Recorder(hold_s=0.01)

    await drain(queue, handler)

    assert handler.done == [f"turn_{i}" for i in range(5)]
    assert handler.max_active == 1
    assert queue.pending() == []


async def test_jobs_of_different_sessions_run_concurrently(queue: SqliteTurnQueue) -> None:
    started = {"ses_1": asyncio.Event(), "ses_2": asyncio.Event()}

    async def handler(j: TurnJob) -> None:
        # Each handler waits for the other to have started: this only finishes if they overlap.
        started[j.sessionId].set()
        other = "ses_2" if j.sessionId == "ses_1" else "ses_1"
        await asyncio.wait_for(started[other].wait(), 2)

    await queue.enqueue(job("turn_1", "ses_1"))
    await queue.enqueue(job("turn_2", "ses_2"))

    await drain(queue, handler)

    assert queue.pending() == []
    assert queue.dead() == []


async def test_max_concurrency_bounds_the_running_handlers(tmp_path: Path) -> None:
    queue = SqliteTurnQueue(tmp_path / "queue.db", max_concurrency=2, **FAST)
    for i in range(6):
        await queue.enqueue(job(f"turn_{i}", f"ses_{i}"))
    handler = Recorder(hold_s=0.02)

    await drain(queue, handler)

    assert sorted(handler.done) == [f"turn_{i}" for i in range(6)]
    assert handler.max_active == 2
    queue.close()


async def test_one_tenant_never_holds_more_than_its_share_of_the_slots(tmp_path: Path) -> None:
    queue = SqliteTurnQueue(tmp_path / "queue.db", max_concurrency=4, max_per_tenant=2, **FAST)
    for i in range(6):
        await queue.enqueue(job(f"turn_{i}", f"ses_{i}", tenant_id="flood"))
    handler = Recorder(hold_s=0.02)

    await drain(queue, handler)

    assert sorted(handler.done) == [f"turn_{i}" for i in range(6)]
    assert handler.max_active == 2


async def test_a_newcomer_tenant_starts_at_the_next_free_slot_ahead_of_a_flood(tmp_path: Path) -> None:
    queue = SqliteTurnQueue(tmp_path / "queue.db", max_concurrency=3, max_per_tenant=3, **FAST)
    release = asyncio.Semaphore(0)  # each release lets one flood turn finish
    started: list[str] = []

    async def handler(j: TurnJob) -> None:
        started.append(j.turnId)
        if j.tenantId == "flood":
            await release.acquire()

    for i in range(10):  # the flood fills every slot and queues 7 more turns
        await queue.enqueue(job(f"flood_{i}", f"ses_f{i}", tenant_id="flood"))
    consumer = asyncio.create_task(queue.run(handler))
    while len(started) < 3:
        await asyncio.sleep(0.01)
    await queue.enqueue(job("other_1", "ses_o1", tenant_id="other"))  # enqueued behind all 10

    release.release()  # the first slot that frees goes to the tenant with no running turn
    while len(started) < 4:
        await asyncio.sleep(0.01)
    for _ in range(7):
        release.release()
    await stop(consumer)

    assert started[3] == "other_1"
    queue.close()


async def test_enqueue_of_the_same_turn_id_twice_is_ignored(queue: SqliteTurnQueue) -> None:
    await queue.enqueue(job("turn_1"))
    await queue.enqueue(job("turn_1"))
    handler = Recorder()

    assert queue.pending() == [job("turn_1")]
    await drain(queue, handler)

    assert handler.calls == ["turn_1"]


async def test_pending_lists_queued_jobs_oldest_first(queue: SqliteTurnQueue) -> None:
    await queue.enqueue(job("turn_b", "ses_2"))
    await queue.enqueue(job("turn_a", "ses_1"))
    await queue.enqueue(job("turn_c", "ses_2"))

    assert [j.turnId for j in queue.pending()] == ["turn_b", "turn_a", "turn_c"]


async def test_drain_of_an_empty_queue_returns_at_once(queue: SqliteTurnQueue) -> None:
    handler = Recorder()

    async with asyncio.timeout(0.5):
        await queue.drain(handler)

    assert handler.calls == []


async def test_enqueue_wakes_a_running_consumer_without_waiting_for_the_poll(tmp_path: Path) -> None:
    queue = SqliteTurnQueue(tmp_path / "queue.db", poll_interval_s=30)
    handled = asyncio.Event()

    async def handler(j: TurnJob) -> None:
        handled.set()

    consumer = asyncio.create_task(queue.run(handler))
    await asyncio.sleep(0.01)  # let the consumer reach its wait

    await queue.enqueue(job("turn_1"))

    async with asyncio.timeout(1):
        await handled.wait()
    await stop(consumer)
    queue.close()


async def test_a_failed_job_is_retried_until_it_succeeds(queue: SqliteTurnQueue) -> None:
    await queue.enqueue(job("turn_1"))
    handler = Recorder(fail={"turn_1": 2})

    await drain(queue, handler)

    assert handler.calls == ["turn_1", "turn_1", "turn_1"]
    assert handler.done == ["turn_1"]
    assert queue.pending() == []
    assert queue.dead() == []


async def test_a_job_failing_max_attempts_times_moves_to_dead_letters_and_is_logged(
    queue: SqliteTurnQueue, caplog: pytest.LogCaptureFixture
) -> None:
    await queue.enqueue(job("turn_1"))
    handler = Recorder(fail={"turn_1": 99})

    with caplog.at_level(logging.WARNING, logger="agentvm.queue"):
        await drain(queue, handler)

    assert handler.calls == ["turn_1"] * 3
    assert queue.dead() == [job("turn_1")]
    assert queue.pending() == []
    errors = [r for r in caplog.records if r.name == "agentvm.queue" and r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "turn_1" in errors[0].getMessage()
    assert all("secret user text" not in r.getMessage() and r.exc_info is None for r in caplog.records)


async def test_a_retried_job_keeps_its_place_ahead_of_later_jobs_of_its_session(
    queue: SqliteTurnQueue,
) -> None:
    await queue.enqueue(job("turn_1"))
    await queue.enqueue(job("turn_2"))
    handler = Recorder(fail={"turn_1": 1})

    await drain(queue, handler)

    assert handler.calls == ["turn_1", "turn_1", "turn_2"]


async def test_a_dead_job_no_longer_blocks_its_session(queue: SqliteTurnQueue) -> None:
    await queue.enqueue(job("turn_1"))
    await queue.enqueue(job("turn_2"))
    handler = Recorder(fail={"turn_1": 99})

    await drain(queue, handler)

    assert handler.calls == ["turn_1"] * 3 + ["turn_2"]
    assert handler.done == ["turn_2"]


async def test_a_job_waiting_for_its_retry_does_not_hold_up_other_sessions(tmp_path: Path) -> None:
    queue = SqliteTurnQueue(tmp_path / "queue.db", retry_delay_s=0.5, poll_interval_s=0.05)
    await queue.enqueue(job("turn_1", "ses_1"))
    handler = Recorder(fail={"turn_1": 1})
    consumer = asyncio.create_task(queue.drain(handler))
    await asyncio.sleep(0.05)  # turn_1 has failed once and waits 0.5 s

    await queue.enqueue(job("turn_2", "ses_2"))
    await asyncio.sleep(0.1)

    assert handler.done == ["turn_2"]
    async with asyncio.timeout(5):
        await consumer
    assert handler.done == ["turn_2", "turn_1"]
    queue.close()


async def test_a_queued_job_survives_a_crash_and_runs_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    crashed = SqliteTurnQueue(path, **FAST)
    await crashed.enqueue(job("turn_1"))
    crashed.close()  # the process dies before any consumer ran
    handled = asyncio.Event()

    async def handler(j: TurnJob) -> None:
        handled.set()

    reopened = SqliteTurnQueue(path, **FAST)
    consumer = asyncio.create_task(reopened.run(handler))
    async with asyncio.timeout(5):
        await handled.wait()
    await stop(consumer)

    assert reopened.pending() == []
    reopened.close()


async def test_a_job_cut_off_by_cancelling_run_is_run_again_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    first = SqliteTurnQueue(path, **FAST)
    await first.enqueue(job("turn_1"))
    started = asyncio.Event()
    cut_off = asyncio.Event()

    async def blocking_handler(j: TurnJob) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cut_off.set()
            raise

    consumer = asyncio.create_task(first.run(blocking_handler))
    async with asyncio.timeout(5):
        await started.wait()
    await stop(consumer)

    assert cut_off.is_set()  # the in-flight handler was cancelled too
    assert first.pending() == [job("turn_1")]
    assert first.dead() == []
    first.close()

    reopened = SqliteTurnQueue(path, **FAST)
    handler = Recorder()
    await drain(reopened, handler)

    assert handler.done == ["turn_1"]
    assert reopened.pending() == []
    reopened.close()


async def test_a_queue_accepts_only_one_consumer_at_a_time(queue: SqliteTurnQueue) -> None:
    consumer = asyncio.create_task(queue.run(Recorder()))
    await asyncio.sleep(0.01)

    with pytest.raises(RuntimeError):
        await queue.drain(Recorder())

    await stop(consumer)
