"""When a batched client (``?frames=batch``) sees a reply's text: the latency price of its cadence.

The cost meter (``benchmarks/cost_meter.py``) counts what a batched client's turn costs in
WebSocket messages; this measures what it costs in latency. The standard turn's model stream
(``benchmarks/moto_turns.py``: the first token after 0.5 s, then 35 tokens a second, 200 in all)
is played in real time through the worker's sink (``streaming/sink.py``) with the deployed flush
windows (template.yaml's ``FlushMs``/``FlushMaxMs``) to a plain AgentX v1 subscriber and a batched
one, and each WebSocket message's arrival is stamped. For each cadence of the batched client (live:
``AVM_BATCH_FLUSH_MS``/``_MAX_MS``; economy: ``AVM_ECONOMY_FLUSH_MS``/``_MAX_MS``): the messages of the
turn, when the first and the second text chunk arrive (seconds after the model's first token), and
the longest gap between two text chunks.

Run: ``./dev python -m benchmarks.batch_cadence``
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.events import EventContext
from agentvm.ports import ConnectionInfo
from agentvm.runtime import SystemClock
from agentvm.streaming.fanout import Fanout
from agentvm.streaming.sink import CoalescingSink
from benchmarks.moto_turns import template_flush_settings

FIRST_TOKEN_S = 0.5
TOKENS_PER_S = 35.0
OUTPUT_TOKENS = 200
# (label, first window ms, longest window ms): the live cadence (the default) and the economy one
# (?cadence=economy); benchmarks/live_cadence.py measures both through avm serve and the SDK
CADENCES = [
    ("live: AVM_BATCH_FLUSH_MS 250", 250, 250),
    ("economy: AVM_ECONOMY_FLUSH_MS 2000", 2000, 2000),
]


@dataclass
class Arrivals:
    messages: int
    text_at: list[float]  # seconds after the model's first token, one per message carrying text


class _Stamps:
    def __init__(self, origin: list[float]) -> None:
        self.origin = origin
        self.messages: list[tuple[float, str]] = []

    async def receive(self, payload: str) -> None:
        self.messages.append((asyncio.get_running_loop().time() - self.origin[0], payload))

    def arrivals(self) -> Arrivals:
        return Arrivals(len(self.messages), [at for at, m in self.messages if '"text_delta"' in m])


async def play(batch_first_ms: int, batch_max_ms: int) -> tuple[Arrivals, Arrivals]:
    windows = template_flush_settings()
    connections, push = InMemoryConnections(), LocalPush()
    origin = [0.0]
    plain, batched = _Stamps(origin), _Stamps(origin)
    for conn, sub, batch in (("plain", plain, False), ("batched", batched, True)):
        await connections.register(ConnectionInfo(conn, "t", 0, batch=batch))
        await connections.subscribe(conn, "s")
        push.attach(conn, sub.receive)
    sink = CoalescingSink(
        session_id="s",
        context=EventContext(containerId="c", imageId="i", agentId="a", sessionId="s"),
        fanout=Fanout(connections, push),
        clock=SystemClock(),
        flush_s=windows["flush_ms"] / 1000,
        flush_max_s=windows["flush_max_ms"] / 1000,
        subscriber_refresh_s=0,
        batch_flush_s=batch_first_ms / 1000,
        batch_flush_max_s=batch_max_ms / 1000,
    )
    loop = asyncio.get_running_loop()
    sink.emit_frame({"type": "message_persisted", "data": {}, "source": "session"}, linger=True)
    sink.emit("message_start", {"messageId": "m"})
    sink.emit("conversation_start", {"messageId": "m"})
    await asyncio.sleep(FIRST_TOKEN_S)
    origin[0] = start = loop.time()
    for i in range(OUTPUT_TOKENS):
        await asyncio.sleep(max(0.0, start + i / TOKENS_PER_S - loop.time()))
        sink.text(f" t{i}")
    sink.hold()
    sink.emit("message_stop", {"stopReason": "end_turn"})
    sink.emit("conversation_end", {"reason": "completed"})
    sink.release()
    await sink.aclose()
    return plain.arrivals(), batched.arrivals()


def main() -> None:
    print("| client | messages per turn | first text at | second text chunk at | longest gap between text |")
    print("|---|---:|---:|---:|---:|")
    plain_row = None
    for label, first, longest in CADENCES:
        plain, batched = asyncio.run(play(first, longest))
        if plain_row is None:
            plain_row = plain
            print(_row("AgentX v1 (plain)", plain))
        print(_row(f"batched, {label}", batched))


def _row(label: str, a: Arrivals) -> str:
    gaps = [b - x for x, b in zip(a.text_at, a.text_at[1:], strict=False)]
    second = f"{a.text_at[1]:.2f} s" if len(a.text_at) > 1 else "-"
    return f"| {label} | {a.messages} | {a.text_at[0]:.2f} s | {second} | {max(gaps, default=0.0):.2f} s |"


if __name__ == "__main__":
    main()
