"""Real turns on 1, 2 and 3 ``avm serve --database-url`` nodes sharing one PostgreSQL (issue 28).

Each node is a real ``avm serve`` process (open mode, the echo model, its own pool and listening
connection) on one database of a throwaway PostgreSQL (``tests/postgres_server.py``: Debian's
PostgreSQL, ``fsync=off``). ``--clients`` WebSocket clients (the SDK's ``AgentVMClient``, as users
connect) are spread round-robin over the nodes; each creates an image and runs turns back to back
for ``--seconds``. The total number of clients is the same at every node count, so the rows compare
the same offered load. Measured per row:

- turns_per_s: completed turns over the load's wall time.
- first_delta_ms p50/p95: from sending ``message_send`` to the first ``text_delta`` received (the
  gateway, the queue's enqueue and claim, the turn's set-up, the echo model's first word delay
  ``AVM_ECHO_DELAY_MS`` and the fan-out to the client's node).
- pg_xacts_per_turn: PostgreSQL transactions (``pg_stat_database.xact_commit + xact_rollback`` of
  the cluster's database) during the load, minus the nodes' idle rate (heartbeats, gauge snapshots,
  measured for a few seconds before the load) times the load's duration, over the turns. Statements
  run in autocommit or pipelined in one transaction, so a transaction is one round trip or a few
  pipelined statements: this is the round trips' order of magnitude, not a statement count
  (``pg_stat_statements`` is not loaded on the test server).
- nodes_cpu_ms_per_turn and pg_backend_cpu_ms_per_turn: CPU time during the load (user + system,
  from ``/proc``) of the node processes, and of the PostgreSQL server processes connected to the
  database (its backends: the WAL writer and checkpointer are not counted), over the turns.
- db_bytes_per_turn: the database's growth (``pg_database_size``: tables, indexes, TOAST; not the
  WAL) over the turns: messages, usage records, the turn's stored frames, the queue's rows.
- pool_max_per_node: the configured ``AVM_DATABASE_POOL_MAX_SIZE``; backends_peak: the most server
  connections to the database seen (sampled every 0.2 s), every node's pool plus its listener.

All of it shares the machine's 2 cores: the nodes, PostgreSQL and this load generator. More nodes
add processes competing for the same two cores, not CPU, so the rows show the cost of spreading
over nodes (the fan-out, the shared queue) rather than scaling.

Run: ``./dev python -m benchmarks.cluster_turns [--clients 12] [--seconds 20] [--nodes 1 2 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from agentvm.client import AgentVMClient
from benchmarks.procs import avm_serve, raise_fd_limit

if TYPE_CHECKING:
    from collections.abc import Iterator

    from benchmarks.procs import Proc

CLK_TCK = os.sysconf("SC_CLK_TCK")
POOL_MAX = 10  # the default AVM_DATABASE_POOL_MAX_SIZE
ECHO_DELAY_MS = 10
MESSAGE = " ".join(f"w{i}" for i in range(20))  # the echo reply: ~21 words, ~210 ms at 10 ms a word


@contextlib.contextmanager
def cluster(url: str, nodes: int, root: Path) -> Iterator[list[Proc]]:
    from tests.postgres_server import as_url

    with contextlib.ExitStack() as stack:
        procs = [
            stack.enter_context(
                avm_serve(
                    root / f"node-{i}",
                    {
                        "AVM_DATABASE_URL": as_url(url),
                        "AVM_NODE_ID": f"node-{i}",
                        "AVM_ECHO_DELAY_MS": str(ECHO_DELAY_MS),
                        "AVM_DATABASE_POOL_MAX_SIZE": str(POOL_MAX),
                    },
                )
            )
            for i in range(nodes)
        ]
        yield procs


def _xacts(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def _database_bytes(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def _backend_cpu_s(url: str) -> dict[int, float]:
    """CPU seconds used so far by each server process connected to the cluster's database."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()").fetchall()
    out: dict[int, float] = {}
    for (pid,) in rows:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[int(pid)] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def _settled_xacts(url: str) -> int:
    """The transaction count once backends have flushed their statistics (at most every second)."""
    time.sleep(1.2)
    return _xacts(url)


async def _backends_peak(url: str, stop: asyncio.Event) -> int:
    peak = 0
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
            row = await cur.fetchone()
            peak = max(peak, int(row[0]) if row else 0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)
    return peak


async def _client(ws: str, idx: int, until: float, first_ms: list[float], done: list[int]) -> None:
    async with AgentVMClient.connect(ws) as client:
        image = await client.request("image_create", containerId=f"u{idx}", config={"name": "b"}, check=True)
        image_id = image["record"]["imageId"]
        while time.monotonic() < until:
            sent = time.monotonic()
            await client.request("message_send", imageId=image_id, content=MESSAGE, check=True)
            first = True
            async for frame in client.turn_events(timeout=60):
                if frame["type"] == "text_delta" and first:
                    first_ms.append((time.monotonic() - sent) * 1000)
                    first = False
                elif frame["type"] == "conversation_end":
                    done[0] += 1


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


async def _load(url: str, procs: list[Proc], clients: int, seconds: float) -> dict[str, Any]:
    first_ms: list[float] = []
    done = [0]
    stop = asyncio.Event()
    sampler = asyncio.create_task(_backends_peak(url, stop))
    start = time.monotonic()
    until = start + seconds
    await asyncio.gather(
        *(_client(procs[i % len(procs)].url, i, until, first_ms, done) for i in range(clients))
    )
    elapsed = time.monotonic() - start
    stop.set()
    return {"turns": done[0], "elapsed_s": elapsed, "first_ms": first_ms, "backends_peak": await sampler}


def measure(url: str, nodes: int, clients: int, seconds: float, root: Path) -> dict[str, Any]:
    with cluster(url, nodes, root / f"n{nodes}") as procs:
        idle_s = 4.0
        before_idle = _settled_xacts(url)
        time.sleep(idle_s)
        before = _settled_xacts(url)
        idle_rate = (before - before_idle) / (idle_s + 1.2)
        bytes_before = _database_bytes(url)
        nodes_cpu_before = sum(p.cpu_seconds() for p in procs)
        pg_cpu_before = _backend_cpu_s(url)
        load = asyncio.run(_load(url, procs, clients, seconds))
        pg_cpu = sum(s - pg_cpu_before.get(pid, 0.0) for pid, s in _backend_cpu_s(url).items())
        cpu_s = sum(p.cpu_seconds() for p in procs) - nodes_cpu_before
        after = _settled_xacts(url)
        grown = _database_bytes(url) - bytes_before
    turns = load["turns"]
    load_xacts = (after - before) - idle_rate * (load["elapsed_s"] + 1.2)
    return {
        "nodes": nodes,
        "clients": clients,
        "turns": turns,
        "turns_per_s": round(turns / load["elapsed_s"], 1),
        "first_delta_ms_p50": round(statistics.median(load["first_ms"]), 1) if load["first_ms"] else None,
        "first_delta_ms_p95": round(_pct(load["first_ms"], 0.95), 1),
        "pg_xacts_per_turn": round(load_xacts / turns, 1) if turns else None,
        "idle_xacts_per_s": round(idle_rate, 1),
        "nodes_cpu_ms_per_turn": round(cpu_s * 1000 / turns, 1) if turns else None,
        "pg_backend_cpu_ms_per_turn": round(pg_cpu * 1000 / turns, 1) if turns else None,
        "db_bytes_per_turn": round(grown / turns) if turns else None,
        "pool_max_per_node": POOL_MAX,
        "backends_peak": load["backends_peak"],
    }


def _table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    from tests.postgres_server import shared_server, stop_shared_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    raise_fd_limit()
    server = shared_server()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.nodes:
                url = server.create_database()
                try:
                    rows.append(measure(url, n, args.clients, args.seconds, Path(tmp)))
                finally:
                    server.drop_database(url)
    finally:
        stop_shared_server()
    print(json.dumps(rows, indent=2) if args.json else _table(rows))


if __name__ == "__main__":
    main()
