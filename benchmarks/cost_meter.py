"""AWS dollars per million standard turns, measured through the real handlers and adapters on moto.

How it is measured (the method of COST_MODEL.md): sessions of the standard turn run through the
WebSocket path's Lambda handlers with the real AWS adapters on moto, on a simulated clock
(``benchmarks/moto_turns.py``); every AWS request is counted with botocore hooks and rounded up to
its billing unit (``benchmarks/billing.py``), then priced with ``benchmarks/prices.py``. Lambda is
billed as requests plus GB-seconds: the memory template.yaml gives each function times a modelled
duration (the simulated wall time, i.e. the model's stream, shared by the turns of one worker
invocation; the handler's CPU time measured here; an assumed latency per AWS call). Two traffic
shapes: **idle**, one turn per worker invocation, and **load**, the template's BatchSize turns of
different sessions per invocation.

Run: ``./dev python -m benchmarks.cost_meter [--turns 100] [--budgets]`` (``--budgets``: every tenant and
container has token budgets, which the standard turn's tenant has not)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import math
import os
import re
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from benchmarks import prices
from benchmarks.billing import (
    DDB_READ,
    DDB_WRITE,
    S3_READ,
    S3_WRITE,
    SQS_REQUEST,
    UNPRICED,
    WS_MESSAGE,
    TableSchema,
)
from benchmarks.moto_turns import (
    FUNCTIONS,
    TURNS_PER_SESSION,
    Invocation,
    Scenario,
    StandardTurn,
    run_scenario,
)
from benchmarks.worker_memory import Memory
from benchmarks.worker_memory import render as render_memory

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"idle": 45.0, "load": 20.0}  # $ per million standard turns (COST_MODEL.md, issue 14)
PREVIOUS = ROOT / "BENCHMARKS.md"  # the figures of the last run, compared with this one's

# -- assumptions, each named where the report states it --------------------------------------------
CONNECTION_MINUTES_PER_TURN = 2  # COST_MODEL.md: the socket stays open between turns
# Latency of one in-Region AWS call (DynamoDB, SQS, @connections) from a Lambda. AWS publishes
# none (aws-facts §1.5 lists it as to be measured); single-digit milliseconds is the usual order.
AWS_CALL_LATENCY_S = 0.005
# Lambda's CPU is proportional to memory, 1,769 MB = one vCPU (aws-facts §2.1): CPU time measured
# here on a full core lasts 1769/memory times longer there (an upper bound for short bursts).
VCPU_MB = 1769
# INIT is billed (since 2025-08) and happens in < 1 % of invocations (AWS, aws-facts §2.1): one
# cold start per 100 invocations, lasting the measured Lambda init (scripts/measure_imports.py)
# at Lambda's CPU share.
INVOCATIONS_PER_COLD_START = 100
# Lambda's own lines per invocation in the log group (LogFormat Text, the template's default).
PLATFORM_LOG_LINES = (
    "START RequestId: {id} Version: $LATEST\n",
    "END RequestId: {id}\n",
    "REPORT RequestId: {id}\tDuration: {ms:.2f} ms\tBilled Duration: {billed} ms\t"
    "Memory Size: {memory} MB\tMax Memory Used: {memory} MB\t\n",
)

# -- components and their unit prices ------------------------------------------------------------
WS, CONN, REQUESTS, INIT = (
    "WebSocket messages",
    "WebSocket connection-minutes",
    "Lambda requests",
    "Lambda INIT",
)
SQS, WRITES, READS, LOGS = "SQS FIFO requests", "DynamoDB writes", "DynamoDB reads", "CloudWatch Logs"
S3W, S3R = "S3 PUT/LIST requests", "S3 GET/HEAD requests"
GBS = "Lambda GB-s {}"  # one line per function
UNIT_PRICES = {  # component -> (unit, $ per unit)
    WS: ("messages", prices.WS_MESSAGE.usd),
    CONN: ("minutes", prices.WS_CONNECTION_MINUTE.usd),
    REQUESTS: ("requests", prices.LAMBDA_REQUEST.usd),
    **{GBS.format(f): ("GB-s", prices.LAMBDA_ARM_GB_S.usd) for f in FUNCTIONS},
    INIT: ("GB-s", prices.LAMBDA_ARM_GB_S.usd),
    SQS: ("requests", prices.SQS_FIFO_REQUEST.usd),
    WRITES: ("WRU", prices.DDB_WRITE_UNIT.usd),
    READS: ("RRU", prices.DDB_READ_UNIT.usd),
    LOGS: ("bytes", prices.LOGS_INGEST_GB.usd / 2**30),  # AWS's billing GB is 2^30 bytes
    S3W: ("requests", prices.S3_WRITE_REQUEST.usd),
    S3R: ("requests", prices.S3_READ_REQUEST.usd),
}
_BY_KIND = {WS_MESSAGE: WS, SQS_REQUEST: SQS, DDB_WRITE: WRITES, DDB_READ: READS, S3_WRITE: S3W, S3_READ: S3R}
LEVERS = {  # COST_MODEL.md, "Levers"
    WS: "coalesce deltas (first delta at once, then AVM_FLUSH_MS windows: a longer window sends fewer "
    "frames); batched frames (?frames=batch) for the clients that declare them: one message per pass, "
    "text every 250 ms live, every 2 s at the economy cadence (docs/cost.md)",
    GBS.format("turn_worker"): "share one worker invocation's wait across a batch of turns for different "
    "sessions; arm64 and small memory",
    GBS.format("ws_default"): "arm64 and small memory; fewer AWS calls per frame (the handler waits on each)",
    WRITES: "one DynamoDB item per message, no transactions on the hot path, fewer writes per turn",
    READS: "eventually consistent reads",
    LOGS: "little logging per delta; Lambda lines without the keys CloudWatch stores; a turn's and a "
    "connection's EMF document carried by its log line (docs/cost.md)",
    SQS: "batches (one receive and one delete per worker invocation)",
    REQUESTS: "batches (fewer worker invocations per turn)",
}


# -- what template.yaml deploys ------------------------------------------------------------------
@dataclass(frozen=True)
class Deployment:
    memory_mb: dict[str, int]  # function folder -> MemorySize
    batch_size: int  # the worker's SQS BatchSize
    schema: TableSchema
    powertools_env: dict[str, str]  # the POWERTOOLS_* variables the template sets to literals

    @property
    def functions(self) -> list[str]:
        """The WebSocket path's functions this template deploys."""
        return [f for f in FUNCTIONS if f in self.memory_mb]


def read_template(path: Path = ROOT / "template.yaml") -> Deployment:
    from cfnlint.decode.cfn_yaml import load

    template = load(str(path))
    defaults = template["Globals"]["Function"]
    parameters = template.get("Parameters", {})

    def value(v: object) -> object:  # a literal, or a parameter's default
        return parameters[v["Ref"]]["Default"] if isinstance(v, dict) and "Ref" in v else v

    memory, batch_size, env = {}, 1, {}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::DynamoDB::Table":
            table = resource["Properties"]
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        props = {**defaults, **resource["Properties"]}
        if props["Architectures"] != ["arm64"]:
            raise ValueError("benchmarks/prices.py has the arm64 Lambda price only")
        memory[Path(props["CodeUri"]).name] = int(value(props["MemorySize"]))  # type: ignore[call-overload]
        for scope in (defaults, resource["Properties"]):
            variables = scope.get("Environment", {}).get("Variables", {})
            env |= {k: v for k, v in variables.items() if k.startswith("POWERTOOLS_") and isinstance(v, str)}
        for event in props.get("Events", {}).values():
            if event["Type"] == "SQS" and Path(props["CodeUri"]).name == "turn_worker":
                batch_size = int(event["Properties"].get("BatchSize", 10))

    def keys(schema: list[dict[str, str]]) -> tuple[str, ...]:
        return tuple(k["AttributeName"] for k in schema)

    indexes = {i["IndexName"]: keys(i["KeySchema"]) for i in table.get("GlobalSecondaryIndexes", [])}
    return Deployment(memory, batch_size, TableSchema(keys(table["KeySchema"]), indexes), env)


# -- from what was counted to dollars ------------------------------------------------------------
@dataclass
class Bill:
    """One scenario, per standard turn: units and dollars by component, and a few explanations."""

    units: dict[str, float]
    dollars: dict[str, float]
    cpu_ms: float  # handler CPU time measured here, all functions
    worker_s: float  # billed worker duration per invocation (mean)

    @property
    def total(self) -> float:
        return sum(self.dollars.values())


def lambda_seconds(inv: Invocation, memory_mb: int, *, cpu_share: bool = True) -> float:
    """Billed duration (1 ms steps) of one invocation.

    * The simulated wall time: the worker's wait on the model, once for its whole batch.
    * CPU time at Lambda's CPU share (``cpu_share=False``: as measured here, on a full core). CPU
      spent while a model streams overlaps that wait and adds only what exceeds it.
    * The AWS calls made while no model streams, each an assumed in-Region round trip. A worker's
      turns make theirs in parallel: spread over the batch.
    """
    scale = max(1.0, VCPU_MB / memory_mb) if cpu_share else 1.0
    cpu_in_streams = (inv.cpu_s - inv.cpu_outside_s) * scale
    sequential = sum(1 for c in inv.calls if not c.tag[1])
    seconds = (
        inv.simulated_s
        + inv.cpu_outside_s * scale
        + max(0.0, cpu_in_streams - inv.simulated_s)
        + AWS_CALL_LATENCY_S * sequential / max(inv.turns, 1)
    )
    return math.ceil(seconds * 1000) / 1000


def _platform_log_bytes(memory_mb: int, seconds: float) -> int:
    values = {"id": uuid.uuid4(), "ms": seconds * 1000, "billed": round(seconds * 1000), "memory": memory_mb}
    return sum(len(line.format(**values)) for line in PLATFORM_LOG_LINES)


def _weight(s: Scenario, inv: Invocation) -> float:
    """An invocation's share of one turn: turn work over the turns run; session work (connect, the
    image_list exchange, disconnect) over the sessions, each worth 5 turns (COST_MODEL.md)."""
    return 1 / s.turns if inv.bucket == "turn" else 1 / (s.sessions * TURNS_PER_SESSION)


def bill(s: Scenario, d: Deployment, init_s: dict[str, float], *, cpu_share: bool = True) -> Bill:
    units = dict.fromkeys(UNIT_PRICES, 0.0)
    units[CONN] = CONNECTION_MINUTES_PER_TURN  # modelled
    cpu = worker_s = workers = 0.0
    for inv in s.invocations:
        w = _weight(s, inv)
        units[WS] += w * inv.inbound_ws_units
        for call in inv.calls:
            if call.kind in _BY_KIND:
                units[_BY_KIND[call.kind]] += w * call.units
        if inv.function not in d.memory_mb:
            continue  # Lambda's SQS poller: requests only
        memory = d.memory_mb[inv.function]
        seconds = lambda_seconds(inv, memory, cpu_share=cpu_share)
        units[REQUESTS] += w
        units[GBS.format(inv.function)] += w * memory / 1024 * seconds
        init = init_s[inv.function] * (max(1.0, VCPU_MB / memory) if cpu_share else 1.0)
        units[INIT] += w * memory / 1024 * init / INVOCATIONS_PER_COLD_START
        units[LOGS] += w * (inv.log_bytes + _platform_log_bytes(memory, seconds))
        cpu += w * inv.cpu_s
        if inv.function == "turn_worker":
            worker_s, workers = worker_s + seconds, workers + 1
    dollars = {k: v * UNIT_PRICES[k][1] for k, v in units.items()}
    return Bill(units, dollars, cpu * 1000, worker_s / max(workers, 1))


def lambda_init_s(d: Deployment, runs: int) -> dict[str, float]:
    """Each function's Lambda init (import and runtime build), measured in fresh interpreters here;
    ``runs=0``: not measured (INIT is then not billed)."""
    if runs <= 0:
        return dict.fromkeys(d.functions, 0.0)
    spec = importlib.util.spec_from_file_location("measure_imports", ROOT / "scripts" / "measure_imports.py")
    assert spec is not None and spec.loader is not None
    measure_imports = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measure_imports)
    rows = measure_imports.measure(runs, d.functions, init_only=True)
    return {name: max(0, row["lambda_init_ms"]) / 1000 for name, row in zip(d.functions, rows, strict=True)}


def ideal_text_frames(standard: StandardTurn, flush_s: float, flush_max_s: float = 0.0) -> int:
    """One turn's ``text_delta`` frames on an exact clock: the first token at once, then one frame
    per flush window (a window opens at the first token after the last flush, and doubles after
    each flush up to ``flush_max_s``, as the sink does)."""
    times = [standard.ttft_s + i / standard.tokens_per_s for i in range(1, standard.output_tokens)]
    frames, window_end, window = 1, -1.0, flush_s
    for t in times:
        if t >= window_end:
            if window_end >= 0:
                window = min(window * 2, max(flush_max_s, flush_s))
            frames, window_end = frames + 1, t + window
    return frames


# -- running it ----------------------------------------------------------------------------------
@dataclass
class Result:
    standard: StandardTurn
    deployment: Deployment
    init_s: dict[str, float]
    scenarios: dict[str, Scenario]
    bills: dict[str, Bill]
    full_core: dict[str, Bill]  # the same with CPU time as measured here, not at Lambda's CPU share
    wall_s: float
    # The standard tool turn (StandardTurn.tool_call), same two traffic shapes; empty if not run.
    tool_scenarios: dict[str, Scenario] = dataclasses.field(default_factory=dict)
    tool_bills: dict[str, Bill] = dataclasses.field(default_factory=dict)
    # The standard sandbox turn (StandardTurn.sandbox): the turn suspends on a sandbox-worker job.
    sandbox_scenarios: dict[str, Scenario] = dataclasses.field(default_factory=dict)
    sandbox_bills: dict[str, Bill] = dataclasses.field(default_factory=dict)
    # The standard turn from an AgentX v2 (JSON-RPC 2.0) client (StandardTurn.protocol = "v2").
    v2_scenarios: dict[str, Scenario] = dataclasses.field(default_factory=dict)
    v2_bills: dict[str, Bill] = dataclasses.field(default_factory=dict)
    # The standard turn and tool turn from the SDK's client, which declares batched frames
    # (StandardTurn.batch); ``scenarios``/``tool_scenarios`` are a plain AgentX v1 client's.
    sdk_scenarios: dict[str, Scenario] = dataclasses.field(default_factory=dict)
    sdk_bills: dict[str, Bill] = dataclasses.field(default_factory=dict)
    sdk_tool_scenarios: dict[str, Scenario] = dataclasses.field(default_factory=dict)
    sdk_tool_bills: dict[str, Bill] = dataclasses.field(default_factory=dict)
    # The standard turn from the SDK's client on the economy cadence (?cadence=economy); the SDK's
    # default (``sdk_scenarios``) is the live cadence.
    economy_scenarios: dict[str, Scenario] = dataclasses.field(default_factory=dict)
    economy_bills: dict[str, Bill] = dataclasses.field(default_factory=dict)
    # The totals of the last BENCHMARKS.md, by table ("standard", "tool") and shape: $ per million.
    previous: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # What the turn worker's memory size rests on (benchmarks/worker_memory.py); None: not measured.
    worker_memory: Memory | None = None


def _shapes(standard: StandardTurn, d: Deployment, turns: int, label: str = "") -> dict[str, Scenario]:
    """The two traffic shapes (idle: one turn per worker invocation; load: the template's batch)."""
    return {
        name: run_scenario(
            f"{label}{name}",
            batch,
            turns,
            standard=standard,
            memory_mb=d.memory_mb,
            schema=d.schema,
            environment=d.powertools_env,
        )
        for name, batch in (("idle", 1), ("load", d.batch_size))
    }


def run(turns: int = 100, *, init_runs: int = 3) -> Result:
    """Both shapes for the standard turn and the standard tool turn, ``turns`` turns each (rounded
    up to whole rounds)."""
    started = time.monotonic()
    standard, d = StandardTurn(), read_template()
    init_s = lambda_init_s(d, init_runs)
    scenarios = _shapes(standard, d, turns)
    bills = {name: bill(s, d, init_s) for name, s in scenarios.items()}
    full_core = {name: bill(s, d, init_s, cpu_share=False) for name, s in scenarios.items()}
    tool_scenarios = _shapes(dataclasses.replace(standard, tool_call=True), d, turns, "tool ")
    tool_bills = {name: bill(s, d, init_s) for name, s in tool_scenarios.items()}
    sandbox_scenarios = _shapes(dataclasses.replace(standard, sandbox=True), d, turns, "sandbox ")
    sandbox_bills = {name: bill(s, d, init_s) for name, s in sandbox_scenarios.items()}
    v2_scenarios = _shapes(dataclasses.replace(standard, protocol="v2"), d, turns, "v2 ")
    v2_bills = {name: bill(s, d, init_s) for name, s in v2_scenarios.items()}
    sdk_scenarios = _shapes(dataclasses.replace(standard, batch=True), d, turns, "sdk ")
    sdk_bills = {name: bill(s, d, init_s) for name, s in sdk_scenarios.items()}
    sdk_tool = _shapes(dataclasses.replace(standard, batch=True, tool_call=True), d, turns, "sdk tool ")
    sdk_tool_bills = {name: bill(s, d, init_s) for name, s in sdk_tool.items()}
    economy = dataclasses.replace(standard, batch=True, cadence="economy")
    economy_scenarios = _shapes(economy, d, turns, "sdk economy ")
    economy_bills = {name: bill(s, d, init_s) for name, s in economy_scenarios.items()}
    wall_s = time.monotonic() - started
    return Result(
        standard,
        d,
        init_s,
        scenarios,
        bills,
        full_core,
        wall_s,
        tool_scenarios,
        tool_bills,
        sandbox_scenarios,
        sandbox_bills,
        v2_scenarios,
        v2_bills,
        sdk_scenarios,
        sdk_bills,
        sdk_tool,
        sdk_tool_bills,
        economy_scenarios,
        economy_bills,
        previous_totals(),
    )


def previous_totals(path: Path = PREVIOUS) -> dict[str, dict[str, float]]:
    """The totals of the report this one replaces (a BENCHMARKS.md written by ``render``), $ per
    million turns by table and shape: ``standard``/``tool`` (a plain AgentX v1 client's), and
    ``standard sdk``/``tool sdk`` where that report had the SDK's client too."""
    if not path.exists():
        return {}
    out: dict[str, dict[str, float]] = {}
    table = None
    for line in path.read_text().splitlines():
        if line.startswith("## AWS cost"):
            table = "standard"
        elif line.startswith("### The standard tool turn"):
            table = "tool"
        elif line.startswith("## ") and table is not None:
            break
        money = [float(m.replace(",", "")) for m in re.findall(r"\*\*\$([\d,.]+)\*\*", line)]
        if table is None or not line.startswith("| **total**") or len(money) < 2 or table in out:
            continue
        if len(money) >= 4:  # the SDK's client, then the plain v1 client
            out[f"{table} sdk"] = {"idle": money[0], "load": money[1]}
            money = money[2:]
        out[table] = {"idle": money[0], "load": money[1]}
    return out


def _usd(dollars: float) -> str:
    return f"${dollars * 1e6:,.2f}"


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _verdict(total: float, target: float) -> str:
    if total <= target:
        return f"met (≤ ${target * 1e6:g})"
    return f"**missed** by {_usd(total - target)} ({total / target:.2f}x)"


def _side_by_side(sdk: dict[str, Bill], v1: dict[str, Bill]) -> list[str]:
    """Per component, units and dollars of the SDK's client, and dollars of a plain v1 client."""
    rows = sorted(
        (k for k in UNIT_PRICES if any(b.units[k] for b in (*sdk.values(), *v1.values()))),
        key=lambda k: -sdk["load"].dollars[k],
    )
    out = [
        "| component | unit | SDK client idle: units/turn | idle: $/M turns | SDK client load: units/turn "
        "| load: $/M turns | AgentX v1 client idle: $/M | v1 load: $/M |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for k in rows:
        out.append(
            f"| {k} | {UNIT_PRICES[k][0]} | {_num(sdk['idle'].units[k])} | {_usd(sdk['idle'].dollars[k])} "
            f"| {_num(sdk['load'].units[k])} | {_usd(sdk['load'].dollars[k])} "
            f"| {_usd(v1['idle'].dollars[k])} | {_usd(v1['load'].dollars[k])} |"
        )
    out.append(
        f"| **total** | | | **{_usd(sdk['idle'].total)}** | | **{_usd(sdk['load'].total)}** "
        f"| **{_usd(v1['idle'].total)}** | **{_usd(v1['load'].total)}** |"
    )
    return out


def render(r: Result) -> str:
    sdk, v1 = r.sdk_bills or r.bills, r.bills
    s_idle, s_load = r.scenarios["idle"], r.scenarios["load"]
    goal = {name: TARGETS[name] / 1e6 for name in TARGETS}
    out = [
        "## AWS cost per standard turn (real handlers and adapters on moto)\n",
        (__doc__ or "").split("\n\n", 1)[1].split("Run:")[0].strip() + "\n",
        f"{s_idle.turns} turns per scenario ({s_idle.sessions} sessions idle; {s_load.sessions} under load, "
        f"{s_load.batch} turns per worker invocation). The clock is simulated: the model's tokens (first "
        f"after {r.standard.ttft_s:g} s, then {r.standard.tokens_per_s:g}/s: {r.standard.model_wall_s:.2f} s "
        "per turn), flush windows, cancel polls and subscriber refreshes keep their real timing, AWS "
        f"requests take none; the run took {r.wall_s:.0f} s.\n",
        "Two clients of the same turns: the **SDK's client** (`agentvm.client`, and the playground), which "
        "declares batched frames (`?frames=batch`: several frames per WebSocket message, docs/protocol.md), "
        "and a plain **AgentX v1 client** (one frame per message, as every AgentX client gets).\n",
        *_side_by_side(sdk, v1),
        f"| goal | | | ≤ ${TARGETS['idle']:g} | | ≤ ${TARGETS['load']:g} | ≤ ${TARGETS['idle']:g} "
        f"| ≤ ${TARGETS['load']:g} |",
        "",
        "### Against the goals (issue 14)\n",
        f"| the standard turn | idle (goal ≤ ${TARGETS['idle']:g}) "
        f"| under load (goal ≤ ${TARGETS['load']:g}) |",
        "|---|---|---|",
        f"| SDK client (batched frames) | {_usd(sdk['idle'].total)}: "
        f"{_verdict(sdk['idle'].total, goal['idle'])} "
        f"| {_usd(sdk['load'].total)}: {_verdict(sdk['load'].total, goal['load'])} |",
        f"| AgentX v1 client | {_usd(v1['idle'].total)}: {_verdict(v1['idle'].total, goal['idle'])} "
        f"| {_usd(v1['load'].total)}: {_verdict(v1['load'].total, goal['load'])} |",
    ]
    if r.tool_bills:
        t_sdk, t_v1 = r.sdk_tool_bills or r.tool_bills, r.tool_bills
        out += [
            f"| the standard tool turn, SDK client (no goal) | {_usd(t_sdk['idle'].total)} "
            f"| {_usd(t_sdk['load'].total)} |",
            f"| the standard tool turn, AgentX v1 client | {_usd(t_v1['idle'].total)} "
            f"| {_usd(t_v1['load'].total)} |",
        ]
    out += [
        "",
        *_cadences(r),
        *_comparison(r),
        *_where_the_money_goes(r),
        *_tool_turn(r),
        *_sandbox_turn(r),
        *_v2_turn(r),
        *_by_operation(r),
        *_observations(r),
        *_assumptions(r),
    ]
    return "\n".join(out) + "\n"


def _cadences(r: Result) -> list[str]:
    """The SDK's client on its two text cadences side by side: live (its default) and economy."""
    if not r.economy_bills or not r.sdk_bills:
        return []
    out = [
        "### The SDK client's text cadences (streaming/batch_cadence.py)\n",
        "The same standard turn from the SDK's client: **live** (the default: text every "
        "`BatchFlushMs`) and **economy** (`?cadence=economy`, an image's `cadence` or the tenant's "
        "`streaming.cadence`: text every `EconomyFlushMs`). WebSocket messages the client received "
        "per turn, and $ per million standard turns.\n",
        "| cadence | messages per turn | idle | under load | WebSocket messages' share (idle) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, scenarios, bills in (
        ("live (default)", r.sdk_scenarios, r.sdk_bills),
        ("economy", r.economy_scenarios, r.economy_bills),
    ):
        idle = scenarios["idle"]
        per_turn = idle.messages_received / max(idle.turns, 1)
        out.append(
            f"| {label} | {per_turn:.1f} | {_usd(bills['idle'].total)} | {_usd(bills['load'].total)} "
            f"| {_usd(bills['idle'].dollars.get(WS, 0.0))} |"
        )
    saved = r.sdk_bills["idle"].total - r.economy_bills["idle"].total
    out += ["", f"Economy saves {_usd(saved)} per million standard turns (idle) over live.\n"]
    return out


def _comparison(r: Result) -> list[str]:
    """This run against the report it replaces (BENCHMARKS.md before it is written again)."""
    if not r.previous:
        return []
    now = {
        "standard": r.bills,
        "standard sdk": r.sdk_bills,
        "tool": r.tool_bills,
        "tool sdk": r.sdk_tool_bills,
    }
    names = {
        "standard": "standard turn, AgentX v1 client",
        "standard sdk": "standard turn, SDK client",
        "tool": "standard tool turn, AgentX v1 client",
        "tool sdk": "standard tool turn, SDK client",
    }
    out = [
        "### Compared with the previous figures\n",
        "The totals of the BENCHMARKS.md this run replaces (before it, the only client measured was a "
        "plain AgentX v1 client; the SDK's client is compared with that where it has no figure of its "
        "own).\n",
        "| scenario | previous idle | now idle | previous load | now load |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, bills in now.items():
        if not bills:
            continue
        before = r.previous.get(key) or r.previous.get(key.removesuffix(" sdk"))
        if before is None:
            continue
        cells = []
        for shape in ("idle", "load"):
            after = bills[shape].total * 1e6
            cells += [f"${before[shape]:,.2f}", f"${after:,.2f} ({after - before[shape]:+,.2f})"]
        out.append(f"| {names[key]} | " + " | ".join(cells) + " |")
    return [*out, ""]


def _tool_turn(r: Result) -> list[str]:
    """The standard tool turn beside the standard turn: $ per million, by component."""
    if not r.tool_bills:
        return []
    t_sdk, t_v1 = r.sdk_tool_bills or r.tool_bills, r.tool_bills
    sdk, v1 = r.sdk_bills or r.bills, r.bills
    s = r.standard
    out = [
        "### The standard tool turn\n",
        f"One HTTP tool call between two model calls: the first streams {s.lead_tokens} tokens and the "
        "call, the tool (a third-party API, stubbed: no AWS cost of its own) answers "
        f"{s.tool_result_bytes} B "
        f"after {s.tool_latency_s:g} s, the second call ({s.second_input_tokens} input tokens) streams the "
        f"standard {s.output_tokens}-token answer. The real HttpTool, Toolbox, persistence (the call and "
        "the result as messages, each step's usage record) and frames run on moto like everything else.\n",
        *_side_by_side(t_sdk, t_v1),
        f"| vs the standard turn | | | {t_sdk['idle'].total / sdk['idle'].total:.2f}x | "
        f"| {t_sdk['load'].total / sdk['load'].total:.2f}x | {t_v1['idle'].total / v1['idle'].total:.2f}x "
        f"| {t_v1['load'].total / v1['load'].total:.2f}x |",
        "",
    ]
    extra = sorted(
        ((k, t_sdk["load"].dollars[k] - sdk["load"].dollars[k]) for k in UNIT_PRICES), key=lambda kv: -kv[1]
    )[:3]
    out.append(
        "Under load the tool turn (SDK client) costs more mostly in: "
        + ", ".join(f"{k} (+{_usd(v)}/M)" for k, v in extra if v > 0)
        + " (the worker waits on the tool and a second model call; two more messages and a step usage "
        "record are written; the tool's frames are sent).\n"
    )
    return out


def _sandbox_turn(r: Result) -> list[str]:
    """The standard sandbox turn beside the standard turn: $ per million, by component."""
    if not r.sandbox_bills:
        return []
    t_idle, t_load = r.sandbox_bills["idle"], r.sandbox_bills["load"]
    idle, load = r.bills["idle"], r.bills["load"]
    used = [k for k in UNIT_PRICES if t_idle.units[k] or t_load.units[k]]
    rows = sorted(used, key=lambda k: -t_load.dollars[k])
    s = r.standard
    out = [
        "### The standard sandbox turn\n",
        f"One `sh` job between two model calls, as the AWS host runs it: the first call streams "
        f"{s.lead_tokens} tokens and the call; the turn **suspends** (its worker invocation ends); the "
        "job goes over the sandbox queue to `SandboxWorkerFunction` (1,024 MB), which pulls the "
        f"container's workspace ({s.workspace_files} files of {s.workspace_file_bytes} B) from S3, runs "
        f"the job ({s.sandbox_job_s:g} s on the simulated clock; the only stubbed part), pushes the "
        "changed file back and answers the wait, which queues the continuation; a second turn-worker "
        f"invocation makes the second model call ({s.second_input_tokens} input tokens) and streams the "
        f"standard {s.output_tokens}-token answer. No invocation waits on the job. Not per turn: "
        "`WaitSweeperFunction` runs every minute whatever the traffic (about 44,000 short invocations "
        "a month, cents), and workspace storage is S3's $0.023 per GB-month.\n",
        "| component | idle: units/turn | idle: $/M turns | load: units/turn | load: $/M turns |",
        "|---|---:|---:|---:|---:|",
    ]
    for k in rows:
        out.append(
            f"| {k} | {_num(t_idle.units[k])} | {_usd(t_idle.dollars[k])} "
            f"| {_num(t_load.units[k])} | {_usd(t_load.dollars[k])} |"
        )
    out += [
        f"| **total** | | **{_usd(t_idle.total)}** | | **{_usd(t_load.total)}** |",
        f"| vs the standard turn | | {t_idle.total / idle.total:.2f}x | | {t_load.total / load.total:.2f}x |",
        "",
    ]
    extra = sorted(((k, t_load.dollars[k] - load.dollars[k]) for k in UNIT_PRICES), key=lambda kv: -kv[1])[:3]
    out.append(
        "Under load the sandbox turn costs more mostly in: "
        + ", ".join(f"{k} (+{_usd(v)}/M)" for k, v in extra if v > 0)
        + ".\n"
    )
    return out


def _v2_turn(r: Result) -> list[str]:
    """The standard turn from an AgentX v2 client beside the v1 one: $ per million, by component."""
    if not r.v2_bills:
        return []
    t_idle, t_load = r.v2_bills["idle"], r.v2_bills["load"]
    idle, load = r.bills["idle"], r.bills["load"]
    rows = sorted(
        (k for k in UNIT_PRICES if t_idle.units[k] or t_load.units[k]), key=lambda k: -t_load.dollars[k]
    )
    s_v2, s_v1 = r.v2_scenarios["idle"], r.scenarios["idle"]
    out = [
        "### The standard turn over AgentX v2 (JSON-RPC 2.0)\n",
        "The same turns from a client that speaks JSON-RPC 2.0 on the same `/ws`: the session's "
        "`image.list` subscribes it server-side (no `subscribe` frames), its first frame records the "
        "connection's protocol (one conditional write, after one consistent Query of the connection's "
        "items), `message.send` is answered by the turn's worker when the turn ends (one post), and "
        "the turn's frames are rendered as 2.x `stream.event` notifications (`turn_response` is one "
        "more). The worker learns each subscriber's protocol from the subscriber lookup it makes "
        "anyway: no read per frame or per subscriber.\n",
        "| component | idle: units/turn | idle: $/M turns | load: units/turn | load: $/M turns |",
        "|---|---:|---:|---:|---:|",
    ]
    for k in rows:
        out.append(
            f"| {k} | {_num(t_idle.units[k])} | {_usd(t_idle.dollars[k])} "
            f"| {_num(t_load.units[k])} | {_usd(t_load.dollars[k])} |"
        )
    out += [
        f"| **total** | | **{_usd(t_idle.total)}** | | **{_usd(t_load.total)}** |",
        f"| vs the v1 client | | {t_idle.total / idle.total:.3f}x | | {t_load.total / load.total:.3f}x |",
        "",
        f"Frames received per turn: {s_v2.frames_received / s_v2.turns:.1f} (v1: "
        f"{s_v1.frames_received / s_v1.turns:.1f}).\n",
    ]
    return out


def _where_the_money_goes(r: Result) -> list[str]:
    out = ["### Where the money goes\n"]
    for client, bills in (("SDK client", r.sdk_bills or r.bills), ("AgentX v1 client", r.bills)):
        for name, b in bills.items():
            top = sorted(b.dollars.items(), key=lambda kv: -kv[1])[:3]
            shares = ", ".join(f"{k} {v / b.total:.0%}" for k, v in top)
            target = TARGETS[name] / 1e6
            out.append(
                f"* **{client}, {name}**: {_usd(b.total)}, {_verdict(b.total, target)}. Top: {shares}."
            )
            if b.total > target:
                out += [f"  * {k}: {LEVERS[k]}." for k, _ in top if k in LEVERS]
    windows = ", ".join(
        f"{ms} ms: {ideal_text_frames(r.standard, ms / 1000)}" for ms in (100, 250, 500, 1000, 2000)
    )
    out.append(f"\n`text_delta` frames of the standard turn by flush window (exact clock): {windows}.")
    return [*out, ""]


def _by_operation(r: Result) -> list[str]:
    scenarios = r.sdk_scenarios or r.scenarios
    out = [
        "### AWS requests per turn, by function\n",
        f"The {'SDK' if r.sdk_scenarios else 'AgentX v1'} client's standard turn. Session requests (the "
        "upgrade, `image_list`, `subscribe`, `$disconnect`) are spread over "
        f"{TURNS_PER_SESSION} turns; `sqs_poller` is Lambda's event source mapping; `usage_rollup` is the "
        "usage rollup the wait sweeper runs every minute (its requests, once every hour of the turns "
        "closed, spread over the turns; its Lambda time is the sweeper's, which runs anyway).\n",
        "| function | service | operation | idle: requests | idle: billed units "
        "| load: requests | load: billed units |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    tables: dict[str, dict[tuple[str, str, str], list[float]]] = {}
    for name, s in scenarios.items():
        table = tables[name] = {}
        for inv in s.invocations:
            for c in inv.calls:
                row = table.setdefault((inv.function, c.service, c.operation), [0.0, 0.0])
                row[0] += _weight(s, inv)
                row[1] += _weight(s, inv) * c.units
    order = [*FUNCTIONS, "sqs_poller", "usage_rollup"]
    for key in sorted(set(tables["idle"]) | set(tables["load"]), key=lambda k: (order.index(k[0]), k[1:])):
        cells = [f"{v:.2f}" for name in ("idle", "load") for v in tables[name].get(key, (0.0, 0.0))]
        out.append(f"| {' | '.join(key)} | " + " | ".join(cells) + " |")
    return [*out, ""]


def _observations(r: Result) -> list[str]:
    s_idle, s_load = r.scenarios["idle"], r.scenarios["load"]
    idle, load = r.bills["idle"], r.bills["load"]
    ideal = ideal_text_frames(r.standard, s_idle.flush_s, s_idle.flush_max_s)
    types = sorted(s_idle.frame_types.items(), key=lambda kv: -kv[1])
    out = [
        f"* Frames per turn the clients received: {s_idle.frames_received / s_idle.turns:.1f} idle, "
        f"{s_load.frames_received / s_load.turns:.1f} under load (the sessions' frames not yet spread over "
        f"{TURNS_PER_SESSION} turns). By type (idle): "
        + ", ".join(f"`{t}` {n / s_idle.turns:.1f}" for t, n in types)
        + f"; `text_delta` expected from the token schedule and windows of {s_idle.flush_s * 1000:g} ms "
        f"growing to {max(s_idle.flush_max_s, s_idle.flush_s) * 1000:g} ms: "
        f"{ideal}.",
        *(
            [
                "* WebSocket messages the clients received per turn (the sessions' included): SDK client "
                + ", ".join(
                    f"{sc.messages_received / sc.turns:.1f} {name} "
                    f"(carrying {sc.frames_received / sc.turns:.1f} frames)"
                    for name, sc in r.sdk_scenarios.items()
                )
                + f"; AgentX v1 client {s_idle.messages_received / s_idle.turns:.1f} (one frame each)."
            ]
            if r.sdk_scenarios
            else []
        ),
        f"* Billed worker duration per invocation: {idle.worker_s:.2f} s idle (1 turn), "
        f"{load.worker_s:.2f} s under load ({s_load.batch} turns); model stream "
        f"{statistics.median(s_idle.stream_s + s_load.stream_s):.2f} s.",
        f"* Handler CPU time per turn, measured here (moto's excluded): {idle.cpu_ms:.0f} ms idle, "
        f"{load.cpu_ms:.0f} ms under load; at Lambda's CPU share it lasts {VCPU_MB}/memory times longer. "
        f"Billed as measured instead, the totals would be {_usd(r.full_core['idle'].total)} idle and "
        f"{_usd(r.full_core['load'].total)} under load.",
        f"* Logs: {idle.units[LOGS]:,.0f} bytes per turn idle, {load.units[LOGS]:,.0f} under load.",
        *(
            [f"* {render_memory(r.worker_memory, r.deployment.memory_mb['turn_worker'])}"]
            if r.worker_memory is not None
            else []
        ),
        "* Lambda init measured here (import and runtime build, fresh interpreter): "
        + (
            ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in r.init_s.items())
            if any(r.init_s.values())
            else "not measured (INIT not billed)"
        )
        + ".",
    ]
    unpriced = sum(c.kind == UNPRICED for s in r.scenarios.values() for i in s.invocations for c in i.calls)
    stray = s_idle.unattributed_calls + s_load.unattributed_calls
    if unpriced or stray:
        out.append(
            f"* **Check:** {unpriced} requests had no price rule; {stray} were made outside any invocation."
        )
    return [*out, ""]


def _assumptions(r: Result) -> list[str]:
    memory = ", ".join(f"{f} {r.deployment.memory_mb[f]} MB" for f in r.deployment.functions)
    return [
        "### Assumptions\n",
        f"* Prices: `benchmarks/prices.py` (us-east-1 list prices, arm64). Memory (template.yaml): {memory}.",
        "* Lambda duration = the simulated wall time (the worker's wait on the model, once per invocation) "
        f"+ CPU time measured here x {VCPU_MB}/memory (Lambda's CPU share; {VCPU_MB} MB is one vCPU), where "
        "CPU spent while a model streams adds only what exceeds that wait + "
        f"{AWS_CALL_LATENCY_S * 1000:g} ms per AWS call made while no model streams (an assumed in-Region "
        "round trip: AWS publishes no figure), a worker's turns making theirs in parallel.",
        f"* INIT: one cold start per {INVOCATIONS_PER_COLD_START} invocations of each function (AWS: INIT "
        "in < 1 % of invocations), lasting the Lambda init measured here at Lambda's CPU share. The server "
        "secret's SSM read happens once per execution environment: not counted per turn.",
        f"* {CONNECTION_MINUTES_PER_TURN} connection-minutes per turn. A session (the `$connect` authorizer, "
        "`$connect`, `image_list` and, for the AgentX v1 client, `subscribe` (the SDK's `image_list` "
        f"asks the server to subscribe it), `$disconnect`) is spread over {TURNS_PER_SESSION} turns; "
        "`$connect` and `$disconnect` are not counted as messages. Each session has its own API key (in "
        "the upgrade's header); verified keys stay cached per function for the session. The next message "
        "follows each turn at once. The image (agent running) and a history of "
        f"{r.standard.history_messages} messages of ~{r.standard.message_bytes} B exist beforehand; the "
        f"user's message is ~{r.standard.message_bytes} B.",
        "* SQS: the event source mapping's ReceiveMessage and DeleteMessageBatch per batch are modelled "
        "(made by the meter, counted like the rest). Its empty long polls on an idle queue are a cost per "
        "hour, not per turn.",
        "* DynamoDB units come from item sizes (moto's consumed capacity is a constant), index writes "
        "included; a write whose condition failed still costs its units.",
        "* Logs: what the handlers wrote (Powertools JSON, the core's lines, EMF metrics) plus Lambda's "
        "START/END/REPORT lines. No X-Ray (Tracing: Disabled). The HTTP API is not on the turn path.",
        "",
    ]


def _import_as_in_lambda() -> None:
    """Import the handlers under the service name template.yaml gives them, so that the core's
    loggers log through Powertools as in Lambda (in a process that has not imported them yet)."""
    from unittest import mock

    name = read_template().powertools_env.get("POWERTOOLS_SERVICE_NAME")
    with mock.patch.dict(os.environ, {"POWERTOOLS_SERVICE_NAME": name} if name else {}):
        for function in FUNCTIONS:
            if (ROOT / "functions" / function / "app.py").exists():
                importlib.import_module(f"functions.{function}.app")


def report(quick: bool = False) -> str:
    """The Markdown section of BENCHMARKS.md (``benchmarks/run_all.py``)."""
    from benchmarks import worker_memory

    _import_as_in_lambda()
    result = run(50 if quick else 100, init_runs=1 if quick else 3)  # 50: whole sessions under load
    result.worker_memory = worker_memory.measure(result.deployment.batch_size)
    return render(result)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=100, help="standard turns per scenario")
    parser.add_argument(
        "--init-runs",
        type=int,
        default=3,
        help="fresh interpreters per INIT measurement (0: do not bill INIT)",
    )
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="every tenant and container has token budgets (the standard turn's tenant has none)",
    )
    args = parser.parse_args()
    if args.budgets:
        from benchmarks.moto_turns import Session

        Session.with_budgets = True
    _import_as_in_lambda()
    print(render(run(args.turns, init_runs=args.init_runs)))


if __name__ == "__main__":
    main()
