"""What follows a turn's reply (a compaction, a session title), off the session's queue slot.

A turn's job is done once its terminal events are out and stored. A compaction after it is one more
model call that can take seconds (``agent/compaction.py``); run inside the job, it holds the
session's place in the queue, and the user's next message waits for it: with the echo model at
10 ms a word, the benchmark of issue 28 saw every 19th turn of every session wait ~6 s for its
first delta (BENCHMARKS.md, "Real turns on 1, 2 and 3 cluster nodes").

So on hosts whose process outlives the job (``avm serve``, alone or as a cluster node), the work
after the reply runs here, as a task of its own: the queue settles the job at once and the next
turn starts beside the compaction. Nothing is lost if the task is: it only ever shortens what later
turns send, a compaction cut off is skipped, and the next turn past the threshold tries again
(``agent/compaction.py``, which also makes sure two of them from the same summary call the model
once). On AWS a Lambda is frozen when it returns, so the worker awaits the work before the message
is deleted (``process_turn`` without ``later``) and the session's next turn waits for it there.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Coroutine

log = logging.getLogger("agentvm.turns")

STOP_WAIT_S = 5.0  # a stopping host waits this long for work after replies, then cancels it


class AfterReplyTasks:
    """The tasks running work after replies in this process: started by ``start`` (the ``later``
    of ``turns.worker.process_turn``), awaited or cancelled by ``aclose`` when the host stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.warning("work after a reply failed", extra={"error": type(exc).__name__})

    async def wait(self) -> None:
        """Until every task started so far has ended (tests, benchmarks, a draining host)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self, timeout_s: float = STOP_WAIT_S) -> None:
        """Let the running work finish for up to ``timeout_s``, then cancel what is left and give it
        as long again to end (``asyncio.wait``: a task that ignores its cancel is left behind, the
        process is stopping; ``gather`` would wait for it however long)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        left = [task for task in self._tasks if not task.done()]
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=timeout_s)


__all__ = ["STOP_WAIT_S", "AfterReplyTasks"]
