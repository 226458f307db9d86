"""The client takes its next frame within a timeout without a task per frame."""

import asyncio

import pytest

from agentvm.client.queues import next_item


async def test_a_queued_item_is_taken_at_once():
    queue: asyncio.Queue[str] = asyncio.Queue()
    queue.put_nowait("a")
    assert await next_item(queue, 0) == "a"


async def test_an_item_that_comes_later_is_waited_for():
    queue: asyncio.Queue[str] = asyncio.Queue()
    asyncio.get_running_loop().call_later(0.01, queue.put_nowait, "late")
    assert await next_item(queue, 5) == "late"


async def test_no_item_within_the_timeout_raises_timeout_error_and_loses_nothing():
    queue: asyncio.Queue[str] = asyncio.Queue()
    with pytest.raises(TimeoutError):
        await next_item(queue, 0.01)
    queue.put_nowait("after")  # the timed-out wait took nothing from the queue
    assert await next_item(queue, None) == "after"


async def test_a_wait_runs_in_the_callers_task_with_no_task_of_its_own():
    queue: asyncio.Queue[int] = asyncio.Queue()
    before = len(asyncio.all_tasks())
    consumer = asyncio.create_task(next_item(queue, 5))
    await asyncio.sleep(0)  # the consumer is waiting on the empty queue now
    assert len(asyncio.all_tasks()) == before + 1  # asyncio.wait_for would have made one more
    queue.put_nowait(7)
    assert await consumer == 7
