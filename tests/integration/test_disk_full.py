"""A full disk fails requests and turns cleanly, and the session works again once space returns,
with no restart (issue 15, finding 5). The disk is filled for real: SQLite's ``max_page_count``
caps the database so writes fail with SQLITE_FULL ("database or disk is full"), and
``query_only`` makes the queue's writes fail ("attempt to write a readonly database")."""

from __future__ import annotations

import asyncio

from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.turns.worker import process_turn

BIG = "a long message that needs new pages " * 500  # ~18 KB: several new pages


def _fill(conn) -> None:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # not one page more


def _free(conn) -> None:
    conn.execute("PRAGMA max_page_count = 1073741823")


def _storage_error(frame) -> bool:
    return frame["type"] == "system_error" and frame["data"]["details"]["code"] == "storage_unavailable"


async def _ready(harness):
    c = await harness.client()
    img = (await c.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    await c.subscribe(img["sessionId"])
    return c, img


async def test_a_message_sent_while_the_disk_is_full_is_refused_and_the_next_one_works(harness):
    c, img = await _ready(harness)
    _fill(harness.store._conn)

    refused = await c.request("message_send", imageId=img["imageId"], content=BIG)
    assert refused["code"] == "storage_unavailable" and refused["imageId"] == img["imageId"]
    assert harness.queue.pending() == []  # nothing acknowledged that was not stored

    _free(harness.store._conn)
    harness.model.add("stored at last")
    accepted = await c.request("message_send", imageId=img["imageId"], content=BIG)
    assert "code" not in accepted
    await harness.run_turns()
    assert [f["type"] for f in c.session_events()][-1] == "conversation_end"
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]


async def test_a_turn_that_cannot_be_stored_tells_the_client_and_completes_once_space_returns(
    harness, tmp_path
):
    queue = SqliteTurnQueue(
        tmp_path / "retrying.db", retry_delay_s=0.2, max_attempts=100, poll_interval_s=0.05
    )
    harness.rt.queue = harness.queue = queue
    c, img = await _ready(harness)
    reply = "a reply long enough to need a page " * 500
    harness.model.add(reply, reply)  # the first attempt's is lost with the write; the retry asks again
    await c.request("message_send", imageId=img["imageId"], content="hello")
    _fill(harness.store._conn)

    consumer = asyncio.create_task(queue.run(lambda job: process_turn(harness.rt, job)))
    try:
        async with asyncio.timeout(20):
            while not any(_storage_error(f) for f in c.frames):
                await asyncio.sleep(0.02)
            _free(harness.store._conn)
            while not any(f["type"] == "conversation_end" for f in c.session_events()):
                await asyncio.sleep(0.02)
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)

    error = next(f for f in c.frames if _storage_error(f))
    assert error["data"]["details"]["sessionId"] == img["sessionId"]
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]  # once, not twice


async def test_a_finished_turn_whose_queue_row_cannot_be_removed_does_not_wedge_its_session(harness):
    c, img = await _ready(harness)
    harness.model.add("first reply", "second reply")
    await c.request("message_send", imageId=img["imageId"], content="one")
    await c.request("message_send", imageId=img["imageId"], content="two")
    queue = harness.queue
    seen: list[str] = []

    async def handler(job):
        await process_turn(harness.rt, job)
        seen.append(job.turnId)
        if len(seen) == 1:
            queue._conn.execute("PRAGMA query_only = ON")  # the queue's disk is now unwritable

    consumer = asyncio.create_task(queue.run(handler))
    try:
        async with asyncio.timeout(20):
            while not seen:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)  # several passes: the second turn must wait for the first's row
            assert len(seen) == 1 and len(queue.pending()) == 2
            queue._conn.execute("PRAGMA query_only = OFF")  # space returns
            while len(seen) < 2 or queue.pending():
                await asyncio.sleep(0.02)
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)

    texts = [f["data"]["content"][0]["text"] for f in c.session_events() if f["type"] == "assistant_message"]
    assert texts == ["first reply", "second reply"]
