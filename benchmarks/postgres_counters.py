"""Counters on the cluster host's PostgreSQL: the per-request lease and the per-turn increment.

``PostgresCounters.lease`` runs on every authenticated request (``security/ratelimit.py``: the
key's requests this minute) and ``incr`` after every model call (token usage). Each write takes a
transaction-level advisory lock on its counter's key, so writers of ONE counter queue on it (the
hot key: one API key's rate window) while writers of different counters do not. An increment is
one pipelined round trip, a lease two. Measured on a throwaway local server
(``tests/postgres_server.py``: loopback TCP, fsync off, so the numbers are CPU and protocol, not
disk) or ``AVM_TEST_DATABASE_URL``'s:

* sequential leases and increments (median, p95);
* 48 tasks at once from 1 and from 3 nodes (each node its own pool, ``--pool``), on one hot
  counter and on 48 counters.

Run: ``./dev python -m benchmarks.postgres_counters [--writes 400] [--pool 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

EXPIRES = int(time.time()) + 86_400
TASKS = 48


def _latency(times: list[float]) -> str:
    times.sort()
    p95 = times[int(len(times) * 0.95) - 1]
    return f"{statistics.median(times) * 1000:.2f} ms (p95 {p95 * 1000:.2f})"


async def run(writes: int, pool: int) -> str:
    from agentvm.adapters.postgres.counters import PostgresCounters
    from agentvm.adapters.postgres.database import Database
    from tests.postgres_server import fresh_database, stop_shared_server

    lines = []
    try:
        async with fresh_database(max_size=pool) as first:
            others = [Database(first.url, min_size=1, max_size=pool) for _ in range(2)]
            await asyncio.gather(*(node.open() for node in others))
            nodes = [PostgresCounters(node) for node in (first, *others)]
            try:
                one = nodes[0]
                for i in range(50):
                    await one.incr(f"warm#{i}", {"n": 1}, expires_at=EXPIRES)
                for label, call in (
                    (
                        "lease (rate limit), sequential",
                        lambda i: one.lease("rate#k", "n", 1, limit=10**9, expires_at=EXPIRES),
                    ),
                    (
                        "incr (usage, 2 fields), sequential",
                        lambda i: one.incr("usage#k", {"month": 5, "d07": 5}, expires_at=EXPIRES),
                    ),
                ):
                    times = []
                    for i in range(writes):
                        started = time.perf_counter()
                        await call(i)
                        times.append(time.perf_counter() - started)
                    lines.append(f"| {label} | {_latency(times)} | {1 / statistics.median(times):,.0f} |")
                per_task = max(1, writes // TASKS)
                for count in (1, 3):
                    for keys in (1, TASKS):

                        async def task(n: int, count: int = count, keys: int = keys) -> Any:
                            node = nodes[n % count]
                            for _ in range(per_task):
                                await node.incr(f"c{count}k{keys}#{n % keys}", {"n": 1}, expires_at=EXPIRES)

                        started = time.perf_counter()
                        await asyncio.gather(*(task(n) for n in range(TASKS)))
                        elapsed = time.perf_counter() - started
                        where = "one hot counter" if keys == 1 else f"{keys} counters"
                        lines.append(
                            f"| incr, {TASKS} tasks on {count} node{'s' if count > 1 else ''}"
                            f" (pool {pool} each), {where} | | {TASKS * per_task / elapsed:,.0f} |"
                        )
            finally:
                await asyncio.gather(*(node.close() for node in others))
    finally:
        stop_shared_server()
    head = "| counter writes | latency | writes/s |\n|---|---|---|"
    return head + "\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=400)
    parser.add_argument("--pool", type=int, default=10)
    args = parser.parse_args()
    print(asyncio.run(run(args.writes, args.pool)))


if __name__ == "__main__":
    main()
