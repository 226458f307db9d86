"""A sandbox tool call's latency, and what it costs the event loop, this tree against another
revision side by side (issue 24: the safety must not be bought with seconds).

Each call is what a turn runs: ``SandboxTool.call`` on the local sandbox (bubblewrap where it
works), ``read``/``write``/``edit``/``ls`` and an ``sh`` job (``true``), with the change scans
around the mutating ones, on a workspace of ``--files`` files. While the calls run a ticker
measures the event loop's lag (how late a 5 ms sleep wakes): the old code walked the workspace
and opened files on the loop, the new code does both on threads of its own.

``--compare REV`` checks REV out into a temporary git worktree and runs the same measurement
there in a subprocess, alternating with this tree's, ``--runs`` times each; medians side by side.

Run: ``./dev python -m benchmarks.sandbox_calls [--files 2000] [--calls 50] [--runs 5] [--compare REV]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOOLS = ("read", "write", "edit", "ls", "sh")
BEFORE_HARDENING = "f60a78b"  # main before issue 24's file access, job lifecycle and limits


async def _measure(files: int, calls: int) -> dict[str, Any]:
    """One run in this process: per-tool call latency medians (ms) and the loop's worst lag (ms).
    Uses only what every revision since the sandbox landed has: ``LocalSandbox`` and
    ``SandboxTool``."""
    from agentvm.adapters.sandbox.process import LocalSandbox, bubblewrap
    from agentvm.agent.tools.sandbox import SPECS, SandboxTool
    from agentvm.ports import SandboxLimits

    with tempfile.TemporaryDirectory() as tmp:
        sandbox = LocalSandbox(Path(tmp) / "workspaces", isolate=bubblewrap() is not None)
        ws = sandbox.workspace("acme", "alice")
        for i in range(files):
            sub = ws / f"dir{i % 50}"
            sub.mkdir(exist_ok=True)
            (sub / f"f{i}.txt").write_text("hello\n")
        (ws / "note.txt").write_text("the quick brown fox\n")
        limits = SandboxLimits(wall_s=30, cpu_s=30, memory_mb=512, output_bytes=4096)
        tool = {name: SandboxTool(SPECS[name], sandbox, "acme", "alice", limits) for name in TOOLS}
        arguments = {
            "read": {"path": "note.txt"},
            "write": {"path": "out.txt", "content": "x" * 1000},
            "edit": {"path": "note.txt", "old": "quick", "new": "quick"},
            "ls": {"path": "dir1"},
            "sh": {"command": "true"},
        }
        lags: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                started = time.perf_counter()
                await asyncio.sleep(0.005)
                lags.append((time.perf_counter() - started - 0.005) * 1000)

        ticking = asyncio.create_task(ticker())
        took: dict[str, list[float]] = {name: [] for name in TOOLS}
        for _ in range(calls):
            for name in TOOLS:
                started = time.perf_counter()
                output = await tool[name].call(arguments[name])
                took[name].append((time.perf_counter() - started) * 1000)
                assert not output.is_error, output.text
        stop.set()
        await ticking
        return {
            "isolated": sandbox.isolated,
            **{f"{name} ms": statistics.median(values) for name, values in took.items()},
            "loop lag p99 ms": sorted(lags)[int(len(lags) * 0.99)] if lags else 0.0,
            "loop lag max ms": max(lags, default=0.0),
        }


def _run_in(tree: Path | None, files: int, calls: int) -> dict[str, Any]:
    """One measurement in a subprocess whose ``agentvm`` comes from ``tree``'s sources (None:
    this tree's)."""
    env = dict(os.environ)
    repo = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str((tree or repo) / "shared"), str(repo)])
    argv = [sys.executable, "-m", "benchmarks.sandbox_calls", "--measure", str(files), str(calls)]
    out = subprocess.run(argv, env=env, cwd=repo, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(rev: str | None, files: int, calls: int, runs: int) -> list[dict[str, Any]]:
    """Medians per tree: this one and, when ``rev`` is given, ``rev``'s, in alternating runs."""
    repo = Path(__file__).resolve().parent.parent
    trees: dict[str, Path | None] = {"this tree": None}
    worktree = None
    if rev is not None:
        worktree = Path(tempfile.mkdtemp(prefix="avm-bench-")) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), rev], cwd=repo, check=True)
        trees = {rev: worktree, "this tree": None}
    try:
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(runs):
            for name, tree in trees.items():
                results[name].append(_run_in(tree, files, calls))
    finally:
        if worktree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=repo, check=False)
    rows = []
    for name, measured in results.items():
        row: dict[str, Any] = {"code": name, "isolated": measured[0]["isolated"]}
        for key in measured[0]:
            if key.endswith("ms"):
                row[key] = round(statistics.median(m[key] for m in measured), 2)
        rows.append(row)
    return rows


def render(rows: list[dict[str, Any]], files: int, calls: int, runs: int, rev: str | None) -> str:
    lines = [
        "## Sandbox tool calls: latency and the event loop (issue 24)",
        "",
        f"`./dev python -m benchmarks.sandbox_calls --files {files} --calls {calls} --runs {runs}"
        + (f" --compare {rev}`" if rev else "`"),
        "",
        f"Each figure is the median over {runs} alternating runs of each tree's median over {calls} calls "
        f"(loop lag: each run's p99 and worst, how late a 5 ms sleep woke while the calls ran), on a "
        f"workspace of {files} files in 50 directories.",
        "",
    ]
    return "\n".join(lines) + "\n" + markdown_table(rows)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        print(json.dumps(asyncio.run(_measure(int(sys.argv[2]), int(sys.argv[3])))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", default=None, help="a git revision to measure side by side")
    args = parser.parse_args()
    rows = compare(args.compare, args.files, args.calls, args.runs)
    print(render(rows, args.files, args.calls, args.runs, args.compare))


if __name__ == "__main__":
    main()
