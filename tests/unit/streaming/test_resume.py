"""Resumable streams on the local host: numbered frames, and ``subscribe`` with ``afterSeq``.

A client that loses its connection and subscribes again from the last seq it saw ends with the
exact reply: nothing missing, nothing twice (after dropping seqs already seen, the SDK's job).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentvm.adapters.llm.scripted import Fail
from agentvm.client import SessionCursors
from agentvm.errors import ProviderUnavailable
from agentvm.messages import AssistantMessage, UserMessage, text_of
from agentvm.records import TurnRecord, turn_id_for
from agentvm.streaming.frames import ATTEMPT_SPAN, TURN_SPAN, last_seq, replay

WORDS = " ".join(f"w{i}" for i in range(40))


async def _session(harness, tenant: str = "tenant-a"):
    a = await harness.client(tenant)
    img = (await a.request("image_create", containerId="u", config={"name": "A"}))["record"]
    await a.subscribe(img["sessionId"])
    return a, img


async def _until(predicate, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.002)


def _deltas(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] == "text_delta"]


def _text(frames: list[dict[str, Any]]) -> str:
    return "".join(f["data"]["text"] for f in _deltas(frames))


def _seqs(frames: list[dict[str, Any]]) -> list[int]:
    return [f["seq"] for f in frames]


def _deduped(*streams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the SDK hands the app: each seq once, in arrival order."""
    cursors = SessionCursors()
    return [f for stream in streams for f in stream if cursors.accept(f)]


async def _replies(harness, img) -> list[str]:
    history = await harness.store.list_messages(img["sessionId"])
    return [text_of(m.content) for m in history if isinstance(m, AssistantMessage)]


async def _turn(harness, frames) -> TurnRecord:
    turn = await harness.store.get_turn(frames[0]["context"]["turnId"])
    assert turn is not None and turn.frames is not None
    return turn


async def _start_turn(harness, client, img, reply: str = WORDS, delay_s: float = 0.005):
    harness.model.word_delay_s = delay_s
    harness.model.add(reply)
    await client.request("message_send", imageId=img["imageId"], content="go")
    return asyncio.create_task(harness.run_turns())


async def _drop_after_deltas(client, k: int) -> int:
    """The client's connection closes after it received ``k`` text deltas; returns its last seq."""
    await _until(lambda: len(_deltas(client.frames)) >= k)
    await client.disconnect()
    return client.turn_frames()[-1]["seq"]


# -- numbering ----------------------------------------------------------------------------------


async def test_every_frame_of_a_turn_carries_a_strictly_increasing_seq(harness):
    a, img = await _session(harness)
    harness.model.add("one two three", "four five six")
    await a.request("message_send", imageId=img["imageId"], content="first")
    await a.request("message_send", imageId=img["imageId"], content="second")  # queued behind
    await harness.run_turns()
    await a.request("image_stop", imageId=img["imageId"])

    pushed = [f for f in a.frames if "context" in f]  # every pushed session event
    numbered = [f for f in pushed if "turnId" in f["context"]]
    assert [f["type"] for f in pushed if f not in numbered] == ["session_destroyed"]
    assert "seq" not in pushed[-1]  # outside any turn: not part of the stream
    assert all(isinstance(f.get("seq"), int) for f in numbered)
    seqs = _seqs(numbered)
    assert seqs == sorted(set(seqs))
    # userSeq * 100000 + 1, 2, ...: the users' messages were stored 1st and 2nd
    first, second = ([f for f in numbered if f["type"] == "message_persisted"][i] for i in (0, 1))
    assert (first["seq"], second["seq"]) == (TURN_SPAN + 1, 2 * TURN_SPAN + 1)
    for persisted in (first, second):
        turn = [f for f in numbered if f["context"]["turnId"] == persisted["context"]["turnId"]]
        assert _seqs(turn) == list(range(persisted["seq"], persisted["seq"] + len(turn)))
        assert turn[0]["type"] == "message_persisted" and turn[-1]["type"] == "conversation_end"


async def test_the_turn_record_stores_what_was_sent_in_under_a_kilobyte(harness):
    a, img = await _session(harness)
    standard = " ".join(["token"] * 200)  # the standard turn's ~200 output tokens
    task = await _start_turn(harness, a, img, standard, delay_s=0.001)
    await task
    turn = await _turn(harness, a.turn_frames())
    assert turn.frames is not None
    assert turn.frames.firstSeq == TURN_SPAN + 1 and last_seq(turn.frames) == a.turn_frames()[-1]["seq"]
    assert turn.frames.kinds[: len(a.turn_frames())] == [
        (len(_text(a.turn_frames()[: i + 1])) if f["type"] == "text_delta" else f["type"])
        for i, f in enumerate(a.turn_frames())
    ]
    assert len(turn.model_dump_json()) < 1024


# -- resuming -----------------------------------------------------------------------------------


async def test_reconnect_mid_turn_gets_what_it_missed_then_the_live_stream(harness):
    a, img = await _session(harness)
    run = await _start_turn(harness, a, img)
    cursor = await _drop_after_deltas(a, 3)
    await _until(lambda: len(harness.model.requests) == 1)
    await asyncio.sleep(0.03)  # the turn goes on without a subscriber: frames the client misses
    b = await harness.client()
    assert await b.subscribe(img["sessionId"], after_seq=cursor) == []  # silent, as ever
    assert not run.done()
    await asyncio.wait_for(run, 5)

    got = b.turn_frames()
    assert got[0]["seq"] == cursor + 1  # caught up from the worker's log: nothing missing
    assert _seqs(got) == list(range(cursor + 1, cursor + 1 + len(got)))  # nothing twice
    assert _text(a.turn_frames()) + _text(got) == (await _replies(harness, img))[0] == WORDS
    assert [f["type"] for f in got[-3:]] == ["message_stop", "assistant_message", "conversation_end"]
    assert last_seq((await _turn(harness, got)).frames) == got[-1]["seq"]


async def test_reconnect_after_the_turn_ended_is_sent_the_rest_from_storage(harness):
    a, img = await _session(harness)
    run = await _start_turn(harness, a, img)
    cursor = await _drop_after_deltas(a, 3)
    await asyncio.wait_for(run, 5)
    b = await harness.client()
    await b.subscribe(img["sessionId"], after_seq=cursor)

    got = b.turn_frames()
    turn = await _turn(harness, got)
    assert [f["type"] for f in got] == ["text_delta", "message_stop", "assistant_message", "conversation_end"]
    last_text = max(i for i, k in enumerate(turn.frames.kinds) if isinstance(k, int))
    assert got[0]["seq"] == turn.frames.firstSeq + last_text  # the missed text: one frame
    assert _seqs(got) == sorted(set(_seqs(got))) and got[0]["seq"] > cursor
    assert got[-1]["seq"] == last_seq(turn.frames)
    assert _text(a.turn_frames()) + _text(got) == WORDS
    assert got[2]["data"]["content"] == [{"type": "text", "text": WORDS}]
    assert all(f["context"] == a.turn_frames()[0]["context"] for f in got)
    # caught up: the next turn streams to it as to any subscriber
    harness.model.add("next one")
    await b.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    assert _text(b.turn_frames()[len(got) :]) == "next one"


async def test_resume_from_zero_replays_every_finished_turn_in_order(harness):
    a, img = await _session(harness)
    harness.model.add("first reply here", "second reply there")
    await a.request("message_send", imageId=img["imageId"], content="one")
    await harness.run_turns()
    await a.request("message_send", imageId=img["imageId"], content="two")
    await harness.run_turns()
    b = await harness.client()
    await b.subscribe(img["sessionId"], after_seq=0)

    got = b.turn_frames()
    assert _seqs(got) == sorted(set(_seqs(got)))
    turns = list(dict.fromkeys(f["context"]["turnId"] for f in got))
    assert len(turns) == 2
    by_turn = [[f for f in got if f["context"]["turnId"] == t] for t in turns]
    assert [_text(frames) for frames in by_turn] == ["first reply here", "second reply there"]
    for frames, live in zip(by_turn, _split(a.turn_frames()), strict=True):
        assert [f["type"] for f in frames] == [
            "message_persisted",
            "message_start",
            "conversation_start",
            "conversation_responding",
            "text_delta",
            "message_stop",
            "assistant_message",
            "conversation_end",
        ]
        # the frames that are not text are the ones that were sent, with their seqs
        same = {f["seq"]: _strip(f) for f in live if f["type"] != "text_delta"}
        assert all(same[f["seq"]] == _strip(f) for f in frames if f["type"] != "text_delta")


async def test_a_cursor_from_the_future_replays_nothing_and_later_turns_still_stream(harness):
    a, img = await _session(harness)
    harness.model.add("done already")
    await a.request("message_send", imageId=img["imageId"], content="one")
    await harness.run_turns()
    b = await harness.client()
    await b.subscribe(img["sessionId"], after_seq=99 * TURN_SPAN)
    assert b.frames == []
    harness.model.add("a new turn")
    await a.request("message_send", imageId=img["imageId"], content="two")
    await harness.run_turns()
    assert _text(b.turn_frames()) == "a new turn" and b.turn_frames()[0]["type"] == "message_persisted"


async def test_a_cursor_for_another_tenants_session_is_refused_like_any_subscribe(harness):
    a, img = await _session(harness)
    harness.model.add("secret reply")
    await a.request("message_send", imageId=img["imageId"], content="private")
    await harness.run_turns()
    intruder = await harness.client("tenant-b")
    with_cursor = await intruder.subscribe(img["sessionId"], after_seq=0)
    without = await intruder.subscribe(img["sessionId"])
    unknown = await intruder.subscribe("sess_does_not_exist", after_seq=0)
    assert [_strip(f) for f in with_cursor] == [_strip(f) for f in without]
    assert [f["data"]["details"]["code"] for f in with_cursor] == ["not_found"]
    assert with_cursor[0]["data"]["message"].replace(img["sessionId"], "?") == unknown[0]["data"][
        "message"
    ].replace("sess_does_not_exist", "?")
    assert intruder.turn_frames() == []
    assert "secret" not in json.dumps(intruder.frames)


async def test_resume_after_an_interrupt_and_after_an_error(harness):
    a, img = await _session(harness)
    run = await _start_turn(harness, a, img, delay_s=0.01)
    await _until(lambda: len(_deltas(a.frames)) >= 2)
    await a.request("agent_interrupt", imageId=img["imageId"])
    await asyncio.wait_for(run, 5)
    harness.model.word_delay_s = 0
    harness.model.add(Fail(ProviderUnavailable("stream cut"), after_words="partial words"))
    await a.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    live = a.turn_frames()
    types = [f["type"] for f in live]
    # the worker says `interrupted` (numbered, in its turn) before the terminal frames
    assert types.index("interrupted") < types.index("message_stop")
    b = await harness.client()
    await b.subscribe(img["sessionId"], after_seq=0)
    got = b.turn_frames()
    assert [f["type"] for f in got if f["type"] != "text_delta"] == [t for t in types if t != "text_delta"]
    assert [_strip(f) for f in got if f["type"] != "text_delta"] == [
        _strip(f) for f in live if f["type"] != "text_delta"
    ]
    assert [_text(frames) for frames in _split(got)] == [_text(frames) for frames in _split(live)]
    assert _text(_split(got)[1]) == "partial words"


@pytest.mark.parametrize("moment", ["before the status write", "after the status write", "between the looks"])
async def test_a_subscribe_while_the_turn_ends_is_caught_up_exactly_once(harness, moment):
    """The race: the client resubscribes while the worker writes the turn's end. Whoever catches it
    up (the gateway from storage, the worker from its log, or both), it ends with every frame."""
    a, img = await _session(harness)
    b = await harness.client()
    store, connections = harness.store, harness.rt.connections
    put_turn, subscribe = store.put_turn, connections.subscribe
    cursor: list[int] = []
    run: list[asyncio.Task[None]] = []

    async def ending(turn: TurnRecord) -> None:  # the worker's status write at the end of the turn
        if turn.frames is not None and not cursor:
            cursor.append(a.turn_frames()[-1]["seq"])
            if moment == "before the status write":
                await b.subscribe(img["sessionId"], after_seq=cursor[0])
            await put_turn(turn)
            if moment == "after the status write":
                await b.subscribe(img["sessionId"], after_seq=cursor[0])
            return
        await put_turn(turn)

    async def subscribing(
        connection_id: str, session_id: str, after_seq: int | None = None, **known: Any
    ) -> None:
        # subscribed after the gateway's first look found the turn running, and the turn ends
        # before its second look: the worker catches it up, and the second look sends it again
        await subscribe(connection_id, session_id, after_seq, **known)
        if connection_id == b.connection_id:
            await asyncio.wait_for(asyncio.shield(run[0]), 5)

    if moment == "between the looks":
        connections.subscribe = subscribing  # type: ignore[method-assign]
    else:
        store.put_turn = ending  # type: ignore[method-assign]
    run.append(await _start_turn(harness, a, img, reply=WORDS, delay_s=0.003))
    if moment == "between the looks":
        cursor.append(await _drop_after_deltas(a, 2))
        await b.subscribe(img["sessionId"], after_seq=cursor[0])
    await asyncio.wait_for(run[0], 5)

    mine = [f for f in a.turn_frames() if f["seq"] <= cursor[0]]
    theirs = _deduped(b.turn_frames())
    turn = await _turn(harness, theirs)
    assert _seqs(mine) + _seqs(theirs) == list(range(turn.frames.firstSeq, last_seq(turn.frames) + 1))
    assert _text(mine) + _text(theirs) == WORDS
    if moment == "between the looks":
        assert len(b.turn_frames()) > len(theirs)  # sent twice, under the same seqs
    else:
        assert b.turn_frames() == theirs  # one of the two caught it up


async def test_a_retried_attempt_numbers_above_the_one_that_died(harness):
    a, img = await _session(harness)
    harness.model.add("after the crash")
    await a.request("message_send", imageId=img["imageId"], content="go")
    (job,) = harness.queue.pending()
    # the first attempt's worker died mid-stream: it had sent a few frames and left the turn running
    await harness.store.put_turn(
        TurnRecord(turnId=job.turnId, sessionId=job.sessionId, status="running", updatedAt=1, attempt=1)
    )
    await harness.run_turns()
    frames = a.turn_frames()
    assert frames[0]["seq"] == TURN_SPAN + ATTEMPT_SPAN + 1  # above every frame of attempt 1
    turn = await _turn(harness, frames)
    assert (turn.attempt, turn.frames.firstSeq) == (2, TURN_SPAN + ATTEMPT_SPAN + 1)
    # a client that saw frames of the dead attempt gets all of this one
    b = await harness.client()
    await b.subscribe(img["sessionId"], after_seq=TURN_SPAN + 5)
    assert _text(b.turn_frames()) == "after the crash"


async def test_replay_rebuilds_every_frame_as_it_was_sent(harness):
    a, img = await _session(harness)
    harness.model.add("exactly these words", Fail(ProviderUnavailable("cut"), after_words="some text"))
    for content in ("one", "two"):
        await a.request("message_send", imageId=img["imageId"], content=content)
        await harness.run_turns()
    session = await harness.store.get_session("tenant-a", img["sessionId"])
    history = await harness.store.list_messages(img["sessionId"])
    for live in _split(a.turn_frames()):
        turn = await _turn(harness, live)
        user = next(m for m in history if isinstance(m, UserMessage) and turn_id_for(m.id) == turn.turnId)
        replies = [m for m in history if getattr(m, "parentId", None) == user.id]
        rebuilt = replay(
            turn, session=session, user=user, replies=replies, after=0, now_ms=0, merge_text=False
        )
        assert [_strip(json.loads(p)) for p in rebuilt] == [_strip(f) for f in live]


def _split(frames: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    turns = list(dict.fromkeys(f["context"]["turnId"] for f in frames))
    return [[f for f in frames if f["context"]["turnId"] == t] for t in turns]


def _strip(frame: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in frame.items() if k != "timestamp"}


async def test_a_sender_the_worker_finds_late_still_gets_its_turn_from_the_start(harness):
    """On AWS the subscriber index can lag: message_send subscribes its sender with a cursor, so
    the worker catches it up from the turn's first frame whenever it finds it."""
    owner, img = await _session(harness)
    sender = await harness.client()  # never listed nor subscribed: message_send subscribes it
    lookups = harness.rt.connections.subscriptions
    calls = 0

    async def lagging(session_id):
        nonlocal calls
        calls += 1
        found = await lookups(session_id)
        return [sub for sub in found if sub.connection_id != sender.connection_id] if calls <= 2 else found

    harness.rt.connections.subscriptions = lagging  # type: ignore[method-assign]
    run = await _start_turn(harness, sender, img, reply="one two three four five six", delay_s=0.005)
    await asyncio.wait_for(run, 5)
    assert _seqs(sender.turn_frames()) == _seqs(owner.turn_frames())
    assert _text(sender.turn_frames()) == "one two three four five six"


def test_the_sdk_drops_a_late_frame_of_an_older_attempt_of_the_turn():
    """A node cut off from the cluster may post its attempt's last frames after the turn resumed
    elsewhere: once a frame of attempt 2 arrived, attempt 1's are dropped; other turns and sessions
    are not affected."""
    cursors = SessionCursors()
    context = {"sessionId": "s1"}
    first = 3 * TURN_SPAN  # the turn whose user message has seq 3
    arrived = [first + 1, first + 2, first + ATTEMPT_SPAN + 1, first + 3, first + ATTEMPT_SPAN + 2]
    kept = [seq for seq in arrived if cursors.accept({"seq": seq, "context": context})]
    assert kept == [first + 1, first + 2, first + ATTEMPT_SPAN + 1, first + ATTEMPT_SPAN + 2]
    assert cursors.accept({"seq": 4 * TURN_SPAN + 1, "context": context})  # the next turn: attempt 1
    assert cursors.accept({"seq": first + 4, "context": {"sessionId": "s2"}})  # another session
    assert cursors.last_seq("s1") == 4 * TURN_SPAN + 1
