"""The coalescing sink: first delta at once, later text merged per window, the window growing."""

from __future__ import annotations

import asyncio
import json

from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.events import EventContext
from agentvm.ports import ConnectionInfo, Subscription
from agentvm.runtime import SystemClock
from agentvm.streaming.fanout import Fanout
from agentvm.streaming.sink import CoalescingSink


async def _text_frames(flush_s: float, flush_max_s: float, tokens: int, interval_s: float) -> list[str]:
    connections, push, got = InMemoryConnections(), LocalPush(), []
    await connections.register(ConnectionInfo("c", "t", 0))
    await connections.subscribe("c", "s")

    async def receive(payload: str) -> None:
        got.append(json.loads(payload))

    push.attach("c", receive)
    sink = CoalescingSink(
        session_id="s",
        context=EventContext(containerId="c", imageId="i", agentId="a", sessionId="s"),
        fanout=Fanout(connections, push),
        clock=SystemClock(),
        flush_s=flush_s,
        flush_max_s=flush_max_s,
        subscriber_refresh_s=0,
    )
    for i in range(tokens):
        sink.text(f" t{i}")
        await asyncio.sleep(interval_s)
    await sink.aclose()
    return [f["data"]["text"] for f in got if f["type"] == "text_delta"]


async def test_fixed_window_merges_text_and_loses_nothing():
    texts = await _text_frames(0.05, 0.0, 40, 0.005)  # 0.2 s of tokens, 50 ms windows
    assert "".join(texts) == "".join(f" t{i}" for i in range(40))
    assert texts[0] == " t0"  # the first delta goes out on its own, at once
    assert 3 <= len(texts) <= 8


async def test_growing_window_sends_fewer_frames_for_the_same_text():
    fixed = await _text_frames(0.02, 0.0, 60, 0.005)
    growing = await _text_frames(0.02, 0.16, 60, 0.005)
    assert "".join(growing) == "".join(fixed)
    assert len(growing) < len(fixed)


class LaggingIndex(InMemoryConnections):
    """Subscribers as AWS's index shows them: ``visible`` only once the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.visible: list[Subscription] = []

    async def subscriptions(self, session_id: str) -> list[Subscription]:
        return list(self.visible)


async def test_a_subscriber_found_late_or_joining_mid_turn_gets_the_turn_from_its_first_frame():
    """A sender the index hid at first, and one that subscribed mid-turn, both get the turn from its
    first frame: never a message's text without its message_start (the protocol's order)."""
    connections, push = LaggingIndex(), LocalPush()
    got: dict[str, list[dict]] = {"before": [], "after": [], "cursor": []}
    for conn, frames in got.items():
        await connections.register(ConnectionInfo(conn, "t", 0))

        async def receive(payload: str, frames: list[dict] = frames) -> None:
            frames.append(json.loads(payload))

        push.attach(conn, receive)
    sink = CoalescingSink(
        session_id="s",
        context=EventContext(containerId="c", imageId="i", agentId="a", sessionId="s"),
        fanout=Fanout(connections, push),
        clock=SystemClock(),
        flush_s=0.01,
        subscriber_refresh_s=0,
    )
    sink.emit("message_start", {"messageId": "m", "model": "x"})
    sink.text("one")
    await asyncio.sleep(0.05)  # sent to nobody: the index does not show them yet
    connections.visible = [
        Subscription("before", subscribed_at=1_000),
        Subscription("after", subscribed_at=1_001),
        Subscription("cursor", after_seq=0, subscribed_at=1_001),  # a cursor still wins
    ]
    sink.text(" two")
    await sink.aclose()

    def texts(conn: str) -> str:
        return "".join(f["data"]["text"] for f in got[conn] if f["type"] == "text_delta")

    assert got["before"][0]["type"] == "message_start" and texts("before") == "one two"
    assert got["cursor"][0]["type"] == "message_start" and texts("cursor") == "one two"
    assert got["after"][0]["type"] == "message_start" and texts("after") == "one two"


async def test_an_aborted_sink_sends_nothing_more_not_even_what_was_ready():
    """An attempt cut off (its node stops, or lost the turn's lease) must not go on streaming from
    its sender task while another node runs the turn's next attempt."""
    connections, push, got = InMemoryConnections(), LocalPush(), []
    await connections.register(ConnectionInfo("c", "t", 0))
    await connections.subscribe("c", "s")
    entered = asyncio.Event()

    async def slow_socket(payload: str) -> None:
        entered.set()
        await asyncio.sleep(0.05)
        got.append(json.loads(payload))

    push.attach("c", slow_socket)
    sink = CoalescingSink(
        session_id="s",
        context=EventContext(containerId="c", imageId="i", agentId="a", sessionId="s"),
        fanout=Fanout(connections, push),
        clock=SystemClock(),
        flush_s=0.02,
        subscriber_refresh_s=0,
    )
    sink.text("first")  # goes out at once (the sender takes it)
    await entered.wait()
    for i in range(5):  # ready behind the slow send, and text waiting on the flush timer
        sink.emit("tool_use_start", {"i": i})
        sink.text(f" t{i}")
    await sink.abort()
    sent = len(got)
    await asyncio.sleep(0.3)  # past every flush window
    assert len(got) == sent <= 1
    sink.release()  # a late call after the abort starts no sender either
    await asyncio.sleep(0.1)
    assert len(got) == sent
