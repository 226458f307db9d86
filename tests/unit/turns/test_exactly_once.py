"""Exactly-once turns on the local host: redelivered jobs, and a worker dying at every step of a turn.

Each crash is injected once (``tests/crashes.py``); the durable queue retries the job (or, after a
process death, re-queues it at start-up). Whatever the step, the session ends with the user message
once, one reply, the turn record terminal and one usage record; the model is called again only if
the reply had not been persisted. The AWS host's variant is ``tests/functions/test_exactly_once_aws.py``.
"""

from __future__ import annotations

import asyncio

from agentvm.turns.worker import process_turn
from tests.crashes import AppendCrashingStore, CrashingStore, DyingModel, PollFailingStore

REPLY = "one two three four five six seven eight"
LOST_REPLY = "a reply that dies with its worker"  # 7 words: 7 output tokens


async def _sent(harness, content: str = "hi"):
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A"}))["record"]
    await c.subscribe(img["sessionId"])
    await c.request("message_send", imageId=img["imageId"], content=content)
    return c, img


async def _assert_answered_once(harness, c, img, reply: str = REPLY) -> None:
    history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == [{"type": "text", "text": reply}]
    [usage] = await harness.store.list_usage("tenant-a")
    assert usage.status == "completed"
    turn = await harness.store.get_turn(usage.turnId)
    assert turn.status == "completed"
    types = [f["type"] for f in c.session_events()]
    assert types[-1] == "conversation_end"
    # one completed end; an attempt that died before it was closed as interrupted (no splice)
    assert _ends(c.session_events())[-1:] == ["completed"] and set(_ends(c.session_events())[:-1]) <= {
        "interrupted"
    }
    assert harness.queue.pending() == [] and harness.queue.dead() == []


async def test_a_job_delivered_twice_runs_one_turn(harness):
    c, img = await _sent(harness)
    [job] = harness.queue.pending()
    harness.model.add(REPLY, "a second reply must never be made")

    first = await process_turn(harness.rt, job)
    again = await process_turn(harness.rt, job)  # at-least-once delivery: the same job again

    assert first is not None and again is None
    assert len(harness.model.requests) == 1
    history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant"]


async def test_worker_dies_before_the_model_call_and_the_retry_completes(harness):
    harness.rt.store = store = CrashingStore(harness.store, status="running")
    c, img = await _sent(harness)
    harness.model.add(REPLY)

    await harness.run_turns()

    assert store.crashes == 1 and len(harness.model.requests) == 1
    await _assert_answered_once(harness, c, img)


async def test_worker_dies_after_persisting_the_reply_and_the_retry_finishes_from_storage(harness):
    harness.rt.store = store = CrashingStore(harness.store, status="completed")
    c, img = await _sent(harness)
    harness.model.add(REPLY, "a second reply must never be made")

    await harness.run_turns()

    assert store.crashes == 1
    assert len(harness.model.requests) == 1  # the stored reply was sent, not made again
    await _assert_answered_once(harness, c, img)
    end = c.session_events()[-2]
    assert end["type"] == "assistant_message" and end["data"]["content"][0]["text"] == REPLY


async def test_worker_dies_after_its_model_call_and_that_calls_usage_is_the_turns_only_record(harness):
    """Between the model call (its usage recorded at its end) and the stored reply: the retry calls
    the model again; the first call's record stays the turn's one record, the second adds none."""
    harness.rt.store = store = AppendCrashingStore(harness.store, key_prefix="result:")
    c, img = await _sent(harness)
    harness.model.cache_read_tokens = 5
    harness.model.add(LOST_REPLY, REPLY)

    await harness.run_turns()

    assert store.crashes == 1 and len(harness.model.requests) == 2
    await _assert_answered_once(harness, c, img)
    [usage] = await harness.store.list_usage("tenant-a")
    assert (usage.outputTokens, usage.cacheReadTokens) == (7, 5)


async def test_worker_dies_before_acknowledging_the_job_and_the_redelivery_does_nothing(harness):
    c, img = await _sent(harness)
    harness.model.add(REPLY, "a second reply must never be made")
    acks_lost = [1]

    async def handler(job):
        await process_turn(harness.rt, job)
        if acks_lost[0]:
            acks_lost[0] -= 1
            raise ConnectionResetError("died before the job was deleted")

    await harness.queue.drain(handler)

    assert acks_lost == [0] and len(harness.model.requests) == 1
    await _assert_answered_once(harness, c, img)


async def test_worker_dies_mid_stream_and_the_restarted_consumer_runs_the_turn_again(harness):
    """The process dies mid-stream (the consumer is cancelled, as by a shutdown or a kill): the job
    is left 'running', re-queued by the next consumer's start, and run again from the start."""
    c, img = await _sent(harness)
    harness.model.word_delay_s = 0.01
    harness.model.add(REPLY, REPLY)
    consumer = asyncio.create_task(harness.queue.run(lambda job: process_turn(harness.rt, job)))
    while sum(f["type"] == "text_delta" for f in c.session_events()) < 2:
        await asyncio.sleep(0.005)
    consumer.cancel()
    await asyncio.gather(consumer, return_exceptions=True)
    assert [m.subtype for m in await harness.store.list_messages(img["sessionId"])] == ["user"]

    await harness.run_turns()  # the next start of the host

    assert len(harness.model.requests) == 2 and harness.model.closed_early == 1
    starts = [f for f in c.session_events() if f["type"] == "message_start"]
    assert len(starts) == 2  # subscribers see the turn start over, with a new message id
    assert starts[0]["data"]["messageId"] != starts[1]["data"]["messageId"]
    # ...and the dead attempt's message closed as interrupted first, never spliced into the new one
    second = c.session_events().index(starts[1])
    closing = [
        (f["type"], f["data"])
        for f in c.session_events()[:second]
        if f["type"] in ("message_stop", "conversation_end")
    ]
    assert closing == [
        ("message_stop", {"stopReason": "end_turn"}),
        ("conversation_end", {"reason": "interrupted"}),
    ]
    ends = [f["data"]["reason"] for f in c.session_events() if f["type"] == "conversation_end"]
    assert ends == ["interrupted", "completed"]
    history = await harness.store.list_messages(img["sessionId"])
    assert [m.subtype for m in history] == ["user", "assistant"] and history[1].content[0].text == REPLY


async def test_a_turn_cut_by_the_runtime_mid_stream_is_retried_by_the_queue(harness):
    c, img = await _sent(harness)
    harness.rt.models.client = model = DyingModel(harness.model, after_deltas=3)
    harness.model.add(REPLY, REPLY)

    await harness.run_turns()

    assert model.deaths == 1 and len(harness.model.requests) == 2
    await _assert_answered_once(harness, c, img)


async def test_a_failing_cancel_poll_does_not_fail_a_streaming_turn(harness):
    """On AWS the worker polls the cancel mark while streaming: a failed read must not cost the turn
    (it would be redelivered and the model called, and paid, again)."""
    harness.rt.store = store = PollFailingStore(harness.store, failures=3)
    harness.rt.turns = type(harness.rt.turns)(flush_s=0.01, cancel_poll_s=0.005)
    c, img = await _sent(harness)
    harness.model.word_delay_s = 0.01
    harness.model.add(REPLY)

    await harness.run_turns()

    assert store.remaining == 0 and len(harness.model.requests) == 1
    await _assert_answered_once(harness, c, img)


def _ends(events: list[dict]) -> list[str]:
    """The reasons of the turn's ``conversation_end`` frames, in order."""
    return [e["data"]["reason"] for e in events if e["type"] == "conversation_end"]
