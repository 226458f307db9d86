"""A tool turn's added latency with MCP sessions kept across turns against a session per turn.

Turns on the local wiring (SQLite store in a temporary directory, the scripted model with no
delay): a turn with one call of an MCP server's ``echo`` tool, timed against a turn with no tool
call, interleaved, three kinds in turn:

- **no tool**: the baseline (one model call);
- **pooled**: ``ToolSources`` with the host's pool (``adapters/mcp/pool.py``), as ``avm serve``
  and cluster nodes run: the container's session is taken over (one ping) and called;
- **per turn**: no pool, as before (and as on AWS): the turn starts the server, initializes the
  session, calls, and closes it (a stdio server's process ends with the turn).

The tool list is cached with the image in both (listed during the warm-up), so the difference is
the session's start and end. Servers over stdio: ``@modelcontextprotocol/server-everything`` (Node,
from npm: ``tests/npm_tools.py``) and the test server on the official Python SDK
(``tests/mcp_servers/tools_server.py``).

Run: ``./dev python -m benchmarks.mcp_sessions [--runs 15]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.scripted import Calls, ScriptedModelClient, SingleModelResolver
from agentvm.adapters.mcp.client import SdkMcpConnector
from agentvm.adapters.mcp.pool import PooledMcpSessions
from agentvm.agent.tools.sources import ToolSources
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.worker import process_turn
from benchmarks.local_turns import create_session, sqlite_runtime, submit_turn

if TYPE_CHECKING:
    from agentvm.records import ImageRecord

ROOT = Path(__file__).resolve().parents[1]


def _servers() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """name -> (stdio config, arguments of its ``echo``)."""
    servers = {
        "Python SDK server (tools_server.py)": (
            {"command": sys.executable, "args": [str(ROOT / "tests" / "mcp_servers" / "tools_server.py")]},
            {"text": "hi"},
        )
    }
    from tests.npm_tools import SERVER_EVERYTHING, have_npm, installed

    if have_npm():
        launcher = installed(*SERVER_EVERYTHING)
        servers["server-everything 2026.8.31 (Node)"] = (
            {"command": str(launcher), "args": ["stdio"]},
            {"message": "hi"},
        )
    return servers


async def _turn(
    rt: Runtime, model: ScriptedModelClient, image: ImageRecord, arguments: dict[str, Any] | None, n: int
) -> float:
    if arguments is not None:
        model.add(Calls(("echo", arguments)))
    model.add("Done.")
    job = await submit_turn(rt, image, f"m{n}", "Echo it.")
    started = time.perf_counter()
    outcome = await process_turn(rt, job)
    elapsed = time.perf_counter() - started
    if outcome is None or outcome.error is not None:
        raise RuntimeError(f"turn {n} failed: {outcome}")
    return elapsed


async def run(runs: int = 15) -> list[dict[str, Any]]:
    rows = []
    for name, (config, arguments) in _servers().items():
        model = ScriptedModelClient()
        pool = PooledMcpSessions(SdkMcpConnector(connect_timeout_s=30))
        pooled = ToolSources(mcp=SdkMcpConnector(connect_timeout_s=30), mcp_pool=pool)
        per_turn = ToolSources(mcp=SdkMcpConnector(connect_timeout_s=30))
        turns = TurnSettings(flush_s=0.01, subscriber_refresh_s=0.0, history_window=50)
        with sqlite_runtime(SingleModelResolver(model), turns, per_turn) as rt:
            image = await create_session(rt, mcpServers={"srv": config}, maxSteps=10)
            times: dict[str, list[float]] = {"none": [], "pooled": [], "per_turn": []}
            n = 0
            try:
                for kind in ("pooled", "per_turn", "pooled"):  # warm-up: lists and caches the tools
                    rt.tools = pooled if kind == "pooled" else per_turn
                    n += 1
                    await _turn(rt, model, image, arguments, n)
                for _ in range(runs):  # interleaved, so drift hits all alike
                    for kind in ("none", "pooled", "per_turn"):
                        rt.tools = per_turn if kind == "per_turn" else pooled
                        n += 1
                        times[kind].append(
                            await _turn(rt, model, image, None if kind == "none" else arguments, n)
                        )
            finally:
                await pool.aclose()
        base = statistics.median(times["none"])
        rows.append(
            {
                "server": name,
                "runs": runs,
                "none_ms": base * 1000,
                "pooled_ms": statistics.median(times["pooled"]) * 1000,
                "per_turn_ms": statistics.median(times["per_turn"]) * 1000,
                "pooled_added_ms": (statistics.median(times["pooled"]) - base) * 1000,
                "per_turn_added_ms": (statistics.median(times["per_turn"]) - base) * 1000,
            }
        )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "## MCP sessions kept across turns against a session per turn (issue 29)\n",
        f"Command: `./dev python -m benchmarks.mcp_sessions --runs {rows[0]['runs'] if rows else 15}` "
        "(medians of interleaved turns; scripted model with no delay, SQLite on disk; one `echo` call "
        "of a stdio MCP server per tool turn, its tool list cached with the image).\n",
        "| server (stdio) | turn, no tool | tool turn, pooled session | tool turn, session per turn "
        "| added: pooled | added: per turn |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['server']} | {r['none_ms']:.1f} ms | {r['pooled_ms']:.1f} ms | {r['per_turn_ms']:.1f} ms "
            f"| **{r['pooled_added_ms']:.1f} ms** | **{r['per_turn_added_ms']:.1f} ms** |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="interleaved turns of each kind")
    args = parser.parse_args()
    print(render(asyncio.run(run(args.runs))))


if __name__ == "__main__":
    main()
