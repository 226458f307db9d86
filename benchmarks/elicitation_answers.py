"""How long an MCP server's question takes to hear its answer when the answer reaches another
process (``agent/tools/elicitation.py``, docs/mcp.md "Elicitation"): from the answering process's
``answer`` returning to the waiting process's ``wait`` returning, per host's store.

* in process: one desk, no store (one ``avm serve``);
* SQLite: two desks on one file, each its own connection (two workers), the waiting one reading
  every 0.25 s (``DEFAULT_POLL_S``);
* PostgreSQL: two ``ClusterNode``s on a throwaway local server (``tests/postgres_server.py``), the
  answer's NOTIFY waking the waiting node (its backstop read every 2 s).

Run: ``./dev python -m benchmarks.elicitation_answers [--questions 40]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentvm.agent.tools.elicitation import ElicitationDesk
from agentvm.ports import ElicitationAnswer, ElicitationOwner, ElicitationRequest

OWNER = ElicitationOwner("acme", "alice", "sess_1", "turn_1")
FORM = ElicitationRequest("Who?", schema={"type": "object", "properties": {"name": {"type": "string"}}})


async def _latencies(holding: ElicitationDesk, answering: ElicitationDesk, questions: int) -> list[float]:
    out = []
    for i in range(questions):
        pending = await holding.open(
            OWNER, f"call_{i}", "ask", FORM, deadline_at=int(time.time() * 1000) + 60_000
        )
        assert pending is not None
        done: dict[str, float] = {}

        async def wait(eid: str = pending.elicitation_id, done: dict[str, float] = done) -> None:
            await holding.wait(eid, 30)
            done["at"] = time.perf_counter()

        waiting = asyncio.create_task(wait())
        await asyncio.sleep(0.05 + (i % 7) * 0.037)  # answers land anywhere in the poll's period
        assert await answering.answer("acme", pending.elicitation_id, ElicitationAnswer("decline"))
        answered = time.perf_counter()
        await waiting
        out.append(done["at"] - answered)
    return out


def _row(name: str, times: list[float]) -> str:
    times.sort()
    p95 = times[int(len(times) * 0.95) - 1]
    median, worst = statistics.median(times), times[-1]
    return f"| {name} | {median * 1000:.1f} ms | {p95 * 1000:.1f} ms | {worst * 1000:.1f} ms |"


async def run(questions: int) -> str:
    rows = ["| answer reaches the call | median | p95 | max |", "|---|---|---|---|"]
    one = ElicitationDesk()
    rows.append(_row("in process (one avm serve)", await _latencies(one, one, questions)))

    from agentvm.adapters.local.sqlite.elicitations import SqliteElicitations

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agentvm.db"
        a, b = (
            ElicitationDesk(store=SqliteElicitations(path)),
            ElicitationDesk(store=SqliteElicitations(path)),
        )
        rows.append(_row("SQLite, another worker (poll 0.25 s)", await _latencies(a, b, questions)))

    from agentvm.hosts.cluster import ClusterNode
    from agentvm.hosts.cluster_server import cluster_elicitations
    from tests.postgres_server import shared_server, stop_shared_server

    try:
        server = shared_server()
        url = server.create_database()
        nodes: list[Any] = [await ClusterNode.start(url, node=n, pool_max_size=4) for n in ("a", "b")]
        try:
            from agentvm.config import Settings

            desks = [cluster_elicitations(Settings(), n) for n in nodes]
            rows.append(
                _row("PostgreSQL, another node (NOTIFY)", await _latencies(desks[0], desks[1], questions))
            )
        finally:
            for n in nodes:
                await n.aclose()
            server.drop_database(url)
    finally:
        stop_shared_server()
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=40)
    args = parser.parse_args()
    print(asyncio.run(run(args.questions)))


if __name__ == "__main__":
    main()
