"""Message appends on the cluster host's PostgreSQL store: latency, throughput, round trips.

``PostgresStore.append_message`` is the write every turn makes at least twice (the user message,
the reply). It is one transaction: BEGIN, the session's advisory lock, the insert at the next seq,
COMMIT (4 round trips). Measured on a throwaway local server (``tests/postgres_server.py``: loopback
TCP, fsync off, so the numbers are CPU and protocol, not disk) or ``AVM_TEST_DATABASE_URL``'s:

* sequential appends to one session, each with an idempotency key (median, p95);
* appends from 32 tasks to 32 sessions at once through one node's pool (``--pool``, default 10);
* 32 tasks appending to ONE session (they queue on its lock: the per-session ordering's cost).

Run: ``./dev python -m benchmarks.postgres_appends [--appends 500] [--pool 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from agentvm.messages import UserMessage

MESSAGE = UserMessage(id="m", timestamp=1, content="hello " * 150)  # ~1 KB of JSON


async def run(appends: int, pool: int) -> str:
    from agentvm.adapters.postgres.store import PostgresStore
    from tests.postgres_server import fresh_database, stop_shared_server

    lines = []
    try:
        async with fresh_database(max_size=pool) as database:
            store = PostgresStore(database)
            for _ in range(50):
                await store.append_message("warm-up", MESSAGE)
            times = []
            for i in range(appends):
                started = time.perf_counter()
                await store.append_message("ses_sequential", MESSAGE, idempotency_key=f"k{i}")
                times.append(time.perf_counter() - started)
            times.sort()
            p95 = times[int(len(times) * 0.95) - 1]
            lines.append(
                f"| sequential, one session | {statistics.median(times) * 1000:.2f} ms (p95 {p95 * 1000:.2f})"
                f" | {1 / statistics.median(times):,.0f} |"
            )
            for label, sessions in (("32 tasks, 32 sessions", 32), ("32 tasks, one session", 1)):
                per_task = max(1, appends // 32)

                prefix = f"ses_{sessions}_"

                async def task(
                    n: int, prefix: str = prefix, sessions: int = sessions, per_task: int = per_task
                ) -> None:
                    for _ in range(per_task):
                        await store.append_message(f"{prefix}{n % sessions}", MESSAGE)

                started = time.perf_counter()
                await asyncio.gather(*(task(n) for n in range(32)))
                elapsed = time.perf_counter() - started
                lines.append(f"| {label} (pool {pool}) | | {32 * per_task / elapsed:,.0f} |")
    finally:
        stop_shared_server()
    head = "| appends | latency | appends/s |\n|---|---|---|"
    return head + "\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--pool", type=int, default=10)
    args = parser.parse_args()
    print(asyncio.run(run(args.appends, args.pool)))


if __name__ == "__main__":
    main()
