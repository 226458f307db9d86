"""One WebSocket's outbound frames: a bounded queue and one writer task, so a slow client never
blocks a turn.

Without it, a turn's sink awaits ``send_text`` on every subscriber: a client that stops reading
fills its TCP window, the send never returns, and the turn (and every turn slot after it) waits
for it forever. Here ``send`` only enqueues; the writer task drains the queue with a timeout per
frame. A client whose queue is full (``max_frames`` or ``max_bytes`` waiting) or whose frame waits
past ``send_timeout_s`` is closed with code 4008 ("fell behind"): the turn goes on for everyone
else, and the client reconnects and resumes from the last ``seq`` it received.

A frame sent while nothing of this connection waits is written at once, inside ``send``: the
socket's send is stepped by hand (``_write_now``) and almost always completes without suspending
(the server's ``transport.write`` only buffers). Only a send that must wait (the socket's buffer is
full, flow control paused it) goes on in the writer task, with the frames after it queued behind:
the task runs only while frames wait, and ends when the queue is empty. So most frames cost no task
and no timer, and an idle connection (most of a thousand) holds no task, coroutine or event, only
this object (docs/scaling.md: memory per idle connection, the send path's CPU).

A request's answer goes out before any frame pushed while it was handled (``hold``, ``answer``):
``message_send_response`` before the first frame of the turn it queued, whose worker may start
streaming before the handler returns. AgentX's UI opens a reply when that response arrives and
drops text that comes earlier (issue 27: the stock UI showed a reply without its first delta).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import types
from collections import deque
from typing import TYPE_CHECKING, Any

from agentvm.errors import ConnectionGone

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence

log = logging.getLogger("agentvm.ws")

SLOW_CONSUMER_CLOSE = 4008  # application close code: "you fell behind; reconnect and resume"


class ConnectionWriter:
    def __init__(
        self,
        connection_id: str,
        send_text: Callable[[str], Coroutine[Any, Any, None]],
        close: Callable[[int, str], Coroutine[Any, Any, None]],
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
        self._parked: list[str] | None = None  # frames pushed while a request is handled (hold)
        self._parked_bytes = 0

    @property
    def closed(self) -> bool:
        return self._closed

    async def send(self, payload: str) -> None:
        """Queue ``payload``; never waits on the socket. Raises ``ConnectionGone`` once closed."""
        if self._closed:
            raise ConnectionGone(f"connection {self.connection_id} is gone")
        waiting = len(self._queue) + len(self._parked or ())
        if waiting >= self._max_frames or self._bytes + self._parked_bytes + len(payload) > self._max_bytes:
            await self._shed("its send queue is full")
            raise ConnectionGone(f"connection {self.connection_id} fell behind and was closed")
        if self._parked is not None:
            self._parked.append(payload)
            self._parked_bytes += len(payload)
            return
        if self._task is None and not self._queue:
            self._write_now(payload)
            return
        self._queue.append(payload)
        self._bytes += len(payload)
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def hold(self) -> None:
        """A request from this client is being handled: frames pushed from now on wait for its
        answer (``answer``), counted against the queue's bounds."""
        if self._parked is None:
            self._parked = []

    async def answer(self, replies: Sequence[str]) -> None:
        """Send the answer to the request being handled, then the frames pushed meanwhile, in
        their order."""
        parked, self._parked, self._parked_bytes = self._parked or [], None, 0
        for payload in (*replies, *parked):
            await self.send(payload)

    def _write_now(self, payload: str) -> None:
        """Send ``payload`` on a socket nothing else waits on, without a task: step the send's
        coroutine by hand. It normally finishes at once; if it suspends instead (the socket's
        buffer is full), the writer task takes it over, where it was, under the send timeout."""
        sending = self._send_text(payload)
        try:
            waiting_on = sending.send(None)
        except StopIteration:
            return  # written
        except Exception:  # the socket went away under us (as in _run)
            self._closed = True
            return
        self._queue.append(payload)  # in flight: leaves the queue when its send completes
        self._bytes += len(payload)
        self._task = asyncio.create_task(self._run(_resumed(sending, waiting_on)))

    async def _run(self, in_flight: Awaitable[None] | None = None) -> None:
        try:
            while self._queue:
                payload = self._queue[0]
                try:
                    # asyncio.timeout, not wait_for: no task per frame (wait_for wraps every send
                    # in a new task, which doubled the first-delta latency of 100 streams).
                    async with asyncio.timeout(self._timeout):
                        if in_flight is not None:
                            sending, in_flight = in_flight, None
                            await sending
                        else:
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
            if in_flight is not None:  # cancelled before it resumed the send: end that coroutine
                # _resumed's generator: typeshed types what @types.coroutine makes as a bare Awaitable
                in_flight.close()  # type: ignore[attr-defined]
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
        self._parked, self._parked_bytes = None, 0
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


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, None], waiting_on: Any) -> Generator[Any, Any, None]:
    """The rest of ``coro``, which was stepped by hand and suspended on ``waiting_on`` (the future
    it yielded to the event loop), as an awaitable for the task that finishes it: the task waits
    on that future, then resumes ``coro`` with what the loop sends or throws, as ``await`` would."""
    while True:
        try:
            sent = yield waiting_on
        except BaseException as exc:  # a cancellation (the send timeout, aclose) goes into the send
            try:
                waiting_on = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration:
                return


__all__ = ["SLOW_CONSUMER_CLOSE", "ConnectionWriter"]
