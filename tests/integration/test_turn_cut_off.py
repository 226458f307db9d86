"""A turn cut off mid-stream (its node stops, or lost the turn's lease) sends nothing afterwards.

The sink's frames go out through its own sender task. Before the sink was aborted with its attempt,
that task outlived the cancelled turn: it went on posting the dead attempt's frames after the turn
was handed back, and a subscriber on another cluster node got them after the next attempt's
(``test_cluster_turns``: ``100007`` after ``110005``). Here the subscriber's socket is slow, so
frames are queued behind it when the consumer stops.
"""

from __future__ import annotations

import asyncio

from agentvm.turns.worker import process_turn

REPLY = " ".join(f"w{i}" for i in range(60))


async def test_no_frame_of_a_cut_off_attempt_arrives_after_its_worker_stopped(harness):
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A"}))["record"]
    await c.subscribe(img["sessionId"])

    async def slow_socket(payload: str) -> None:
        await asyncio.sleep(0.03)
        await c._receive(payload)

    harness.push.attach(c.connection_id, slow_socket)
    harness.model.word_delay_s = 0.005
    harness.model.add(REPLY, REPLY)
    await c.request("message_send", imageId=img["imageId"], content="hi")

    consumer = asyncio.create_task(harness.queue.run(lambda job: process_turn(harness.rt, job)))
    async with asyncio.timeout(10):
        while sum(f["type"] == "text_delta" for f in c.session_events()) < 2:
            await asyncio.sleep(0.005)
    consumer.cancel()  # SIGTERM: the consumer stops its turn and returns
    async with asyncio.timeout(10):
        await asyncio.gather(consumer, return_exceptions=True)
    seen = len(c.frames)
    await asyncio.sleep(0.5)  # many flush windows and slow sends later
    assert len(c.frames) == seen
    assert "conversation_end" not in [f["type"] for f in c.session_events()]  # it did not finish

    await harness.run_turns()  # the next consumer resumes the turn from storage
    seqs = [f["seq"] for f in c.turn_frames()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    ends = [f["data"]["reason"] for f in c.session_events() if f["type"] == "conversation_end"]
    assert ends == ["interrupted", "completed"]
