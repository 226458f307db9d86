"""The pushed event sequence of a turn (protocol §3.3 A, C, D), with full context on every event."""

from __future__ import annotations

import asyncio

from agentvm.adapters.llm.scripted import Fail
from agentvm.errors import ProviderUnavailable

CONTEXT_KEYS = {"containerId", "imageId", "agentId", "sessionId"}


async def _ready(harness):
    c = await harness.client()
    img = (await c.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    await c.subscribe(img["sessionId"])
    return c, img


def _turn_types(client):
    return [f["type"] for f in client.session_events()]


def _assert_context(client, img):
    for frame in client.session_events():
        assert set(frame["context"]) >= CONTEXT_KEYS, frame
        assert frame["context"]["imageId"] == img["imageId"]
        assert frame["context"]["sessionId"] == img["sessionId"]


async def test_text_turn_emits_documented_sequence(harness):
    c, img = await _ready(harness)
    harness.model.add("Hello there, how are you")
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()
    types = _turn_types(c)
    assert types[:4] == ["message_start", "conversation_start", "text_delta", "conversation_responding"]
    assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
    assert set(types[4:-3]) <= {"text_delta"}
    turn = [f for f in c.frames if f.get("context", {}).get("turnId")]
    assert turn[0]["type"] == "message_persisted" and turn[1:] == c.session_events()
    assert types.count("conversation_responding") == 1
    text = "".join(f["data"]["text"] for f in c.session_events() if f["type"] == "text_delta")
    assert text == "Hello there, how are you"
    final = c.session_events()[-2]["data"]
    assert final["content"] == [{"type": "text", "text": "Hello there, how are you"}]
    assert final["usage"]["outputTokens"] == 5
    assert c.session_events()[-1]["data"] == {"reason": "completed"}
    _assert_context(c, img)
    # order across layers: the ACK, then the turn's stream, which starts with message_persisted
    order = c.types()
    assert (
        order.index("message_send_response") < order.index("message_persisted") < order.index("message_start")
    )


async def test_usage_record_is_persisted_before_terminal_events(harness):
    c, img = await _ready(harness)
    seen_usage_at_end: list[int] = []

    original = harness.push.send

    async def spy(conn, payload):
        if '"conversation_end"' in payload:
            seen_usage_at_end.append(len(await harness.store.list_usage("tenant-a")))
            history = await harness.store.list_messages(img["sessionId"])
            assert history[-1].subtype == "assistant"
        await original(conn, payload)

    harness.push.send = spy
    harness.model.add("one two three")
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()
    assert seen_usage_at_end == [1]
    usage = (await harness.store.list_usage("tenant-a"))[0]
    assert (usage.outputTokens, usage.status, usage.model) == (3, "completed", "scripted/test-1")
    assert usage.ttftMs is not None and usage.durationMs >= 0


async def test_provider_error_emits_error_message_and_error_occurred(harness):
    c, img = await _ready(harness)
    harness.model.add(ProviderUnavailable("anthropic: server error (500)"))
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()
    types = _turn_types(c)
    assert types == ["error_message", "error_occurred"]
    err = c.session_events()[-1]["data"]
    assert err == {
        "code": "provider_unavailable",
        "message": "anthropic: server error (500)",
        "recoverable": True,
    }
    _assert_context(c, img)
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "error"]
    # the session stays usable
    harness.model.add("recovered")
    await c.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    assert _turn_types(c)[-1] == "conversation_end"


async def test_stream_cut_midway_keeps_partial_text_and_reports_error(harness):
    c, img = await _ready(harness)
    harness.model.add(Fail(ProviderUnavailable("stream cut"), after_words="partial words"))
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()
    assert _turn_types(c)[-3:] == ["assistant_message", "error_message", "error_occurred"]
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant", "error"]


async def test_interrupt_stops_the_stream_and_persists_partial_text(harness):
    c, img = await _ready(harness)
    harness.model.add("a b c d e f g h i j k l")
    harness.model.word_delay_s = 0.05  # 12 words: 0.6 s, so the interrupt lands mid-stream
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    consumer = asyncio.create_task(harness.run_turns())
    while "text_delta" not in _turn_types(c):
        await asyncio.sleep(0.005)
    ack = await c.request("agent_interrupt", imageId=img["imageId"])
    assert ack["imageId"] == img["imageId"] and "error" not in ack
    await asyncio.wait_for(consumer, 5)
    types = _turn_types(c)
    assert "interrupted" in types
    assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
    assert c.session_events()[-1]["data"] == {"reason": "interrupted"}
    assert harness.model.closed_early == 1
    history = await c.request("image_messages", imageId=img["imageId"])
    partial = history["messages"][-1]["content"][0]["text"]
    assert partial and "l" not in partial.split()
    usage = (await harness.store.list_usage("tenant-a"))[0]
    assert usage.status == "interrupted" and usage.outputTokens == len(partial.split())


async def test_history_is_sent_to_the_model_in_conversation_order(harness):
    c, img = await _ready(harness)
    await c.request("image_update", imageId=img["imageId"], updates={"systemPrompt": "Be brief."})
    harness.model.add("first answer", "second answer")
    await c.request("message_send", imageId=img["imageId"], content="one")
    await c.request("message_send", imageId=img["imageId"], content="two")  # queued behind the first
    await harness.run_turns()
    second = harness.model.requests[1]
    assert [(t.role, t.text) for t in second.messages] == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]
    assert second.system == "Be brief."


async def test_redelivered_turn_does_nothing(harness):
    c, img = await _ready(harness)
    harness.model.add("only once")
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    job = harness.queue.pending()[0]
    await harness.run_turns()
    await harness.queue.enqueue(job)
    await harness.run_turns()
    assert len(harness.model.requests) == 1
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]
