"""Failure injection for the exactly-once tests: a worker that dies at a chosen step of a turn.

``CrashingStore`` wraps any Store and raises ``WorkerCrash`` the first time(s) the turn's status
is written as ``status``: "running" is the step right before the model call, "completed" the
step right after the reply was persisted. The exception escapes ``process_turn``, as any failure
of the store would: the local queue retries the job, the AWS worker reports the record failed.

``AppendCrashingStore`` raises ``WorkerCrash`` the first time(s) a message is appended with an
idempotency key starting with ``key_prefix``: with ``"result:"``, the step after the model call
(its usage recorded) and before the reply is stored.

``DyingModel`` wraps a ModelClient and, the first time(s), stops the whole worker mid-stream after
``after_deltas`` text deltas: it raises ``CancelledError``, which no layer of the turn handles, as
when Lambda ends an invocation (timeout, out of memory) or the process is killed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agentvm.llm import TextDelta

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.llm import ModelEvent, ModelRequest
    from agentvm.messages import Message
    from agentvm.ports import AppendResult, ModelClient, Store
    from agentvm.records import TurnRecord


class WorkerCrash(Exception):
    """The worker died here (an injected failure)."""


class CrashingStore:
    def __init__(self, inner: Store, *, status: str, times: int = 1) -> None:
        self.inner = inner
        self.status = status
        self.remaining = times
        self.crashes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def put_turn(self, turn: TurnRecord) -> None:
        if turn.status == self.status and self.remaining > 0:
            self.remaining -= 1
            self.crashes += 1
            raise WorkerCrash(f"died before writing status {turn.status!r}")
        await self.inner.put_turn(turn)


class AppendCrashingStore:
    def __init__(self, inner: Store, *, key_prefix: str, times: int = 1) -> None:
        self.inner = inner
        self.key_prefix = key_prefix
        self.remaining = times
        self.crashes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append_message(
        self, session_id: str, message: Message, *, idempotency_key: str | None = None
    ) -> AppendResult:
        if idempotency_key is not None and idempotency_key.startswith(self.key_prefix) and self.remaining > 0:
            self.remaining -= 1
            self.crashes += 1
            raise WorkerCrash(f"died before appending {idempotency_key!r}")
        return await self.inner.append_message(session_id, message, idempotency_key=idempotency_key)


class DyingModel:
    def __init__(self, inner: ModelClient, *, after_deltas: int, times: int = 1) -> None:
        self.inner = inner
        self.after_deltas = after_deltas
        self.remaining = times
        self.deaths = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        deltas = 0
        events = self.inner.stream(request)
        try:
            async for event in events:
                yield event
                if isinstance(event, TextDelta):
                    deltas += 1
                    if deltas == self.after_deltas and self.remaining > 0:
                        self.remaining -= 1
                        self.deaths += 1
                        raise asyncio.CancelledError("the worker died mid-stream")
        finally:
            await events.aclose()


class PollFailingStore:
    """A store whose worker's cancel polls fail (DynamoDB throttling that outlived botocore's retries)."""

    def __init__(self, inner: Store, *, failures: int) -> None:
        self.inner = inner
        self.remaining = failures
        self.polls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def cancel_requests(self, poller: str) -> set[str]:
        self.polls += 1
        if self.remaining > 0:
            self.remaining -= 1
            raise RuntimeError("ProvisionedThroughputExceededException")
        return await self.inner.cancel_requests(poller)


__all__ = ["AppendCrashingStore", "CrashingStore", "DyingModel", "PollFailingStore", "WorkerCrash"]
