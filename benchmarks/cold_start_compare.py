"""Handler cold starts of this tree beside another revision's, measured in one run.

For each Lambda handler module: the import alone and the Lambda init (the import with the runtime
built), in fresh interpreters, as ``scripts/measure_imports.py`` measures them. The other revision
is checked out into a temporary worktree. The two trees are measured module by module, each in
turn, the first one alternating by round (``--rounds``), so a machine that gets busier or quieter
during the run weighs on both alike. Each cell is the median over the rounds of each round's
median of ``--runs`` interpreters (an empty interpreter subtracted).

Run: ``./dev python -m benchmarks.cold_start_compare --against ebc667f [--rounds 3] [--runs 5]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import measure_imports  # noqa: E402  (scripts/ is not a package)


def compare(against: str, rounds: int, runs: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="avm-cold-") as tmp:
        other = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(other), against], cwd=ROOT, check=True)
        try:
            samples: dict[tuple[str, str, str], list[float]] = {}
            trees = [("this", ROOT), ("other", other)]
            for round_ in range(rounds):
                for name in measure_imports.function_names():
                    # module by module, the trees in turn, the first one alternating by round
                    for label, root in trees if round_ % 2 == 0 else trees[::-1]:
                        for row in measure_imports.measure(runs, [name], root=root):
                            for field in ("import_ms", "lambda_init_ms"):
                                key = (str(row["module"]), label, field)
                                samples.setdefault(key, []).append(float(row[field]))  # type: ignore[arg-type]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=True)
    modules = list(dict.fromkeys(module for module, _, _ in samples))  # measure_imports' order
    return [
        {
            "module": module,
            **{
                f"{label}_{field}": round(statistics.median(samples[(module, label, field)]))
                for label in ("this", "other")
                for field in ("import_ms", "lambda_init_ms")
            },
        }
        for module in modules
    ]


def report(against: str, rounds: int, runs: int) -> str:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    rows = compare(against, rounds, runs)
    lines = [
        f"| module | import ms, {against} | import ms, {head} | Lambda init ms, {against} "
        f"| Lambda init ms, {head} |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| `{row['module']}` | {row['other_import_ms']} | {row['this_import_ms']} "
            f"| {row['other_lambda_init_ms']} | {row['this_lambda_init_ms']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", required=True, help="the revision to compare with (a commit or tag)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5, help="interpreters per module and round")
    args = parser.parse_args()
    print(report(args.against, args.rounds, args.runs))


if __name__ == "__main__":
    main()
