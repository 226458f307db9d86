"""AgentVM vs LangGraph's local server, the same standard turn, the same fake provider, one run.

LangGraph side: ``langgraph dev`` (the in-memory langgraph-api server) serving a one-node chat
graph (``benchmarks/peer/graph.py``) that calls the fake provider through ``langchain-anthropic``;
its own venv is created under ``.bench/lgvenv`` on first use (pinned versions below), so our
environment stays clean. ``--n-jobs-per-worker`` is set to the client count: by default it runs
10 runs at a time, which would queue the rest and make the comparison unfair to it.

Added latency is receipt minus the provider's emit stamp of the first token, as in
``benchmarks/local_load.py``. AgentVM coalesces later tokens into 250 ms frames (by design: each
frame is a billed message on AWS); LangGraph sends every token, so only first-token latency and
throughput are compared.

Both servers run on the same CPU (the server's of ``benchmarks/local_load.py``), the fake provider
and both load clients on the other, so each server's figures are its own.

Run: ``./dev python -m benchmarks.peer_langgraph [--clients 10 100 1000]``
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

from benchmarks.local_load import RIG_CPUS, SERVER_CPUS, STANDARD_TURN, _pct, _phase
from benchmarks.procs import Proc, avm_serve, fake_llm, free_port, pin_self, pinned, raise_fd_limit

ROOT = Path(__file__).resolve().parent.parent
PEER_DIR = ROOT / "benchmarks" / "peer"
LG_VENV = ROOT / ".bench" / "lgvenv"
LG_PACKAGES = [
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langchain-anthropic==1.7.7",
    "langchain==1.5.2",  # create_agent and its middleware (benchmarks/prompt_caching.py)
]
LG_PYTHON = LG_VENV / "bin" / "python"


def peer_venv_ready() -> bool:
    """Whether the LangGraph venv exists with every pinned package (langchain came later)."""
    if not LG_PYTHON.exists():
        return False
    probe = [str(LG_PYTHON), "-c", "import langchain.agents, langchain_anthropic, langgraph_api"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def ensure_peer_venv() -> Path:
    if not peer_venv_ready():
        print("creating the LangGraph venv (one time)...", file=sys.stderr)
        if not LG_PYTHON.exists():
            subprocess.run([sys.executable, "-m", "venv", str(LG_VENV)], check=True)
        subprocess.run([str(LG_PYTHON), "-m", "pip", "install", "-q", *LG_PACKAGES], check=True)
    return LG_PYTHON


def _langgraph_phase(python: Path, fake_url: str, n: int) -> dict[str, object]:
    """LangGraph's server on the server's CPU, its load client (in the peer's venv) on the rig's."""
    port = free_port()
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "bench",
        "ANTHROPIC_BASE_URL": fake_url,
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
    }
    cmd = [str(python.parent / "langgraph"), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    cmd += ["--n-jobs-per-worker", str(max(n, 10))]
    with tempfile.TemporaryDirectory() as workdir:
        # langgraph dev writes its in-memory state next to the config: keep it out of the repo
        for name in ("graph.py", "langgraph.json"):
            (Path(workdir) / name).write_text((PEER_DIR / name).read_text())
        server = subprocess.Popen(
            pinned(cmd, SERVER_CPUS),
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            proc = Proc(server, f"http://127.0.0.1:{port}")
            deadline = time.monotonic() + 60
            while subprocess.run(["curl", "-sf", f"{proc.url}/ok"], capture_output=True).returncode != 0:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("langgraph dev did not start")
                time.sleep(0.3)
            cpu0 = proc.cpu_seconds()
            out = subprocess.run(
                pinned([str(python), str(PEER_DIR / "lg_client.py"), proc.url, str(n)], RIG_CPUS),
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
            )
            cpu = proc.cpu_seconds() - cpu0
        finally:
            server.terminate()
            server.wait(10)
    data = json.loads(out.stdout)
    ok = [r for r in data["results"] if r["tokens"]]
    firsts = [r["first"] for r in ok if r["first"] is not None]
    return {
        "clients": n,
        "turns_ok": len(ok),
        "first_delta_added_ms_p50": round(_pct(firsts, 50), 2),
        "first_delta_added_ms_p99": round(_pct(firsts, 99), 2),
        "token_lag_ms_p50": round(statistics.median(x for r in ok for x in r["lags"]), 1),
        "turns_per_s": round(len(ok) / data["wall"], 1),
        "server_cpu_ms_per_turn": round(cpu / max(len(ok), 1) * 1000, 2),
    }


async def run(clients: list[int]) -> list[dict[str, object]]:
    raise_fd_limit()
    python = ensure_peer_venv()
    pin_self(RIG_CPUS)
    rows = []
    with fake_llm(*STANDARD_TURN, "--stamp-tokens", cpus=RIG_CPUS) as fake:
        for n in clients:
            with (
                tempfile.TemporaryDirectory() as data_dir,
                avm_serve(
                    Path(data_dir),
                    {"ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": fake.url},
                    cpus=SERVER_CPUS,
                ) as server,
            ):
                ours = await _phase(server.url, n, server)
            theirs = _langgraph_phase(python, fake.url, n)
            row = {
                "clients": n,
                "agentvm": {k: ours[k] for k in theirs if k in ours},
                "langgraph": theirs,
                "added_latency_ratio_p50": round(
                    float(theirs["first_delta_added_ms_p50"]) / float(ours["first_delta_added_ms_p50"]), 2
                ),
                "throughput_ratio": round(float(ours["turns_per_s"]) / float(theirs["turns_per_s"]), 2),
            }
            print(json.dumps(row))
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = asyncio.run(run(args.clients))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
