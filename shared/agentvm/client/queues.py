"""The next item of an asyncio queue within a timeout, without a task per call.

``asyncio.wait_for(queue.get(), timeout)`` wraps every call in a new task on Python 3.11: a client
reading a turn's frames makes one per frame, and a process following a thousand streams (the load
client of ``benchmarks/local_load.py``) spent a good part of its CPU on them. An item already
queued is taken at once; otherwise ``asyncio.timeout`` bounds the wait in the caller's own task.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

T = TypeVar("T")


async def next_item(queue: asyncio.Queue[T], timeout: float | None) -> T:
    """The queue's next item; ``TimeoutError`` after ``timeout`` seconds without one (None: wait)."""
    try:
        return queue.get_nowait()
    except asyncio.QueueEmpty:
        pass
    async with asyncio.timeout(timeout):
        return await queue.get()


__all__ = ["next_item"]
