"""The turn queue's contract, on SQLite (the local host's workers) and PostgreSQL (the cluster's nodes).

A ``Cluster`` makes "nodes": queue instances on one shared backend, each with its own connection
(SQLite: one file, one ``worker_id`` each, woken by each other as the relay does; PostgreSQL: a
``hosts.cluster.ClusterNode`` each, its own pool and LISTEN connection, as on separate machines).
The shared tests use only what both queues have: ``enqueue``, ``run``/``drain`` and the inspection
methods (sync on SQLite, async on PostgreSQL). What only the cluster has (a node killed with
SIGKILL, fenced outcomes, a stop that hands its turns back, cut connections) is tested on
PostgreSQL below the shared tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.adapters.postgres.queue import HAND_BACK_S
from agentvm.records import TurnJob

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

FAST: dict[str, Any] = {"retry_delay_s": 0.01, "poll_interval_s": 0.05}
REPO = Path(__file__).resolve().parents[2]


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
        enqueuedAt=1_700_000_000_000,
    )


async def value(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result


class SqliteCluster:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.nodes: list[SqliteTurnQueue] = []

    async def node(self, **options: Any) -> Any:
        queue = SqliteTurnQueue(self.path, worker_id=f"w{len(self.nodes)}", **{**FAST, **options})
        self.nodes.append(queue)
        queue.on_change = lambda: [other.wake() for other in self.nodes if other is not queue]
        return queue

    async def close(self) -> None:
        for queue in self.nodes:
            queue.close()


class PostgresCluster:
    def __init__(self) -> None:
        from tests.postgres_server import shared_server

        self.server = shared_server()
        self.url = self.server.create_database()
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self.count = 0

    async def node(self, *, pool_max_size: int = 4, **options: Any) -> Any:
        from agentvm.hosts.cluster import ClusterNode

        node = await ClusterNode.start(
            self.url, node=f"n{self.count}", pool_max_size=pool_max_size, queue_options={**FAST, **options}
        )
        self.count += 1
        self._closers.append(node.aclose)
        return node.queue

    async def close(self) -> None:
        for close in reversed(self._closers):
            await close()
        self.server.drop_database(self.url)


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    made: Any = SqliteCluster(tmp_path / "queue.db") if request.param == "sqlite" else PostgresCluster()
    try:
        yield made
    finally:
        await made.close()


class Recorder:
    """A handler that records what ran and where, tracks overlap per session, fails on request."""

    def __init__(self, fail: dict[str, int] | None = None, hold_s: float = 0.0) -> None:
        self.fail = dict(fail or {})
        self.hold_s = hold_s
        self.calls: list[str] = []
        self.done: list[str] = []
        self.where: dict[str, str] = {}
        self.active = 0
        self.max_active = 0
        self.active_sessions: set[str] = set()
        self.overlaps = 0

    def on(self, node: str) -> Callable[[TurnJob], Awaitable[None]]:
        async def run(j: TurnJob) -> None:
            self.calls.append(j.turnId)
            if j.sessionId in self.active_sessions:
                self.overlaps += 1
            self.active_sessions.add(j.sessionId)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                await asyncio.sleep(self.hold_s)
                if self.fail.get(j.turnId, 0) > 0:
                    self.fail[j.turnId] -= 1
                    raise RuntimeError("secret user text")
                self.done.append(j.turnId)
                self.where[j.turnId] = node
            finally:
                self.active -= 1
                self.active_sessions.discard(j.sessionId)

        return run

    async def __call__(self, j: TurnJob) -> None:
        await self.on("n0")(j)


class Stubborn:
    """A turn that ignores its cancel (as code that swallows one does) until ``release`` is set."""

    def __init__(self) -> None:
        self.started, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self, j: TurnJob) -> None:
        self.started.set()
        while not self.release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await self.release.wait()


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


# A stop's own bounds: a query cut by the cancel (psycopg cancels it on the server, up to 5 + 5 s),
# the hand-back of running turns (HAND_BACK_S, 5 s), its row writes (5 s). Stops that took minutes
# or never ended (CI, 2026-11-28/29) were cancels lost in psycopg_pool on Python 3.11, now caught
# by ``Database.connection`` (test_a_consumer_cancelled_as_the_pool_hands_it_a_connection_ends).
STOP_BOUND_S = 30


async def stop(consumer: asyncio.Task[None]) -> None:
    """Cancel a consumer and see it end within its bounds."""
    consumer.cancel()
    await asyncio.wait([consumer], timeout=STOP_BOUND_S)
    assert consumer.cancelled()


async def test_turns_of_one_session_run_one_at_a_time_in_enqueue_order(cluster: Any) -> None:
    queue = await cluster.node()
    for i in range(5):
        await queue.enqueue(job(f"turn_{i}"))
    handler = Recorder(hold_s=0.01)

    async with asyncio.timeout(10):
        await queue.drain(handler)

    assert handler.done == [f"turn_{i}" for i in range(5)]
    assert handler.max_active == 1
    assert await value(queue.pending()) == []


async def test_the_same_job_key_enqueued_twice_runs_once(cluster: Any) -> None:
    queue = await cluster.node()
    await queue.enqueue(job("turn_1"))
    await queue.enqueue(job("turn_1"))
    assert await value(queue.pending()) == [job("turn_1")]
    assert await value(queue.has_job("turn_1"))
    handler = Recorder()

    async with asyncio.timeout(10):
        await queue.drain(handler)

    assert handler.calls == ["turn_1"]
    assert not await value(queue.has_job("turn_1"))


async def test_a_failed_turn_is_retried_in_its_place_and_dead_lettered_after_max_attempts(
    cluster: Any,
) -> None:
    queue = await cluster.node(max_attempts=3)
    await queue.enqueue(job("turn_1"))
    await queue.enqueue(job("turn_2"))
    await queue.enqueue(job("doomed", "ses_2"))
    await queue.enqueue(job("after_doomed", "ses_2"))
    handler = Recorder(fail={"turn_1": 2, "doomed": 99})

    async with asyncio.timeout(10):
        await queue.drain(handler)

    assert [t for t in handler.done if t.startswith("turn")] == ["turn_1", "turn_2"]  # its place kept
    assert handler.calls.count("doomed") == 3
    assert "after_doomed" in handler.done  # a dead turn no longer holds its session's line
    assert [j.turnId for j in await value(queue.dead())] == ["doomed"]
    assert await value(queue.dead_count()) == 1


async def test_a_tenant_is_held_to_its_share_and_a_newcomer_starts_at_the_next_free_slot(
    cluster: Any,
) -> None:
    queue = await cluster.node(max_concurrency=3, max_per_tenant=2)
    release = asyncio.Semaphore(0)
    started: list[str] = []

    async def handler(j: TurnJob) -> None:
        started.append(j.turnId)
        if j.tenantId == "flood":
            await release.acquire()

    for i in range(10):
        await queue.enqueue(job(f"flood_{i}", f"ses_f{i}", tenant_id="flood"))
    depth = await value(queue.depth_by_tenant())
    assert depth == {"flood": (10, 1_700_000_000_000)}
    consumer = asyncio.create_task(queue.run(handler))
    await until(lambda: len(started) == 2)
    await asyncio.sleep(0.2)
    assert len(started) == 2  # the flood holds two slots of three, never the third
    await queue.enqueue(job("other_1", "ses_o1", tenant_id="other"))  # behind all ten
    await until(lambda: "other_1" in started)
    assert started.index("other_1") == 2
    for _ in range(8):
        release.release()
    await until(lambda: len(started) == 11)
    await stop(consumer)


async def test_two_nodes_run_every_turn_once_and_keep_each_session_in_order(cluster: Any) -> None:
    a = await cluster.node(max_concurrency=2)
    b = await cluster.node(max_concurrency=2)
    shared = Recorder(hold_s=0.02)
    for s in range(5):
        for i in range(4):
            await (a if i % 2 else b).enqueue(job(f"t{s}_{i}", f"ses_{s}"))

    async with asyncio.timeout(20):
        await asyncio.gather(a.drain(shared.on("a")), b.drain(shared.on("b")))

    assert sorted(shared.calls) == sorted(f"t{s}_{i}" for s in range(5) for i in range(4))  # each once
    for s in range(5):
        assert [t for t in shared.done if t.startswith(f"t{s}_")] == [f"t{s}_{i}" for i in range(4)]
    assert shared.overlaps == 0
    assert set(shared.where.values()) == {"a", "b"}


async def test_an_enqueue_on_one_node_wakes_another_without_waiting_for_its_poll(cluster: Any) -> None:
    a = await cluster.node(poll_interval_s=30)
    b = await cluster.node(poll_interval_s=30)
    handled = asyncio.Event()

    async def handler(j: TurnJob) -> None:
        handled.set()

    consumer = asyncio.create_task(b.run(handler))
    await asyncio.sleep(0.3)  # b reaches its wait

    await a.enqueue(job("turn_1"))

    async with asyncio.timeout(2):
        await handled.wait()
    await stop(consumer)


# -- the cluster only ----------------------------------------------------------------------------

_NODE_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from agentvm.adapters.postgres.database import Database
    from agentvm.adapters.postgres.queue import PostgresTurnQueue

    async def main():
        database = Database(sys.argv[1], min_size=1, max_size=2)
        await database.open()
        queue = PostgresTurnQueue(database, node="doomed", lease_s=1.0, poll_interval_s=0.05)

        async def stuck(job):
            print("started", job.turnId, flush=True)
            await asyncio.sleep(3600)

        await queue.run(stuck)

    asyncio.run(main())
    """
)


@pytest.mark.postgres
async def test_the_turn_of_a_node_killed_mid_turn_runs_on_another_within_its_lease() -> None:
    cluster = PostgresCluster()
    try:
        survivor = await cluster.node(lease_s=1.0)
        await survivor.enqueue(job("turn_1"))
        env = {**os.environ, "PYTHONPATH": f"{REPO / 'shared'}{os.pathsep}{REPO}"}
        doomed = subprocess.Popen(
            [sys.executable, "-c", _NODE_SCRIPT, cluster.url], stdout=subprocess.PIPE, env=env, text=True
        )
        try:
            line = await asyncio.wait_for(asyncio.to_thread(doomed.stdout.readline), 20)  # type: ignore[union-attr]
            assert line.strip() == "started turn_1"
            doomed.send_signal(signal.SIGKILL)  # no hand-back, no more heartbeats
            doomed.wait(10)
        finally:
            if doomed.poll() is None:
                doomed.kill()
        shared = Recorder()
        loop = asyncio.get_running_loop()
        killed_at = loop.time()
        async with asyncio.timeout(10):
            await survivor.drain(shared.on("survivor"))
        assert shared.done == ["turn_1"]
        assert loop.time() - killed_at < 5  # lease 1 s, heartbeat every 0.25 s
    finally:
        await cluster.close()


@pytest.mark.postgres
async def test_a_stopped_node_hands_its_turns_back_at_once() -> None:
    cluster = PostgresCluster()
    try:
        a = await cluster.node(lease_s=60.0)
        b = await cluster.node(lease_s=60.0)
        started = asyncio.Event()

        async def stuck(j: TurnJob) -> None:
            started.set()
            await asyncio.sleep(3600)

        consumer = asyncio.create_task(a.run(stuck))
        await a.enqueue(job("turn_1"))
        await asyncio.wait_for(started.wait(), 5)
        await stop(consumer)  # SIGTERM's path: the lease (60 s) is not waited for
        shared = Recorder()
        async with asyncio.timeout(5):
            await b.drain(shared.on("b"))
        assert shared.done == ["turn_1"]
    finally:
        await cluster.close()


@pytest.mark.postgres
async def test_a_node_that_lost_its_lease_stops_its_turn_and_cannot_touch_the_new_claim() -> None:
    cluster = PostgresCluster()
    try:
        a = await cluster.node(lease_s=0.8)
        b = await cluster.node(lease_s=0.8)
        a_started, a_cancelled, b_running, b_release = (asyncio.Event() for _ in range(4))

        async def slow_a(j: TurnJob) -> None:
            a_started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                a_cancelled.set()
                raise

        async def on_b(j: TurnJob) -> None:
            b_running.set()
            await b_release.wait()

        await a.enqueue(job("turn_1"))
        consumer_a = asyncio.create_task(a.run(slow_a))
        await asyncio.wait_for(a_started.wait(), 5)
        # a partition: a's heartbeats stop reaching the database, its lease runs out, b takes over
        heartbeat = a._heartbeat

        async def partitioned() -> None:
            return None

        a._heartbeat = partitioned  # type: ignore[method-assign]
        consumer_b = asyncio.create_task(b.run(on_b))
        await asyncio.wait_for(b_running.wait(), 5)
        a._heartbeat = heartbeat  # type: ignore[method-assign]
        a._heartbeat_at = 0.0
        a.wake()
        await asyncio.wait_for(a_cancelled.wait(), 5)  # a learns at its next heartbeat
        await asyncio.sleep(0.2)
        assert await a.pending() == [job("turn_1")]  # a's stop did not delete or re-queue b's claim
        b_release.set()
        async with asyncio.timeout(5):
            while await b.pending():
                await asyncio.sleep(0.02)
        await stop(consumer_a)
        await stop(consumer_b)
    finally:
        await cluster.close()


@pytest.mark.postgres
async def test_a_node_whose_heartbeat_lapses_never_runs_the_same_turn_twice_at_once() -> None:
    # One node, and its heartbeat stalls past the lease (a long pause of the event loop): the row is
    # re-queued by the node's own expiry sweep. The node must not claim its own turn a second time
    # while the first attempt still runs; it cancels the first, then resumes it once.
    cluster = PostgresCluster()
    try:
        a = await cluster.node(lease_s=0.8)
        running = 0
        most = 0
        attempts = 0
        released = asyncio.Event()

        async def handler(j: TurnJob) -> None:
            nonlocal running, most, attempts
            running += 1
            attempts += 1
            most = max(most, running)
            try:
                if attempts == 1:
                    await asyncio.sleep(3600)
                await released.wait()
            finally:
                running -= 1

        heartbeat = a._heartbeat
        stalled = True

        async def lapsing() -> None:
            # renew nothing while stalled, but still sweep expired rows as any node does
            if not stalled:
                await heartbeat()
                return
            async with await psycopg.AsyncConnection.connect(cluster.url, autocommit=True) as conn:
                await conn.execute(
                    "UPDATE turn_jobs SET state = 'queued', owner = NULL, lease_until = NULL"
                    " WHERE state = 'running' AND lease_until < now()"
                )

        a._heartbeat = lapsing  # type: ignore[method-assign]
        await a.enqueue(job("turn_1"))
        consumer = asyncio.create_task(a.run(handler))
        await until(lambda: attempts == 1)
        await asyncio.sleep(2.0)  # past the lease, with passes every poll interval
        assert attempts == 1 and most == 1
        stalled = False
        a._heartbeat_at = 0.0
        a.wake()
        await until(lambda: attempts == 2)  # the first attempt cancelled, the turn resumed once
        released.set()
        async with asyncio.timeout(5):
            while await a.pending():
                await asyncio.sleep(0.02)
        assert most == 1
        await stop(consumer)
    finally:
        await cluster.close()


@pytest.mark.postgres
async def test_a_consumer_outlives_its_database_connections_being_cut() -> None:
    cluster = PostgresCluster()
    try:
        a = await cluster.node()
        handled: list[str] = []

        async def handler(j: TurnJob) -> None:
            handled.append(j.turnId)

        consumer = asyncio.create_task(a.run(handler))
        await asyncio.sleep(0.3)
        # every connection of the database is cut (a failover, a restart): pool and listener alike
        async with await psycopg.AsyncConnection.connect(cluster.url, autocommit=True) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        late = await cluster.node()  # another node, connected after the cut, enqueues

        await late.enqueue(job("turn_1"))

        await until(lambda: handled == ["turn_1"])
        assert not consumer.done()
        await stop(consumer)
    finally:
        await cluster.close()


@pytest.mark.postgres
async def test_a_consumer_cancelled_as_the_pool_hands_it_a_connection_ends() -> None:
    # psycopg_pool on Python 3.11 lost a cancel landing at the hand-over of a pooled connection: the
    # consumer went on consuming and a node's SIGTERM never ended it (adapters/postgres/database.py).
    cluster = PostgresCluster()
    try:
        a = await cluster.node(pool_max_size=1)
        handled: list[str] = []

        async def handler(j: TurnJob) -> None:
            handled.append(j.turnId)

        for _ in range(3):
            consumer = asyncio.create_task(a.run(handler))
            async with a._db.connection():  # the node's only connection: the consumer queues for it
                await asyncio.sleep(0.2)
            consumer.cancel()  # while the pool hands the connection over
            await asyncio.wait([consumer], timeout=STOP_BOUND_S)
            assert consumer.cancelled()
        await a.enqueue(job("turn_1"))  # the node still works
        async with asyncio.timeout(10):
            await a.drain(handler)
        assert handled == ["turn_1"]
    finally:
        await cluster.close()


@pytest.mark.postgres
async def test_a_turn_that_ignores_its_cancel_does_not_hold_up_the_stop() -> None:
    cluster, stubborn = PostgresCluster(), Stubborn()
    try:
        a = await cluster.node(lease_s=60.0)
        b = await cluster.node(lease_s=60.0)
        consumer = asyncio.create_task(a.run(stubborn))
        await a.enqueue(job("turn_1"))
        await asyncio.wait_for(stubborn.started.wait(), 5)
        loop = asyncio.get_running_loop()
        stopping_at = loop.time()
        await stop(consumer)
        assert loop.time() - stopping_at < HAND_BACK_S + 5  # the hand-back's bound, then the row
        shared = Recorder()
        async with asyncio.timeout(5):
            await b.drain(shared.on("b"))  # handed back: b runs it without waiting for the lease
        assert shared.done == ["turn_1"]
    finally:
        stubborn.release.set()
        await cluster.close()


async def test_a_sqlite_consumers_stop_is_bounded_by_a_turn_that_ignores_its_cancel(tmp_path: Path) -> None:
    from agentvm.adapters.local.sqlite.queue import STOP_WAIT_S

    queue = SqliteTurnQueue(tmp_path / "queue.db", worker_id="w0", **FAST)
    stubborn = Stubborn()
    try:
        await queue.enqueue(job("turn_1"))
        consumer = asyncio.create_task(queue.run(stubborn))
        await asyncio.wait_for(stubborn.started.wait(), 5)
        loop = asyncio.get_running_loop()
        stopping_at = loop.time()
        await stop(consumer)
        assert loop.time() - stopping_at < STOP_WAIT_S + 5
    finally:
        stubborn.release.set()
        queue.close()
