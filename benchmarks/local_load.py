"""Local latency and concurrency: ``avm serve`` + the fake provider streaming the standard turn.

N WebSocket clients each create an image and run one standard turn at the same time. The fake
provider stamps every token with its emit time, so the client measures, per token, how long the
runtime took to deliver it. Definitions (all in milliseconds):

- first-delta added latency: receipt of the first ``text_delta`` minus the provider's emit time
  of the first token. This is the runtime's own overhead on time-to-first-token.
- token delivery lag: receipt minus emit, for every token. Includes the coalescing window by
  design (a token may wait up to ``AVM_FLUSH_MS`` to be merged with the next ones).
- inter-delta lag: for every merged frame after the first, receipt minus the moment it was due
  (emit of its first token + the flush window), floored at 0: the delay the runtime adds beyond
  its coalescing design.
- turn start: from sending ``message_send`` to the provider's first token, minus the provider's
  own time to first token (500 ms): the gateway, the queue, the turn's set-up and the request,
  before the provider's clock starts (the rest of the user's time to first token).

How the 2 cores are split: the server runs alone on CPU 0 (``taskset``); the fake provider and this
load client share CPU 1, so the server's figures are its own. The rig on one core is the weaker
side at 1,000 streams (35,000 SSE events a second to write, and 1,000 sockets to read), so the
server's own CPU per token (``server_cpu_us_per_token``: its CPU time over the tokens its clients
received) is reported as well: it is comparable across splits and machines.

Run: ``./dev python -m benchmarks.local_load [--clients 10 100 1000] [--profile DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentvm.client import AgentVMClient
from benchmarks.procs import Proc, avm_serve, fake_llm, pin_self, raise_fd_limit

if TYPE_CHECKING:
    from collections.abc import Coroutine

T = TypeVar("T")
FLUSH_MS = 250
TTFT_S = 0.5  # the standard turn's --ttft-ms
STANDARD_TURN_S = TTFT_S + 200 / 35  # to its last token
SERVER_CPUS, RIG_CPUS = ("0", "1") if (os.cpu_count() or 1) >= 2 else (None, None)
STANDARD_TURN = [
    "--ttft-ms",
    "500",
    "--tokens-per-second",
    "35",
    "--reply-tokens",
    "200",
    "--input-tokens",
    "500",
]


@dataclass
class TurnSample:
    first_delta_ms: float | None = None
    start_ms: float | None = None  # from sending message_send to the provider's first token, minus its TTFT
    token_lags_ms: list[float] = field(default_factory=list)
    frame_lags_ms: list[float] = field(default_factory=list)
    flush_lags_ms: list[float] = field(default_factory=list)  # the part of frame_lags before the send
    delivery_ms: list[float] = field(default_factory=list)  # made by the server -> received here
    tokens: int = 0
    ok: bool = False


def _stamps(text: str) -> list[float]:
    return [float(w[1:]) for w in text.split() if w.startswith("@")]


async def _one_turn(client: AgentVMClient, image_id: str, sample: TurnSample) -> None:
    sent = time.time()
    await client.request("message_send", imageId=image_id, content="standard turn " * 100, check=True)
    first = True
    async for frame in client.turn_events(timeout=120):
        if frame["type"] == "text_delta":
            now = time.time()
            stamps = _stamps(frame["data"]["text"])
            if not stamps:
                continue
            sample.tokens += len(stamps)
            sample.token_lags_ms.extend((now - s) * 1000 for s in stamps)
            if first:
                sample.first_delta_ms = (now - stamps[0]) * 1000
                sample.start_ms = (stamps[0] - TTFT_S - sent) * 1000
                first = False
            else:
                due = stamps[0] + FLUSH_MS / 1000
                sample.frame_lags_ms.append(max(0.0, (now - due) * 1000))
                # the frame's own timestamp is when the server made it (flushed the window)
                made = frame.get("timestamp", 0) / 1000
                sample.flush_lags_ms.append(max(0.0, (made - due) * 1000))
                sample.delivery_ms.append(max(0.0, (now - made) * 1000))
        elif frame["type"] == "conversation_end":
            sample.ok = True


async def _one_client(
    url: str,
    idx: int,
    connected: asyncio.Barrier,
    ready: asyncio.Barrier,
    samples: list[TurnSample],
    offset_s: float,
) -> None:
    """Connect, create an image, then run ``len(samples)`` turns back to back, the first one
    ``offset_s`` after every client is ready."""
    # one frame per message, as an AgentX v1 client gets them: the goal is about the standard
    # 250 ms stream (batched clients get text on their own, slower cadence: docs/cost.md)
    async with AgentVMClient.connect(url, batch=False) as client:
        await connected.wait()
        img = (
            await client.request(
                "image_create", containerId=f"user-{idx}", config={"name": "bench"}, check=True
            )
        )["record"]
        await ready.wait()
        if offset_s:
            await asyncio.sleep(offset_s)
        for sample in samples:
            await _one_turn(client, img["imageId"], sample)


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


async def _phase(
    url: str,
    n: int,
    server: Proc,
    sampler_period: float = 0.1,
    profile: Path | None = None,
    fake: Proc | None = None,
    mode: str = "burst",
) -> dict[str, object]:
    """``burst``: every client sends its turn at the same moment. ``steady``: client i starts
    i/n of a turn's length later and runs two turns back to back; only the second turns are
    measured, which all run while about n streams are live (the server's steady state, with a
    new turn starting every turn-length/n)."""
    steady = mode == "steady"
    turns = [[TurnSample() for _ in range(2 if steady else 1)] for _ in range(n)]
    connected, ready = asyncio.Barrier(n + 1), asyncio.Barrier(n + 1)
    rss_base = server.rss_bytes()
    tasks = [
        asyncio.create_task(
            _one_client(url, i, connected, ready, turns[i], STANDARD_TURN_S * i / n if steady else 0.0)
        )
        for i in range(n)
    ]
    await connected.wait()  # every client is connected: bare sockets
    await asyncio.sleep(0.5)
    rss_bare = server.rss_bytes()
    await ready.wait()  # every client has its image too: the idle state
    await asyncio.sleep(0.5)
    rss_idle = server.rss_bytes()
    spy = _py_spy(server.popen.pid, profile / f"server-{mode}-{n}.txt") if profile else None
    cpu0, t0 = server.cpu_seconds(), time.monotonic()
    rig0 = (fake.cpu_seconds() if fake else 0.0, time.process_time())
    peak = rss_idle
    # One future for all the clients: asyncio.wait over the thousand tasks themselves adds and
    # removes a callback on each of them every sampler period, which stalled this client's loop.
    everyone = asyncio.gather(*tasks, return_exceptions=True)
    cpu_series = [(time.monotonic(), cpu0)]
    while not everyone.done():
        await asyncio.wait({everyone}, timeout=sampler_period)
        peak = max(peak, server.rss_bytes())
        cpu_series.append((time.monotonic(), server.cpu_seconds()))
    for t in tasks:
        t.result()
    wall, cpu = time.monotonic() - t0, server.cpu_seconds() - cpu0
    fake_cpu = (fake.cpu_seconds() if fake else 0.0) - rig0[0]
    client_cpu = time.process_time() - rig0[1]
    if spy is not None:
        spy.send_signal(2)  # SIGINT: py-spy writes its flame graph and exits
        spy.wait(60)
    all_turns = [t for per_client in turns for t in per_client]
    ok = [t[-1] for t in turns if t[-1].ok]  # the measured turns: the last of each client
    firsts = [s.first_delta_ms for s in ok if s.first_delta_ms is not None]
    starts = [s.start_ms for s in ok if s.start_ms is not None]
    token_lags = [x for s in ok for x in s.token_lags_ms]
    frame_lags = [x for s in ok for x in s.frame_lags_ms]
    flush_lags = [x for s in ok for x in s.flush_lags_ms]
    deliveries = [x for s in ok for x in s.delivery_ms]
    tokens = sum(t.tokens for t in all_turns if t.ok)
    return {
        "mode": mode,
        "clients": n,
        "turns_ok": len(ok),
        "tokens_per_turn": statistics.median(s.tokens for s in ok) if ok else 0,
        "first_delta_added_ms_p50": round(_pct(firsts, 50), 2),
        "first_delta_added_ms_p99": round(_pct(firsts, 99), 2),
        "turn_start_ms_p50": round(_pct(starts, 50), 1),
        "turn_start_ms_p99": round(_pct(starts, 99), 1),
        "token_lag_ms_p50": round(_pct(token_lags, 50), 1),
        "token_lag_ms_p99": round(_pct(token_lags, 99), 1),
        "inter_delta_lag_ms_p50": round(_pct(frame_lags, 50), 2),
        "inter_delta_lag_ms_p99": round(_pct(frame_lags, 99), 2),
        # of which: the frame made late (the server's loop) / made on time, received late (the
        # server's send path, the kernel, this client): millisecond timestamps, so +-1 ms
        "flush_lag_ms_p99": round(_pct(flush_lags, 99), 1),
        "delivery_ms_p50": round(_pct(deliveries, 50), 1),
        "delivery_ms_p99": round(_pct(deliveries, 99), 1),
        "turns_per_s": round(sum(t.ok for t in all_turns) / wall, 1),
        "wall_s": round(wall, 2),
        # CPU over every turn of the phase (in steady mode, the ramp's first turns too)
        "server_cpu_ms_per_turn": round(cpu / max(sum(t.ok for t in all_turns), 1) * 1000, 2),
        "server_cpu_us_per_token": round(cpu / max(tokens, 1) * 1e6, 1),
        "rss_per_idle_connection_kb": round((rss_idle - rss_base) / n / 1024, 1),
        "rss_per_bare_connection_kb": round((rss_bare - rss_base) / n / 1024, 1),
        "rss_per_active_turn_kb": round((peak - rss_idle) / n / 1024, 1),
        # the rig's own load over the turns (100 = one core busy): a saturated rig delays tokens
        "server_cpu_pct": round(cpu / wall * 100),
        "server_cpu_pct_peak_1s": _peak_share(cpu_series, 1.0),
        "fake_provider_cpu_pct": round(fake_cpu / wall * 100) if fake else None,
        "load_client_cpu_pct": round(client_cpu / wall * 100),
    }


def _peak_share(series: list[tuple[float, float]], window_s: float) -> int:
    """The server's busiest ``window_s``: its CPU share (100 = one core) in that window."""
    best = 0.0
    j = 0
    for i, (t, c) in enumerate(series):
        while series[j][0] < t - window_s and j < i:
            j += 1
        if t - series[j][0] >= window_s * 0.9:
            best = max(best, (c - series[j][1]) / (t - series[j][0]))
    return round(best * 100)


async def _until_workers_listen(data_dir: Path, workers: int) -> None:
    for _ in range(300):
        if len(list((data_dir / "workers").glob("*.sock"))) >= workers:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the workers did not start")


def run_client(coro: Coroutine[Any, Any, T]) -> T:
    """Run the load client on uvloop when it is installed (it is, with ``avm serve``): the client
    is part of the rig, and the less CPU it takes from the rig's core, the less of its own delay
    it adds to the figures (the LangGraph comparison keeps asyncio's loop for both clients)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling the server: collapsed stacks in ``out`` (for flamegraph.pl or speedscope)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "py-spy",
        "record",
        "--pid",
        str(pid),
        "--output",
        str(out),
        "--format",
        "raw",
        "--rate",
        "200",
        "--nonblocking",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def run(
    clients: list[int],
    *,
    server_cpus: str | None = SERVER_CPUS,
    rig_cpus: str | None = RIG_CPUS,
    profile: Path | None = None,
    env: dict[str, str] | None = None,
    turn: list[str] = STANDARD_TURN,
    modes: tuple[str, ...] = ("burst",),
    workers: int = 1,
) -> list[dict[str, object]]:
    raise_fd_limit()
    pin_self(rig_cpus)
    results = []
    with fake_llm(*turn, "--stamp-tokens", cpus=rig_cpus) as fake:
        for mode, n in [(m, n) for m in modes for n in clients]:
            with (
                tempfile.TemporaryDirectory() as data_dir,
                avm_serve(
                    Path(data_dir),
                    {
                        "ANTHROPIC_API_KEY": "bench",
                        "ANTHROPIC_BASE_URL": fake.url,
                        "AVM_FLUSH_MS": str(FLUSH_MS),
                        "AVM_WORKERS": str(workers),
                        **(env or {}),
                    },
                    cpus=server_cpus,
                ) as server,
            ):
                if workers > 1:
                    await _until_workers_listen(Path(data_dir), workers)
                result = await _phase(server.url, n, server, profile=profile, fake=fake, mode=mode)
                result["workers"] = workers
                print(json.dumps(result))
                results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--profile", type=Path, help="py-spy the server into DIR/server-N.txt (collapsed stacks)"
    )
    parser.add_argument("--server-cpus", default=SERVER_CPUS, help="taskset list for the server")
    parser.add_argument("--rig-cpus", default=RIG_CPUS, help="for the fake provider and this client")
    parser.add_argument("--env", nargs="*", default=[], help="extra KEY=VALUE for the server")
    parser.add_argument("--modes", nargs="+", default=["burst"], choices=["burst", "steady"])
    parser.add_argument("--workers", type=int, default=1, help="avm serve --workers (docs/scaling.md)")
    parser.add_argument(
        "--turn", default="", help='fake-llm flags over the standard turn\'s, e.g. --turn="--reply-tokens 20"'
    )
    args = parser.parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    results = run_client(
        run(
            args.clients,
            server_cpus=args.server_cpus,
            rig_cpus=args.rig_cpus,
            profile=args.profile,
            env=env,
            turn=[*STANDARD_TURN, *args.turn.split()],
            modes=tuple(args.modes),
            workers=args.workers,
        )
    )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
