"""How a streamed reply reaches a client through ``avm serve``: live (the default) and economy.

The standard turn's model stream (``avm fake-llm``, Anthropic's wire format: the first token after
0.5 s, then 35 tokens a second, 200 in all) goes through a real ``avm serve`` (its default flush
windows) to three clients of the SDK (``agentvm.client``), one turn at a time:

* **plain**: ``batch=False``, one frame per WebSocket message, as every AgentX client;
* **sdk live**: the SDK's default, batched frames (``?frames=batch``) on the live cadence;
* **sdk economy**: ``cadence="economy"`` (``?frames=batch&cadence=economy``).

Every WebSocket message the client reads is stamped as it arrives. Per client: the first text's
latency (from the send to the first message with text), the gaps between consecutive messages
carrying text (median, p95, max over every turn), and the messages per turn (all a turn's
messages: its answer, its frames).

Run: ``./dev python -m benchmarks.live_cadence [--turns 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.procs import avm_serve, fake_llm

STANDARD_TURN = ["--ttft-ms", "500", "--tokens-per-second", "35", "--reply-tokens", "200"]
CLIENTS: list[tuple[str, dict[str, Any]]] = [
    ("plain (batch=False)", {"batch": False}),
    ("sdk live (default)", {}),
    ("sdk economy (cadence='economy')", {"cadence": "economy"}),
]


@dataclass
class Arrivals:
    first_text_s: list[float] = field(default_factory=list)  # per turn: send -> first text
    gaps_s: list[float] = field(default_factory=list)  # every turn's gaps between text messages
    messages: list[int] = field(default_factory=list)  # per turn


async def _measure(url: str, options: dict[str, Any], turns: int) -> Arrivals:
    from agentvm.client import AgentVMClient

    out = Arrivals()
    stamps: list[tuple[float, bool]] = []  # (arrival, carries text)
    async with AgentVMClient.connect(url, **options) as client:
        on_raw = client._on_raw

        async def stamped(raw: Any) -> None:  # every WebSocket message, as the client reads it
            stamps.append(
                (time.monotonic(), '"text_delta"' in (raw if isinstance(raw, str) else raw.decode()))
            )
            await on_raw(raw)

        client._on_raw = stamped  # type: ignore[method-assign]
        image = await client.create_image("bench", name="cadence")
        for _ in range(turns):
            stamps.clear()
            sent = time.monotonic()
            turn = await client.send(image.imageId, "Tell me a story.")
            assert turn.end_reason == "completed", turn.error
            text_at = [at for at, has_text in stamps if has_text]
            out.first_text_s.append(text_at[0] - sent)
            out.gaps_s += [b - a for a, b in zip(text_at, text_at[1:], strict=False)]
            out.messages.append(len(stamps))
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def render(results: list[tuple[str, Arrivals]], turns: int) -> str:
    lines = [
        f"{turns} turns per client; seconds. First text: from the send; gaps: between consecutive "
        "WebSocket messages carrying text.\n",
        "| client | first text (median) | gap median | gap p95 | gap max | messages per turn |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, a in results:
        lines.append(
            f"| {name} | {statistics.median(a.first_text_s):.3f} | {statistics.median(a.gaps_s):.3f} "
            f"| {_p(a.gaps_s, 0.95):.3f} | {max(a.gaps_s):.3f} | {statistics.median(a.messages):g} |"
        )
    return "\n".join(lines)


async def run(turns: int) -> list[tuple[str, Arrivals]]:
    results = []
    with (
        fake_llm(*STANDARD_TURN) as fake,
        tempfile.TemporaryDirectory() as data_dir,
        avm_serve(
            Path(data_dir),
            {
                "ANTHROPIC_API_KEY": "bench",
                "ANTHROPIC_BASE_URL": fake.url,
                "AVM_DEFAULT_MODEL": "anthropic/claude-haiku-4-5",
            },
        ) as server,
    ):
        for name, options in CLIENTS:
            results.append((name, await _measure(server.url, options, turns)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=5, help="turns per client")
    args = parser.parse_args()
    print(render(asyncio.run(run(args.turns)), args.turns))


if __name__ == "__main__":
    main()
