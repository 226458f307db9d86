"""The cluster's turn queue and cross-node fan-out on PostgreSQL (issue 28): throughput, latency,
round trips.

Queue: ``--jobs`` turn jobs over 100 sessions of 10 tenants are enqueued, then 1, 2 or 3 nodes
(each its own pool and listening connection, all in this one process: the machine has 2 cores and
PostgreSQL runs on them too) drain them with a handler that returns at once, so the figure is the
queue's own cost per turn: claim, outcome, heartbeats, wake-ups. Statements are counted at the
driver (every ``execute``), per turn, enqueue included; enqueue (3 statements) and a finished
turn's outcome (2) are pipelined, one round trip each, and a claim pass (3) serves many turns.

Fan-out: node A sends ``--frames`` frames one at a time (as a turn's sink does) to a socket on
node B; per frame, the time from A's ``send`` to B's socket write (p50/p99), for small frames
(~100 bytes, in the NOTIFY) and large ones (20 KB, through ``push_frames``).

PostgreSQL is the tests' throwaway server (Debian's, durability off: ``fsync=off``), or
``--database-url`` (a database the run may create tables in, via the packaged migrations).

Run: ``./dev python -m benchmarks.pg_queue_fanout [--jobs 2000 --frames 1000]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import psycopg

from agentvm.adapters.postgres.connections import PostgresConnections
from agentvm.adapters.postgres.database import Database
from agentvm.adapters.postgres.migrations import migrate
from agentvm.adapters.postgres.notifications import Notifications
from agentvm.adapters.postgres.push import PostgresPush
from agentvm.adapters.postgres.queue import PostgresTurnQueue
from agentvm.ports import ConnectionInfo
from agentvm.records import TurnJob

_statements = 0
_execute = psycopg.AsyncCursor.execute


async def _counted(self: Any, *args: Any, **kwargs: Any) -> Any:
    global _statements
    _statements += 1
    return await _execute(self, *args, **kwargs)


def _job(n: int) -> TurnJob:
    session = f"ses_{n % 100}"
    return TurnJob(
        turnId=f"turn_{n}",
        tenantId=f"tenant_{n % 10}",
        containerId="c",
        imageId="i",
        sessionId=session,
        agentId="a",
        userMessageId=f"m_{n}",
        requestId=f"r_{n}",
        enqueuedAt=n,
    )


async def _queue_run(url: str, nodes: int, jobs: int) -> dict[str, Any]:
    global _statements
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("TRUNCATE turn_jobs")
    dbs = [Database(url, min_size=2, max_size=4) for _ in range(nodes)]
    listeners = [Notifications(url) for _ in range(nodes)]
    queues = [
        PostgresTurnQueue(db, node=f"n{i}", notifications=listener, poll_interval_s=0.5)
        for i, (db, listener) in enumerate(zip(dbs, listeners, strict=True))
    ]
    for db, listener in zip(dbs, listeners, strict=True):
        await db.open()
        await listener.start()
    _statements = 0
    for n in range(jobs):
        await queues[n % nodes].enqueue(_job(n))
    done = 0

    async def handler(_job: TurnJob) -> None:
        nonlocal done
        done += 1

    started = time.perf_counter()
    await asyncio.gather(*(q.drain(handler) for q in queues))
    elapsed = time.perf_counter() - started
    trips = _statements
    for db, listener in zip(dbs, listeners, strict=True):
        await listener.aclose()
        await db.close()
    assert done == jobs, (done, jobs)
    return {
        "nodes": nodes,
        "jobs": jobs,
        "turns_per_s": round(jobs / elapsed),
        "statements_per_turn": round(trips / jobs, 1),
        "pool_max_per_node": 4,
    }


async def _fanout_run(url: str, frames: int, size: int) -> dict[str, Any]:
    nodes = []
    for name in ("node-a", "node-b"):
        db = Database(url, min_size=2, max_size=4)
        await db.open()
        listener = Notifications(url)
        connections = PostgresConnections(db, node=name)
        push = PostgresPush(db, connections, listener)
        await listener.start()
        await push.start()
        nodes.append((db, listener, push, connections))
    (_, _, push_a, _), (_, _, push_b, connections_b) = nodes
    arrived: dict[int, float] = {}

    async def write(payload: str) -> None:
        arrived[json.loads(payload)["seq"]] = time.perf_counter()

    await connections_b.register(ConnectionInfo("c-b", "t", 1))
    push_b.attach("c-b", write)
    pad = "x" * size
    sent: dict[int, float] = {}
    send_ms: list[float] = []
    for seq in range(frames):
        payload = json.dumps({"seq": seq, "text": pad})
        sent[seq] = time.perf_counter()
        await push_a.send("c-b", payload)
        send_ms.append((time.perf_counter() - sent[seq]) * 1000)
    async with asyncio.timeout(30):
        while len(arrived) < frames:
            await asyncio.sleep(0.005)
    for db, listener, push, _ in nodes:
        await push.aclose()
        await listener.aclose()
        await db.close()
    latency = sorted((arrived[s] - sent[s]) * 1000 for s in range(frames))
    assert sorted(arrived) == list(range(frames))
    return {
        "frame_bytes": len(json.dumps({"seq": 0, "text": pad})),
        "frames": frames,
        "send_ms_p50": round(statistics.median(send_ms), 3),
        "a_to_b_ms_p50": round(statistics.median(latency), 3),
        "a_to_b_ms_p99": round(latency[int(len(latency) * 0.99) - 1], 3),
    }


async def run(url: str, jobs: int, frames: int) -> dict[str, list[dict[str, Any]]]:
    database = Database(url, min_size=1, max_size=1)
    await database.open()
    await migrate(database)
    await database.close()
    psycopg.AsyncCursor.execute = _counted  # type: ignore[method-assign]  # counted for this run only
    try:
        queue = [await _queue_run(url, nodes, jobs) for nodes in (1, 2, 3)]
    finally:
        psycopg.AsyncCursor.execute = _execute  # type: ignore[method-assign]
    fanout = [await _fanout_run(url, frames, 100), await _fanout_run(url, max(50, frames // 10), 20_000)]
    return {"queue": queue, "fanout": fanout}


def _table(rows: list[dict[str, Any]]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[k]) for k in head) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def render(result: dict[str, list[dict[str, Any]]]) -> str:
    doc = (__doc__ or "").split("Run:")[0].split("\n", 1)[1].strip()
    return (
        "## Cluster queue and fan-out on PostgreSQL (issue 28)\n\n"
        + doc
        + "\n\nCommand: `./dev python -m benchmarks.pg_queue_fanout`.\n\n"
        + _table(result["queue"])
        + "\n"
        + _table(result["fanout"])
    )


def report(*, quick: bool = False) -> str:
    """The section for ``run_all``: a throwaway server of the tests' kind, or why it did not run."""
    from tests.postgres_server import PostgresServer, _bin_dir

    if _bin_dir() is None:
        return "## Cluster queue and fan-out on PostgreSQL (issue 28)\n\nNot run: no PostgreSQL here.\n"
    server = PostgresServer.start()
    try:
        url = server.create_database(migrated=False)
        result = asyncio.run(run(url, 500 if quick else 2000, 200 if quick else 1000))
    finally:
        server.stop()
    return render(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    server = None
    url = args.database_url
    if url is None:
        from tests.postgres_server import PostgresServer

        server = PostgresServer.start()
        url = server.create_database(migrated=False)
    try:
        result = asyncio.run(run(url, args.jobs, args.frames))
    finally:
        if server is not None:
            server.stop()
    print(render(result))


if __name__ == "__main__":
    main()
