"""A stopping host and the work after replies (``turns/after_reply.py``): finished work is awaited,
and the stop is bounded even by work that ignores its cancel."""

from __future__ import annotations

import asyncio
import contextlib

from agentvm.turns.after_reply import AfterReplyTasks


async def test_a_stop_waits_for_work_that_ends_and_is_bounded_by_work_that_ignores_its_cancel():
    after = AfterReplyTasks()
    release = asyncio.Event()
    ended: list[str] = []

    async def quick() -> None:
        await asyncio.sleep(0.01)
        ended.append("quick")

    async def stubborn() -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        ended.append("stubborn")

    after.start(quick())
    after.start(stubborn())
    loop = asyncio.get_running_loop()
    started = loop.time()

    await after.aclose(timeout_s=0.2)

    assert loop.time() - started < 2  # twice the bound, not forever
    assert ended == ["quick"] and len(after) == 1  # the stubborn one is left behind
    release.set()
    await asyncio.sleep(0.05)
    assert ended == ["quick", "stubborn"] and len(after) == 0
