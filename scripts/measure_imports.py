"""Cold-start weight of each Lambda handler module, measured in fresh interpreters.

For every ``functions.<name>.app`` it times, in a new process each run:

* ``import``: the module alone, as tests and tools import it (the runtime is not built);
* ``lambda init``: the same import inside a Lambda environment (``AWS_LAMBDA_FUNCTION_NAME`` set),
  where ``LambdaEntry`` also builds the runtime: Settings, the adapters, boto3/pynamodb clients
  (no network I/O). This is the work of Lambda's init phase, before the first event.

Each figure is a median of ``--runs`` runs minus the median of an empty interpreter (``python -c
pass``). Each subprocess gets the environment variables template.yaml gives that function, with
dummy values, a region, and no AWS credentials or config files, so nothing can reach AWS.

    .venv/bin/python scripts/measure_imports.py            # the table in docs/cold-start.md
    .venv/bin/python scripts/measure_imports.py --top 12   # plus where the import time goes
    .venv/bin/python scripts/measure_imports.py --json     # the rows as JSON (benchmarks/cold_start.py)

Exits 1 when an import misses its target. Timings depend on the machine: compare modules with
each other and with the targets measured here, not with Lambda's numbers.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

ROOT = Path(__file__).resolve().parents[1]
# module -> import-time target in ms on a developer machine (docs/cold-start.md)
TARGETS = {
    "ws_connect": 150,
    "ws_disconnect": 150,
    "ws_default": 150,
    "ws_authorizer": 150,  # a WebSocket handler too: it runs on every upgrade
    "http_api": 300,
    "turn_worker": 400,
}
# Dummy values for the variables template.yaml sets (its values are CloudFormation references).
DUMMY = {
    "AVM_TABLE_NAME": "agentvm-measure",
    "AVM_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/agentvm-measure.fifo",
    "AVM_WS_ENDPOINT": "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod",
    "AVM_PROVIDER_KEYS_PARAMETER": "/agentvm/provider-keys",  # read on first use, never at init
    "AVM_DEFAULT_MODEL": "",
    "AVM_LOG_LEVEL": "INFO",
    "AVM_TURN_DEADLINE_S": "840",  # the worker's, as template.yaml sets it
    "AVM_MCP_CALL_DEADLINE_S": "25",  # the HTTP API's /mcp, as template.yaml sets them
    "AVM_MCP_POLL_MS": "500",
    "AVM_SANDBOX_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/agentvm-sandbox.fifo",
    "AVM_WORKSPACE_BUCKET": "agentvm-measure-workspaces",
}
NO_AWS = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


@functools.cache
def _template() -> dict[str, Any]:
    from cfnlint.decode.cfn_yaml import load

    return load(str(ROOT / "template.yaml"))


def _function_environments() -> dict[str, dict[str, Any]]:
    """Function folder -> the environment template.yaml gives it (names -> values or references)."""
    template = _template()
    shared = template["Globals"]["Function"]["Environment"]["Variables"]
    out = {}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            own = resource["Properties"].get("Environment", {}).get("Variables", {})
            # a variable under a condition (``Fn::If`` ... ``AWS::NoValue``: AVM_EMBEDDINGS_MODEL with
            # BedrockAccess) is absent with the parameters' defaults, so absent in the measurement
            env = {**shared, **own}
            out[Path(resource["Properties"]["CodeUri"]).name] = {
                k: v for k, v in env.items() if not (isinstance(v, dict) and "Fn::If" in v)
            }
    return out


def _template_variables() -> dict[str, set[str]]:
    """Function folder -> the environment variable names template.yaml gives it."""
    return {name: set(env) for name, env in _function_environments().items()}


@functools.cache
def _parameter_defaults() -> dict[str, str]:
    """Variable name -> the default of the template parameter it is a ``!Ref`` to (``AVM_FLUSH_MS``:
    ``FlushMs``'s 250), or the value the template writes for it (``AVM_TOOL_MAX_MEDIA_RESULT_BYTES``:
    65536), so a setting gets its real value in the measurement."""
    parameters = _template().get("Parameters", {})
    out = {}
    for env in _function_environments().values():
        for name, value in env.items():
            ref = value.get("Ref") if isinstance(value, dict) else None
            if ref in parameters and "Default" in parameters[ref]:
                out[name] = str(parameters[ref]["Default"])
            elif isinstance(value, str | int | float):  # a value written in the template itself
                out[name] = str(value)
    return out


def _env(variables: set[str], *, in_lambda: bool, root: Path = ROOT) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AVM_", "POWERTOOLS_"))}
    # the tree's own package first: another checkout (benchmarks/cold_start_compare.py) measures its own
    env = {**keep, **NO_AWS, "PYTHONPATH": os.pathsep.join([str(root), str(root / "shared")])}
    defaults = _parameter_defaults()
    for name in variables:  # "agentvm": POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE
        env[name] = DUMMY[name] if name in DUMMY else defaults.get(name, "agentvm")
    if in_lambda:
        env["AWS_LAMBDA_FUNCTION_NAME"] = "agentvm-measure"
    return env


def lambda_environment(name: str) -> dict[str, str]:
    """The environment of function ``name``'s Lambda init, as the measurements give it (dummy values)."""
    return _env(_template_variables()[name], in_lambda=True)


def _median_ms(
    code: str, runs: int, variables: set[str], *, in_lambda: bool = False, root: Path = ROOT
) -> float:
    env = _env(variables, in_lambda=in_lambda, root=root)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _top(module: str, n: int, variables: set[str]) -> list[tuple[int, int, str]]:
    """The ``n`` imports with the most self time (us) of a Lambda init, from ``-X importtime``."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        cwd=ROOT,
        env=_env(variables, in_lambda=True),
        check=True,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            rows.append((int(match.group(1)), int(match.group(2)), match.group(4)))
    return sorted(rows, reverse=True)[:n]


def function_names() -> list[str]:
    """Every function folder of template.yaml, those with a target first."""
    return [*TARGETS, *sorted(set(_template_variables()) - set(TARGETS))]


def measure(
    runs: int = 9, names: Iterable[str] | None = None, *, init_only: bool = False, root: Path = ROOT
) -> list[dict[str, object]]:
    """One row per handler module: import and Lambda-init medians (ms, minus an empty interpreter).

    ``names``: function folders, by default every function of template.yaml (those with a target
    first). ``init_only`` skips the plain import (``benchmarks/cost_meter.py`` needs the init only).
    ``root``: the checkout whose ``functions/`` and ``shared/`` are imported (this one by default).
    """
    baseline = _median_ms("pass", runs, set(), root=root)
    variables = _template_variables()
    if names is None:
        names = function_names()
    rows: list[dict[str, object]] = []
    for name in names:
        module = f"functions.{name}.app"
        row: dict[str, object] = {"module": module}
        if not init_only:
            imported = _median_ms(f"import {module}", runs, variables[name], root=root) - baseline
            target = TARGETS.get(name)  # functions without one are measured all the same
            row |= {
                "import_ms": round(imported),
                "target_ms": target,
                "met": None if target is None else imported <= target,
            }
        primed = _median_ms(f"import {module}", runs, variables[name], in_lambda=True, root=root) - baseline
        row["lambda_init_ms"] = round(primed)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--top", type=int, default=0, help="also list the N imports with the most self time")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (for benchmarks)")
    args = parser.parse_args()

    rows = measure(args.runs)
    missed = any(row["met"] is False for row in rows)
    if args.json:
        print(json.dumps(rows))
        return 1 if missed else 0
    print(f"python {sys.version.split()[0]}, {args.runs} runs each, empty interpreter subtracted")
    print(f"{'module':<28}{'import':>8}{'target':>8}{'':>6}{'lambda init':>13}")
    variables = _template_variables()
    for row in rows:
        ok = {True: "ok", False: "MISS", None: ""}[row["met"]]  # type: ignore[index]
        target = "" if row["target_ms"] is None else f"{row['target_ms']}ms"
        print(f"{row['module']:<28}{row['import_ms']:>6}ms{target:>8}{ok:>6}{row['lambda_init_ms']:>11}ms")
        if args.top:
            name = str(row["module"]).split(".")[1]
            for self_us, total_us, imported_name in _top(str(row["module"]), args.top, variables[name]):
                print(f"    {self_us / 1000:>7.1f} ms self {total_us / 1000:>8.1f} ms total  {imported_name}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
