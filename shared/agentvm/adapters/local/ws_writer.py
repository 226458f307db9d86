"""One WebSocket's outbound frames: a bounded queue and one writer task, so a slow client never
blocks a turn.

Without it, a turn's sink awaits ``send_text`` on every subscriber: a client that stops reading
fills its TCP window, the send never returns, and the turn (and every turn slot after it) waits
for it forever. Here ``send`` only enqueues; the writer task drains the queue with a timeout per
frame. A client whose queue is full (``max_frames`` or ``max_bytes`` waiting) or whose frame waits
past ``send_timeout_s`` is closed with code 4008 ("fell behind"): the turn goes on for everyone
else, and the client reconnects and resumes from the last ``seq`` it received.

The writer task runs only while frames wait: the first frame of a burst starts it, and it ends
when the queue is empty. An idle connection (most of a thousand) holds no task, coroutine or
event, only this object (docs/scaling.md: memory per idle connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import TYPE_CHECKING

from agentvm.errors import ConnectionGone

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

log = logging.getLogger("agentvm.ws")

SLOW_CONSUMER_CLOSE = 4008  # application close code: "you fell behind; reconnect and resume"


class ConnectionWriter:
    def __init__(
        self,
        connection_id: str,
        send_text: Callable[[str], Awaitable[None]],
        close: Callable[[int, str], Awaitable[None]],
        *,
        max_frames: int = 1024,
        max_bytes: int = 8 * 1024 * 1024,
        send_timeout_s: float = 10.0,
    ) -> None:
        self.connection_id = connection_id
        self._send_text = send_text
        self._close = close
        self._max_frames = max_frames
        self._max_bytes = max_bytes
        self._timeout = send_timeout_s
        self._queue: deque[str] = deque()
        self._bytes = 0
        self._drained: asyncio.Event | None = None  # made by close_now(flush=True) to wait on
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None  # while frames wait

    @property
    def closed(self) -> bool:
        return self._closed

    async def send(self, payload: str) -> None:
        """Queue ``payload``; never waits on the socket. Raises ``ConnectionGone`` once closed."""
        if self._closed:
            raise ConnectionGone(f"connection {self.connection_id} is gone")
        if len(self._queue) >= self._max_frames or self._bytes + len(payload) > self._max_bytes:
            await self._shed("its send queue is full")
            raise ConnectionGone(f"connection {self.connection_id} fell behind and was closed")
        self._queue.append(payload)
        self._bytes += len(payload)
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._queue:
                payload = self._queue[0]
                try:
                    # asyncio.timeout, not wait_for: no task per frame (wait_for wraps every send
                    # in a new task, which doubled the first-delta latency of 100 streams).
                    async with asyncio.timeout(self._timeout):
                        await self._send_text(payload)
                except TimeoutError:
                    await self._shed(f"a frame waited more than {self._timeout:g} s")
                    return
                except Exception:  # the socket went away under us
                    self._closed = True
                    return
                self._queue.popleft()
                self._bytes -= len(payload)
        finally:
            self._task = None
            if self._drained is not None and not self._queue:
                self._drained.set()

    async def _shed(self, why: str) -> None:
        if self._closed:
            return
        self._closed = True
        log.warning(
            "closing a connection that fell behind", extra={"connection_id": self.connection_id, "why": why}
        )
        self._queue.clear()
        self._bytes = 0
        # Closing may itself wait on the full socket: it runs on its own, the server's close
        # timeout then drops the TCP connection, and nobody waits for it here.
        self._closing = asyncio.create_task(self._close_quietly())

    async def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            await self._close(SLOW_CONSUMER_CLOSE, "fell behind: reconnect and resume")

    async def close_now(self, code: int, reason: str, *, flush: bool = False) -> None:
        """Close the connection from the server's side (e.g. it never authenticated). ``flush``:
        first send what is queued (the answers that explain the close), for at most one send
        timeout."""
        if self._closed:
            return
        if flush and self._task is not None:
            self._drained = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._timeout):
                    await self._drained.wait()
        self._closed = True
        self._queue.clear()
        self._bytes = 0
        with contextlib.suppress(Exception):
            await self._close(code, reason)

    async def aclose(self) -> None:
        """Stop the writer (the connection ended); frames still queued are dropped."""
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            # A send to a socket that is going away may not return at once, even when cancelled:
            # the handler does not wait for it (it would hang, and with it the server's shutdown).
            await asyncio.wait({task}, timeout=1.0)


__all__ = ["SLOW_CONSUMER_CLOSE", "ConnectionWriter"]
