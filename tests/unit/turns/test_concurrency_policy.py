"""Concurrent messages on one session: queue (default), reject, interrupt; per image or per request."""

from __future__ import annotations

import asyncio


async def _image(harness, **config):
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A", **config}))["record"]
    await c.subscribe(img["sessionId"])
    return c, img


def _replies(history):
    return [m["content"][0]["text"] for m in history["messages"] if m["subtype"] == "assistant"]


async def test_queue_policy_runs_both_turns_in_order(harness):
    c, img = await _image(harness)
    harness.model.add("first", "second")
    await c.request("message_send", imageId=img["imageId"], content="one")
    second = await c.request("message_send", imageId=img["imageId"], content="two")
    assert "error" not in second
    await harness.run_turns()
    history = await c.request("image_messages", imageId=img["imageId"])
    assert _replies(history) == ["first", "second"]
    assert [m.messages[-1].text for m in harness.model.requests] == ["one", "two"]


async def test_reject_policy_answers_session_busy_and_stores_nothing(harness):
    c, img = await _image(harness, concurrency="reject")
    await c.request("message_send", imageId=img["imageId"], content="one")
    busy = await c.request("message_send", imageId=img["imageId"], content="two")
    assert busy["code"] == "session_busy" and busy["error"]
    harness.model.add("first")
    await harness.run_turns()
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]
    # once the turn ended, the session accepts messages again
    assert "error" not in await c.request("message_send", imageId=img["imageId"], content="three")


async def test_request_option_overrides_image_policy(harness):
    c, img = await _image(harness)  # image policy: queue
    await c.request("message_send", imageId=img["imageId"], content="one")
    busy = await c.request(
        "message_send", imageId=img["imageId"], content="two", options={"concurrency": "reject"}
    )
    assert busy["code"] == "session_busy"


async def test_interrupt_policy_cancels_running_turn_then_runs_new_one(harness):
    c, img = await _image(harness, concurrency="interrupt")
    harness.model.add("a b c d e f g h i j", "fresh answer")
    harness.model.word_delay_s = 0.05
    await c.request("message_send", imageId=img["imageId"], content="one")
    consumer = asyncio.create_task(harness.run_turns())
    while not any(f["type"] == "text_delta" for f in c.session_events()):
        await asyncio.sleep(0.005)
    # the first reply still streams (0.5 s in all) while the interrupt lands: kept slow, or under
    # load it could finish before the interrupt is seen
    await c.request("message_send", imageId=img["imageId"], content="two")
    await asyncio.wait_for(consumer, 10)
    await harness.run_turns()
    ends = [f["data"]["reason"] for f in c.session_events() if f["type"] == "conversation_end"]
    assert ends == ["interrupted", "completed"]
    history = await c.request("image_messages", imageId=img["imageId"])
    replies = _replies(history)
    assert replies[-1] == "fresh answer" and len(replies[0].split()) < 10
    assert harness.model.closed_early == 1


async def test_invalid_policy_is_a_bad_request(harness):
    c, img = await _image(harness)
    bad = await c.request(
        "message_send", imageId=img["imageId"], content="x", options={"concurrency": "yolo"}
    )
    assert bad["code"] == "bad_request"
