"""One turn as the SDK shows it: the typed frames of the turn a message started, until it ends.

``client.send(image_id, content)`` returns a ``Turn``. Iterating it sends the message (once) and
yields the turn's frames (``context.turnId`` is the turn's) in order, each once, across
reconnects; awaiting it runs it to the end. Either way the turn keeps what it saw: ``text`` (the
reply), ``events``, ``usage``, ``error``, ``end_reason``.

When a turn ends (docs/protocol.md, "A turn"):

- ``conversation_end`` (``reason`` ``"completed"`` or ``"interrupted"``); except the one that a
  retried attempt sends first to close what the dead attempt streamed (its third frame, after
  ``message_persisted`` and ``message_stop``: seq ``userSeq*100000 + band*10000 + 3`` with
  ``band >= 1``): the turn goes on, and its text starts over;
- ``error_occurred`` (a provider error, a budget used up, ``max_steps``...), which the server
  sends instead of ``conversation_end``.

A suspended turn (``tool_approval_requested``, ``client_tool_requested``, ``turn_suspended``) is
not over: iteration waits for its continuation. Answer with ``approve``/``deny`` (or a client
tool registered on the client, which answers by itself).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agentvm.client.errors import AgentVMClientError
from agentvm.client.events import (
    AssistantMessageEvent,
    ClientToolRequestedEvent,
    ConversationEndEvent,
    ErrorOccurredData,
    ErrorOccurredEvent,
    MessagePersistedEvent,
    TextDeltaEvent,
    ToolApprovalRequestedEvent,
)
from agentvm.client.queues import next_item
from agentvm.messages import TokenUsage

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Generator

    from agentvm.client.aio import AgentVMClient
    from agentvm.client.events import Frame
    from agentvm.client.responses import MessageSendResult

TURN_SPAN = 100_000  # seqs per user message (agentvm.streaming.frames)
ATTEMPT_SPAN = 10_000  # seqs per attempt of a turn


def closes_dead_attempt(frame: Frame) -> bool:
    """The ``conversation_end`` a retried attempt sends first (not the end of the turn)."""
    if not isinstance(frame, ConversationEndEvent) or frame.data.reason != "interrupted":
        return False
    if frame.seq is None:
        return False
    in_turn = frame.seq % TURN_SPAN
    return in_turn >= ATTEMPT_SPAN and in_turn % ATTEMPT_SPAN == 3


class Turn:
    """The frames of one turn; see the module docstring. Made by ``AgentVMClient.send``."""

    def __init__(
        self,
        client: AgentVMClient,
        image_id: str,
        content: str | list[dict[str, Any]],
        *,
        options: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> None:
        self._client = client
        self.image_id = image_id
        self.content = content
        self._options = options
        self._timeout = (
            timeout  # longest wait for the next frame (None: no limit; a suspended turn may wait days)
        )
        self._queue: asyncio.Queue[Frame | BaseException] = asyncio.Queue()
        self._started: asyncio.Task[MessageSendResult] | None = None
        self._iterating = False
        self.accepted: MessageSendResult | None = None
        self.events: list[Frame] = []
        self.done = False
        self.end_reason: str | None = None  # "completed", "interrupted" or "failed"
        self.error: ErrorOccurredData | None = None
        self._text: list[str] = []
        self._step_ended = False  # an assistant message ended: the next text starts a new step
        self._attempts = 0
        self._usage: list[TokenUsage] = []

    # -- what the turn saw ---------------------------------------------------------------------------
    @property
    def turn_id(self) -> str | None:
        return self.accepted.turnId if self.accepted is not None else None

    @property
    def session_id(self) -> str | None:
        return self.accepted.sessionId if self.accepted is not None else None

    @property
    def text(self) -> str:
        """The reply text streamed so far: every step's, one blank line between steps (a retried
        attempt's starts over)."""
        return "".join(self._text)

    @property
    def usage(self) -> TokenUsage | None:
        """Tokens of the turn's assistant messages (a tool step without text sends none: the exact
        figures are the usage records, ``GET /v1/usage``)."""
        if not self._usage:
            return None
        inputs = sum(u.inputTokens for u in self._usage)
        outputs = sum(u.outputTokens for u in self._usage)
        return TokenUsage(inputTokens=inputs, outputTokens=outputs, totalTokens=inputs + outputs)

    # -- running it ----------------------------------------------------------------------------------
    async def start(self) -> MessageSendResult:
        """Send the message (once; iterating or awaiting the turn does it). Raises ``RequestFailed``
        if the server refuses it (``session_busy``, ``quota_exceeded``, ``not_found``...)."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._client._start_turn(self))
        return await asyncio.shield(self._started)

    def __aiter__(self) -> AsyncIterator[Frame]:
        if self._iterating:
            raise AgentVMClientError("a Turn is iterated once")
        self._iterating = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Frame]:
        await self.start()
        while not self.done:
            yield await self._next()

    def __await__(self) -> Generator[Any, None, Turn]:
        return self._run_to_end().__await__()

    async def _run_to_end(self) -> Turn:
        await self.start()
        while not self.done:
            await self._next()
        return self

    async def _next(self) -> Frame:
        item = await next_item(self._queue, self._timeout)
        if isinstance(item, BaseException):
            self._client._forget_turn(self)
            raise item
        self._observe(item)
        return item

    def _observe(self, frame: Frame) -> None:
        self.events.append(frame)
        if isinstance(frame, MessagePersistedEvent):
            self._attempts += 1
            if self._attempts > 1:  # a retried attempt starts the reply over
                self._text.clear()
                self._usage.clear()
                self._step_ended = False
        elif isinstance(frame, TextDeltaEvent):
            if self._step_ended and self._text:
                self._text.append("\n\n")
            self._step_ended = False
            self._text.append(frame.data.text)
        elif isinstance(frame, AssistantMessageEvent):
            self._step_ended = True
            if frame.data.usage is not None:
                self._usage.append(frame.data.usage)
        elif isinstance(frame, ErrorOccurredEvent):
            self._finish("failed")
            self.error = frame.data
        elif isinstance(frame, ConversationEndEvent) and not closes_dead_attempt(frame):
            self._finish(frame.data.reason)

    def _finish(self, reason: str) -> None:
        self.done = True
        self.end_reason = reason
        self._client._forget_turn(self)

    def _deliver(self, item: Frame | BaseException) -> None:
        self._queue.put_nowait(item)
        if isinstance(item, ErrorOccurredEvent) or (
            isinstance(item, ConversationEndEvent) and not closes_dead_attempt(item)
        ):
            self._client._forget_turn(self)  # its last frame: nothing more comes (read or not)

    # -- acting on it --------------------------------------------------------------------------------
    async def interrupt(self) -> None:
        """Ask the server to stop the turn; iteration goes on until its ``conversation_end``."""
        await self._client.interrupt(self.image_id)

    async def approve(self, call: ToolApprovalRequestedEvent | str) -> None:
        """Approve a call this turn waits on (the event, or its ``toolCallId``)."""
        await self._client.approve(*self._call_ids(call))

    async def deny(self, call: ToolApprovalRequestedEvent | str, reason: str | None = None) -> None:
        await self._client.deny(*self._call_ids(call), reason=reason)

    async def submit_tool_result(
        self, call: ClientToolRequestedEvent | str, output: Any, *, is_error: bool = False
    ) -> None:
        """Answer a client-side tool's call by hand (a tool registered on the client answers itself)."""
        await self._client.submit_tool_result(*self._call_ids(call), output, is_error=is_error)

    def _call_ids(self, call: ToolApprovalRequestedEvent | ClientToolRequestedEvent | str) -> tuple[str, str]:
        if isinstance(call, str):
            if self.turn_id is None:
                raise AgentVMClientError("the turn has not started")
            return self.turn_id, call
        return call.data.turnId, call.data.toolCallId


__all__ = ["Turn", "closes_dead_attempt"]
