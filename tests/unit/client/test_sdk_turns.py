"""How the SDK tells a turn's frames apart and where its ends are, on a scripted socket: frames
that overtake the ``message_send`` answer, another turn's frames, a retried attempt, a bounded
buffer, and which requests are sent again after a reconnect."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentvm.client import AgentVMClient, ConnectionLost, parse_frame
from agentvm.client.turn import closes_dead_attempt
from tests.unit.client.test_client_resume import FakeSocket

CTX = {"containerId": "u", "imageId": "img_1", "agentId": "agent_1", "sessionId": "sess_1"}


def _event(type_: str, data: dict[str, Any], seq: int, turn: str = "turn_a") -> dict[str, Any]:
    return {
        "type": type_,
        "timestamp": 1,
        "data": data,
        "source": "session" if type_ == "message_persisted" else "agent",
        "category": {"message_persisted": "persist", "text_delta": "stream", "message_stop": "stream"}.get(
            type_, "state"
        ),
        "intent": "notification",
        "context": {**CTX, "turnId": turn},
        "seq": seq,
    }


def _persisted(seq: int, turn: str = "turn_a") -> dict[str, Any]:
    return _event("message_persisted", {"sessionId": "sess_1", "messageId": "msg_a", "savedAt": 1}, seq, turn)


def _accepted(request_id: str, turn: str = "turn_a") -> dict[str, Any]:
    return {
        "type": "message_send_response",
        "timestamp": 1,
        "source": "command",
        "category": "response",
        "intent": "result",
        "data": {
            "requestId": request_id,
            "imageId": "img_1",
            "agentId": "agent_1",
            "sessionId": "sess_1",
            "messageId": "msg_a",
            "turnId": turn,
        },
    }


async def _sent_request(ws: FakeSocket, type_: str) -> str:
    for _ in range(100):
        for frame in ws.sent:
            if frame.get("type") == f"{type_}_request":
                return frame["data"]["requestId"]
        await asyncio.sleep(0.005)
    raise AssertionError(f"no {type_}_request sent: {ws.sent}")


def test_only_a_retried_attempts_opening_end_is_not_the_end_of_the_turn():
    end = _event("conversation_end", {"reason": "interrupted"}, 0)
    assert closes_dead_attempt(parse_frame({**end, "seq": 110_003}))  # attempt 2's third frame
    assert closes_dead_attempt(parse_frame({**end, "seq": 590_003}))
    assert not closes_dead_attempt(parse_frame({**end, "seq": 100_003}))  # attempt 1: a real interrupt
    assert not closes_dead_attempt(parse_frame({**end, "seq": 110_040}))
    completed = _event("conversation_end", {"reason": "completed"}, 110_003)
    assert not closes_dead_attempt(parse_frame(completed))


async def test_frames_that_overtake_the_answer_go_to_the_turn_and_other_turns_frames_do_not():
    ws = FakeSocket()
    client = AgentVMClient(ws)
    turn = client.send("img_1", "hi")
    started = asyncio.create_task(turn.start())
    request_id = await _sent_request(ws, "message_send")
    # the previous turn (queued before ours) is still streaming; ours starts before the answer
    ws.push(_event("text_delta", {"text": "older"}, 100_007, turn="turn_old"))
    ws.push(_persisted(200_001))
    ws.push(_accepted(request_id))
    ws.push(_event("text_delta", {"text": "Hi!"}, 200_002))
    ws.push(_event("conversation_end", {"reason": "completed"}, 200_003))
    await started

    events = [e async for e in turn]

    assert [e.seq for e in events] == [200_001, 200_002, 200_003]
    assert turn.text == "Hi!"
    other = await asyncio.wait_for(client.events.get(), 1)
    assert other["context"]["turnId"] == "turn_old"
    client._reader.cancel()


async def test_a_retried_attempt_starts_the_reply_over_and_the_turn_ends_once():
    ws = FakeSocket()
    client = AgentVMClient(ws)
    turn = client.send("img_1", "hi")
    started = asyncio.create_task(turn.start())
    ws.push(_accepted(await _sent_request(ws, "message_send")))
    await started
    ws.push(_persisted(100_001), _event("text_delta", {"text": "dead att"}, 100_002))
    # the worker died; the retry closes what it streamed, then answers again
    ws.push(_persisted(110_001))
    ws.push(_event("message_stop", {"stopReason": "end_turn"}, 110_002))
    ws.push(_event("conversation_end", {"reason": "interrupted"}, 110_003))
    ws.push(_event("text_delta", {"text": "The answer."}, 110_004))
    ws.push(_event("conversation_end", {"reason": "completed"}, 110_005))

    await asyncio.wait_for(turn, 2)

    assert (turn.text, turn.end_reason) == ("The answer.", "completed")
    assert [e.seq for e in turn.events][-1] == 110_005
    client._reader.cancel()


async def test_unread_frames_are_bounded_oldest_dropped_first():
    ws = FakeSocket()
    client = AgentVMClient(ws, max_buffered_events=3)
    ws.push(*[_event("text_delta", {"text": str(i)}, 100_001 + i, turn="turn_x") for i in range(5)])
    await asyncio.sleep(0.02)

    kept = [client.events.get_nowait()["data"]["text"] for _ in range(client.events.qsize())]

    assert kept == ["2", "3", "4"] and client.dropped_events == 2
    client._reader.cancel()


async def test_after_a_reconnect_safe_requests_are_sent_again_and_unsafe_ones_fail():
    first, second = FakeSocket(), FakeSocket()
    client = AgentVMClient(first)
    client._reconnect_within = 5.0

    async def reopen() -> FakeSocket:
        return second

    client._open_socket = reopen  # type: ignore[method-assign]
    listing = asyncio.create_task(client.request("image_list", check=True))
    creating = asyncio.create_task(client.request("image_create", containerId="u", config={}))
    await _sent_request(first, "image_list")
    await _sent_request(first, "image_create")
    await client.subscribe("sess_1")
    first.push({**_persisted(100_001), "context": {**CTX, "turnId": "turn_a"}})
    await asyncio.sleep(0.02)

    first.incoming.put_nowait(None)  # the socket drops
    request_id = await _sent_request(second, "image_list")
    second.push(
        {
            "type": "image_list_response",
            "timestamp": 1,
            "source": "command",
            "category": "response",
            "intent": "result",
            "data": {"requestId": request_id, "records": []},
        }
    )

    assert (await asyncio.wait_for(listing, 2))["records"] == []
    with pytest.raises(ConnectionLost, match="may or may not have been applied"):
        await creating
    assert {"type": "subscribe", "sessionId": "sess_1", "afterSeq": 100_001} in second.sent
    assert not any(f.get("type") == "image_create_request" for f in second.sent)
    assert client.reconnects == 1
    await client.close()


async def test_the_text_of_a_turns_steps_is_joined_with_a_blank_line_as_the_steps_were():
    ws = FakeSocket()
    client = AgentVMClient(ws)
    turn = client.send("img_1", "hi")
    started = asyncio.create_task(turn.start())
    ws.push(_accepted(await _sent_request(ws, "message_send")))
    ws.push(_persisted(100_001))
    ws.push(_event("text_delta", {"text": "Need "}, 100_002))
    ws.push(_event("text_delta", {"text": "approval."}, 100_003))
    step = {"id": "msg_s1", "timestamp": 1, "content": "Need approval."}
    ws.push(_event("assistant_message", step, 100_004))  # the first step ends (it called a tool)
    ws.push(_event("text_delta", {"text": "finished"}, 100_005))
    ws.push(_event("conversation_end", {"reason": "completed"}, 100_006))
    await started
    await turn

    assert turn.text == "Need approval.\n\nfinished"
    client._reader.cancel()
