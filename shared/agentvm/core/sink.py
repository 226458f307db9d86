"""The coalescing sink: turn events → frames → the session's subscribers.

Text deltas are merged: the first is sent at once (time to first token is what users feel), later
ones are buffered and sent as one ``text_delta`` per flush window. ``conversation_responding`` is
sent once, with the first delta, not per delta: it carries no information after that, and every
WebSocket frame is a billed message on AWS. Frames go out through one sender task, so the model
stream is never blocked by a slow post and frames keep their order.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from agentvm.events import agent_event, dumps

if TYPE_CHECKING:
    from agentvm.core.fanout import Fanout
    from agentvm.events import EventContext, Json
    from agentvm.ports import Clock


class CoalescingSink:
    def __init__(
        self,
        *,
        session_id: str,
        context: EventContext,
        fanout: Fanout,
        clock: Clock,
        flush_s: float,
        subscriber_refresh_s: float = 2.0,
    ) -> None:
        self._session_id = session_id
        self._context = context
        self._fanout = fanout
        self._clock = clock
        self._flush_s = flush_s
        self._refresh_s = subscriber_refresh_s
        self._buffer: list[str] = []
        self._sent_first_delta = False
        self._timer: asyncio.TimerHandle | None = None
        self._outbox: asyncio.Queue[list[str] | None] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._subscribers: list[str] | None = None
        self._subscribers_at = 0.0
        self.frames_sent = 0  # frames handed to the fanout (each goes to every subscriber)
        self.first_delta_at: float | None = None  # monotonic time the first delta was queued

    # -- events -----------------------------------------------------------------------------
    def emit(self, type_: str, data: Json) -> None:
        """Queue one agent event, after any buffered text so the order holds."""
        self._flush_buffer()
        self._enqueue([dumps(agent_event(type_, data, now_ms=self._clock.now_ms(), context=self._context))])

    def text(self, text: str) -> None:
        if not text:
            return
        if not self._sent_first_delta:
            self._sent_first_delta = True
            self.first_delta_at = self._clock.monotonic()
            now = self._clock.now_ms()
            self._enqueue(
                [
                    dumps(agent_event("text_delta", {"text": text}, now_ms=now, context=self._context)),
                    dumps(agent_event("conversation_responding", {}, now_ms=now, context=self._context)),
                ]
            )
            return
        self._buffer.append(text)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._flush_s, self._flush_buffer)

    def _flush_buffer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._buffer:
            text = "".join(self._buffer)
            self._buffer.clear()
            self._enqueue(
                [
                    dumps(
                        agent_event(
                            "text_delta", {"text": text}, now_ms=self._clock.now_ms(), context=self._context
                        )
                    )
                ]
            )

    def _enqueue(self, payloads: list[str]) -> None:
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_loop())
        self._outbox.put_nowait(payloads)

    # -- delivery ---------------------------------------------------------------------------
    async def _targets(self) -> list[str]:
        now = self._clock.monotonic()
        if self._subscribers is None or now - self._subscribers_at >= self._refresh_s:
            self._subscribers = await self._fanout.subscribers(self._session_id)
            self._subscribers_at = now
        return self._subscribers

    async def _send_loop(self) -> None:
        while True:
            payloads = await self._outbox.get()
            if payloads is None:
                return
            # Merge whatever else is already waiting into one pass over the subscribers.
            while not self._outbox.empty():
                more = self._outbox.get_nowait()
                if more is None:
                    self._outbox.put_nowait(None)
                    break
                payloads.extend(more)
            targets = await self._targets()
            self._subscribers = await self._fanout.send_to(targets, payloads)
            self.frames_sent += len(payloads)

    async def aclose(self) -> None:
        """Flush what is buffered and wait until every frame was handed to the fanout."""
        self._flush_buffer()
        if self._sender is None:
            return
        self._outbox.put_nowait(None)
        with contextlib.suppress(asyncio.CancelledError):
            await self._sender


__all__ = ["CoalescingSink"]
