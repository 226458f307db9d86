"""Batched frames (``?frames=batch``, streaming/batching.py): a client that declares the mode gets
exactly the frames a plain AgentX client gets, in the same order with the same seqs, in fewer
WebSocket messages; a client that does not declare it keeps one frame per message."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.errors import BadRequest
from agentvm.events import MAX_BATCH_BYTES, EventContext
from agentvm.ports import ConnectionInfo
from agentvm.runtime import SystemClock
from agentvm.streaming.batching import asked_cadence, pack, unpack, wants_batches
from agentvm.streaming.fanout import Fanout
from agentvm.streaming.sink import CoalescingSink
from tests.harness import Harness

WORDS = " ".join(f"w{i}" for i in range(60))


# -- the mode's declaration and its message format -------------------------------------------------


def test_the_upgrade_declares_batches_with_frames_batch_and_nothing_else():
    assert wants_batches({"frames": "batch"}) is True
    assert wants_batches({}) is False
    assert wants_batches({"frames": "single", "token": "x"}) is False
    with pytest.raises(BadRequest, match="unknown frames mode"):
        wants_batches({"frames": "all"})


def test_frames_are_packed_into_json_arrays_in_order_and_a_lone_frame_stays_itself():
    frames = [json.dumps({"type": "t", "seq": i}) for i in range(5)]
    (message,) = pack(frames)
    assert json.loads(message) == [json.loads(f) for f in frames]
    assert unpack(message) == frames
    assert pack(frames[:1]) == frames[:1]
    assert unpack(frames[0]) == frames[:1]


def test_an_array_never_passes_one_billed_unit_and_a_big_frame_goes_alone():
    small = [json.dumps({"type": "t", "data": "x" * 10_000, "seq": i}) for i in range(7)]
    big = json.dumps({"type": "big", "data": "y" * 40_000})
    messages = pack([*small[:3], big, *small[3:]])
    assert all(len(m.encode()) <= MAX_BATCH_BYTES for m in messages if m != big)
    assert big in messages
    assert [f for m in messages for f in unpack(m)] == [
        json.dumps(json.loads(f)) for f in [*small[:3], big, *small[3:]]
    ]


# -- the sink: one stream, a plain and a batched subscriber ---------------------------------------


class _Subscriber:
    def __init__(self) -> None:
        self.messages: list[tuple[float, str]] = []

    async def receive(self, payload: str) -> None:
        self.messages.append((asyncio.get_running_loop().time(), payload))

    @property
    def frames(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for _, message in self.messages:
            decoded = json.loads(message)
            out.extend(decoded if isinstance(decoded, list) else [decoded])
        return out


async def _sink_with(
    plain: _Subscriber,
    batched: _Subscriber,
    *,
    cadence: str = "live",
    economy: _Subscriber | None = None,
    live: _Subscriber | None = None,
    **windows: float,
) -> CoalescingSink:
    """A sink with a plain and a batched subscriber (no cadence asked: the turn's ``cadence``), and
    batched ones that asked for ``economy`` or ``live`` at the upgrade."""
    connections, push = InMemoryConnections(), LocalPush()
    subscribers = [("plain", plain, False, None), ("batched", batched, True, None)]
    subscribers += [(name, sub, True, name) for name, sub in (("economy", economy), ("live", live)) if sub]
    for conn, sub, batch, asked in subscribers:
        await connections.register(ConnectionInfo(conn, "t", 0, batch=batch, cadence=asked))
        await connections.subscribe(conn, "s")
        push.attach(conn, sub.receive)
    return CoalescingSink(
        session_id="s",
        context=EventContext(containerId="c", imageId="i", agentId="a", sessionId="s"),
        fanout=Fanout(connections, push),
        clock=SystemClock(),
        subscriber_refresh_s=0,
        cadence=cadence,
        **windows,
    )


async def _play_turn(sink: CoalescingSink, tokens: int, interval_s: float) -> None:
    """What a turn's worker does: the lingering first frame, the start, text, then the held end."""
    sink.emit_frame({"type": "message_persisted", "data": {}, "source": "session"}, linger=True)
    await asyncio.sleep(0.005)  # the worker reads and writes before the model starts
    sink.emit("message_start", {"messageId": "m"})
    sink.emit("conversation_start", {"messageId": "m"})
    await asyncio.sleep(0.005)  # the model's time to first token
    for i in range(tokens):
        sink.text(f" t{i}")
        await asyncio.sleep(interval_s)
    sink.hold()
    sink.emit("message_stop", {"stopReason": "end_turn"})
    sink.emit("conversation_end", {"reason": "completed"})
    await asyncio.sleep(0.005)  # the status write
    sink.release()
    await sink.aclose()


async def test_a_batched_subscriber_gets_every_frame_of_a_plain_one_in_far_fewer_messages():
    plain, batched = _Subscriber(), _Subscriber()
    sink = await _sink_with(
        plain, batched, flush_s=0.01, flush_max_s=0.02, batch_flush_s=0.01, batch_flush_max_s=0.16
    )
    await _play_turn(sink, tokens=80, interval_s=0.004)

    assert batched.frames == plain.frames  # the same frames, seqs and order
    assert [f["seq"] for f in plain.frames] == list(range(1, len(plain.frames) + 1))
    assert len(plain.messages) == len(plain.frames)  # one frame per message, as AgentX expects
    assert len(batched.messages) * 2 < len(plain.messages)
    first = json.loads(batched.messages[0][1])
    # The turn's opening frames waited for its first text, which went at once: one message.
    assert [f["type"] for f in first] == [
        "message_persisted",
        "message_start",
        "conversation_start",
        "text_delta",
        "conversation_responding",
    ]
    assert first[3]["data"]["text"] == " t0"
    last = json.loads(batched.messages[-1][1])
    assert [f["type"] for f in last][-3:] == ["text_delta", "message_stop", "conversation_end"]


async def test_a_batched_subscribers_first_window_is_the_batch_flush_setting_not_the_flush_window():
    plain, batched = _Subscriber(), _Subscriber()
    sink = await _sink_with(plain, batched, flush_s=0.01, batch_flush_s=0.15, batch_flush_max_s=0.15)
    await _play_turn(sink, tokens=100, interval_s=0.004)  # ~0.4 s of text

    assert batched.frames == plain.frames
    texts = [(at, m) for at, m in batched.messages if '"text_delta"' in m]
    first_at = texts[0][0]
    assert [f["type"] for f in json.loads(texts[0][1])][-2:] == ["text_delta", "conversation_responding"]
    # the first text at once, then one message per 0.15 s window (not 0.01 s doubling), the rest
    # with the end: a few messages where the plain client got dozens
    assert texts[1][0] - first_at >= 0.15 - 0.005
    assert all(b[0] - a[0] >= 0.15 - 0.005 for a, b in itertools.pairwise(texts[:-1]))
    assert len(texts) <= 5 < len(plain.messages) // 4


def test_by_default_a_batched_clients_text_is_live_and_economy_is_two_second_windows():
    from agentvm.config import Settings
    from agentvm.runtime import turn_settings

    turns = turn_settings(Settings())
    assert turns.stream_cadence == "live"
    assert (turns.batch_flush_s, turns.batch_flush_max_s) == (0.25, 0.25)  # live: as plain clients
    assert (turns.economy_flush_s, turns.economy_flush_max_s) == (2.0, 2.0)
    assert turns.flush_s == 0.25  # plain AgentX v1 clients keep theirs


def test_the_upgrade_asks_for_a_cadence_only_with_batched_frames():
    assert asked_cadence({"frames": "batch"}) is None
    assert asked_cadence({"frames": "batch", "cadence": "economy"}) == "economy"
    assert asked_cadence({"frames": "batch", "cadence": "live"}) == "live"
    with pytest.raises(BadRequest, match="unknown cadence"):
        asked_cadence({"frames": "batch", "cadence": "slow"})
    with pytest.raises(BadRequest, match="add frames=batch"):
        asked_cadence({"cadence": "economy"})


def _text_gaps(sub: _Subscriber) -> list[float]:
    at = [t for t, m in sub.messages if '"text_delta"' in m]
    return [b - a for a, b in itertools.pairwise(at)]


async def test_live_and_economy_subscribers_of_one_turn_each_get_their_cadence():
    plain, live, economy = _Subscriber(), _Subscriber(), _Subscriber()
    sink = await _sink_with(
        plain,
        live,
        economy=economy,
        flush_s=0.02,
        batch_flush_s=0.02,
        batch_flush_max_s=0.02,
        economy_flush_s=0.2,
        economy_flush_max_s=0.2,
    )
    await _play_turn(sink, tokens=120, interval_s=0.005)  # ~0.6 s of text

    assert live.frames == plain.frames == economy.frames  # the same frames, in fewer messages
    live_gaps, economy_gaps = _text_gaps(live), _text_gaps(economy)
    assert max(live_gaps[:-1]) < 0.2 - 0.005  # live: no window of the economy's length
    assert all(gap >= 0.2 - 0.005 for gap in economy_gaps[:-1])  # economy: one message per window
    assert len(economy.messages) < len(live.messages)


async def test_a_turns_economy_cadence_paces_connections_that_asked_for_none_but_not_those_that_did():
    plain, batched, asked_live = _Subscriber(), _Subscriber(), _Subscriber()
    sink = await _sink_with(
        plain,
        batched,
        live=asked_live,
        cadence="economy",  # the image's or tenant's choice (turns/worker.py)
        flush_s=0.02,
        batch_flush_s=0.02,
        batch_flush_max_s=0.02,
        economy_flush_s=0.2,
        economy_flush_max_s=0.2,
    )
    await _play_turn(sink, tokens=120, interval_s=0.005)

    assert all(gap >= 0.2 - 0.005 for gap in _text_gaps(batched)[:-1])
    assert max(_text_gaps(asked_live)[:-1]) < 0.2 - 0.005


async def test_the_last_text_waits_for_the_end_and_goes_with_it_for_every_subscriber():
    plain, batched = _Subscriber(), _Subscriber()
    sink = await _sink_with(plain, batched, flush_s=0.5)
    await _play_turn(sink, tokens=3, interval_s=0.001)  # all text after the first within one window
    types = [f["type"] for f in plain.frames]
    assert types[-3:] == ["text_delta", "message_stop", "conversation_end"]
    assert "".join(f["data"]["text"] for f in plain.frames if f["type"] == "text_delta") == " t0 t1 t2"
    assert json.loads(batched.messages[-1][1])[0]["data"]["text"] == " t1 t2"


async def test_text_waiting_for_a_batched_subscriber_goes_out_when_its_window_ends():
    plain, batched = _Subscriber(), _Subscriber()
    sink = await _sink_with(plain, batched, flush_s=0.01, batch_flush_s=0.01, batch_flush_max_s=0.08)
    sink.emit("message_start", {"messageId": "m"})
    for i in range(30):  # text for ~0.15 s: the batched window has grown to its maximum
        sink.text(f" t{i}")
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.3)  # then the model stalls: no frame comes to carry the text
    sent = [f for f in batched.frames if f["type"] == "text_delta"]
    assert sent == [f for f in plain.frames if f["type"] == "text_delta"]
    await sink.aclose()


async def test_closing_the_sink_sends_a_batched_subscriber_what_waited_for_its_window():
    plain, batched = _Subscriber(), _Subscriber()
    sink = await _sink_with(plain, batched, flush_s=0.005, batch_flush_max_s=5.0)
    sink.emit("message_start", {"messageId": "m"})
    for i in range(40):
        sink.text(f" t{i}")
        await asyncio.sleep(0.002)
    await sink.aclose()  # no terminal frame (e.g. a failed attempt): nothing is left behind
    assert batched.frames == plain.frames
    assert "".join(f["data"]["text"] for f in batched.frames if f["type"] == "text_delta") == "".join(
        f" t{i}" for i in range(40)
    )


async def test_a_messages_opening_frames_wait_for_its_text_at_most_the_economy_window():
    plain, batched = _Subscriber(), _Subscriber()
    # live text every 0.01 s, but the opening frames (no text) wait up to the economy window
    sink = await _sink_with(plain, batched, flush_s=0.01, economy_flush_s=0.1, economy_flush_max_s=0.1)
    sink.emit("message_start", {"messageId": "m"})
    sink.emit("conversation_start", {"messageId": "m"})
    await asyncio.sleep(0.03)
    assert len(plain.messages) == 2 and batched.messages == []  # a slow first token: they wait...
    await asyncio.sleep(0.2)
    assert batched.frames == plain.frames  # ...a window at most
    await sink.aclose()


async def test_a_lingering_frame_goes_out_after_one_window_if_nothing_follows():
    plain, batched = _Subscriber(), _Subscriber()
    sink = await _sink_with(plain, batched, flush_s=0.02)
    sink.emit_frame({"type": "message_persisted", "data": {}, "source": "session"}, linger=True)
    await asyncio.sleep(0.005)
    assert plain.messages == []  # waiting for company
    await asyncio.sleep(0.1)
    assert [f["type"] for f in plain.frames] == ["message_persisted"]
    await sink.aclose()
    assert batched.frames == plain.frames


# -- through the gateway and a worker (the local host's wiring) ------------------------------------


async def _two_clients(harness: Harness):
    plain = await harness.client()
    batched = await harness.client(batch=True)
    img = (await plain.request("image_create", containerId="u", config={"name": "A"}))["record"]
    await plain.subscribe(img["sessionId"])
    await batched.subscribe(img["sessionId"])
    return plain, batched, img


async def test_a_turn_reaches_a_batched_and_a_plain_client_alike(tmp_path):
    harness = Harness(tmp_path)
    plain, batched, img = await _two_clients(harness)
    harness.model.word_delay_s = 0.004
    harness.model.add(WORDS)
    await plain.request("message_send", imageId=img["imageId"], content="go")
    await harness.run_turns()

    assert batched.turn_frames() == plain.turn_frames()
    assert plain.turn_frames()[-1]["type"] == "conversation_end"
    batched_messages = [m for m in batched.messages if m.startswith("[") or '"seq"' in m]
    assert len(batched_messages) * 2 < len(plain.turn_frames())


async def test_a_batched_client_resuming_gets_each_missed_turn_in_one_message(tmp_path):
    harness = Harness(tmp_path)
    plain, batched, img = await _two_clients(harness)
    for text in ("first reply", "second reply"):
        harness.model.add(text)
        await plain.request("message_send", imageId=img["imageId"], content="go")
        await harness.run_turns()

    late = await harness.client(batch=True)
    await late.subscribe(img["sessionId"], after_seq=0)
    turns = [json.loads(m) for m in late.messages]
    assert [(t[0]["type"], t[-1]["type"]) for t in turns] == [("message_persisted", "conversation_end")] * 2
    assert ["".join(f["data"]["text"] for f in t if f["type"] == "text_delta") for t in turns] == [
        "first reply",
        "second reply",
    ]
    assert {f["seq"] for f in late.turn_frames()} <= {f["seq"] for f in plain.turn_frames()}


async def test_a_failed_request_of_a_batched_client_is_answered_in_one_message(tmp_path):
    harness = Harness(tmp_path)
    batched = await harness.client(None, batch=True)  # not authenticated: refused
    request = {"type": "image_get_request", "data": {"requestId": "r1", "imageId": "img_1"}}
    frames = await batched.send_raw(json.dumps(request))
    assert [f["type"] for f in frames] == ["system_error", "image_get_response"]
    assert len(batched.messages) == 1 and batched.messages[0].startswith("[")
