"""What the price library costs at import, and that the turn path never pays it.

    ./dev python -m benchmarks.pricing_import [--runs 7] [TREE ...]

For each source tree (default: this one), in fresh interpreters: the import time of the turn worker,
the HTTP API and the usage routes (median of ``--runs``); whether ``genai_prices`` is loaded after the
import plus a turn's dashboard estimate (``estimated_cost_usd``, the only pricing on the turn path);
and the first price looked up (the lazy import of the library's bundled data). Pass the tree of an
older commit (``git worktree add /tmp/before <commit>``) to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

MODULES = ("functions.turn_worker.app", "functions.http_api.app", "agentvm.api.usage")
_PROBE = r"""
import importlib, json, sys, time
t = time.perf_counter(); importlib.import_module(sys.argv[1]); imported = time.perf_counter() - t
from agentvm.observability.metrics import estimated_cost_usd
estimated_cost_usd("anthropic/claude-haiku-4-5-20251001", 1000, 100)
on_turn_path = "genai_prices" in sys.modules
t = time.perf_counter()
from agentvm.observability import pricing
if hasattr(pricing, "library_price"):
    pricing.library_price("anthropic/claude-haiku-4-5")
first = time.perf_counter() - t
print(json.dumps([imported * 1000, on_turn_path, first * 1000]))
"""


def measure(tree: Path, module: str, runs: int) -> tuple[float, bool, float]:
    env = {"PYTHONPATH": f"{tree}/shared:{tree}", "PATH": "/usr/bin:/bin"}
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, module],
            env=env,
            cwd=tree,
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(json.loads(done.stdout))
    return (
        statistics.median(r[0] for r in out),
        any(r[1] for r in out),
        statistics.median(r[2] for r in out),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trees", nargs="*", type=Path, default=[Path(__file__).resolve().parents[1]])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print("| tree | module | import ms | genai_prices on the turn path | first price ms |")
    print("|---|---|---:|---|---:|")
    for tree in args.trees:
        for module in MODULES:
            imported, loaded, first = measure(tree, module, args.runs)
            print(f"| {tree} | `{module}` | {imported:.0f} | {'yes' if loaded else 'no'} | {first:.0f} |")


if __name__ == "__main__":
    main()
