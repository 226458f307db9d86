"""Retries of model calls that failed before producing any output.

A call is retried only while nothing has reached the caller: once a ``ModelStart`` or a text
delta has been yielded, a retry would duplicate output, so the error propagates instead.

Before each wait the caller is told (``model_retry`` events, docs/protocol.md): whoever consumes
the stream registers a listener in its own task with ``report_retries_to`` (the turn's hooks do,
``turns/hooks.py``), as ``agent/pacing.py`` does for read pacing, because one client serves every
turn of a process. The listener gets the attempt about to be made, the wait in milliseconds and a
reason code (``retry_reason``): never the provider's message.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING

from agentvm.errors import ProviderError, ProviderRateLimited

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from agentvm.llm import ModelEvent, ModelRequest
    from agentvm.ports import ModelClient

logger = logging.getLogger("agentvm.retry")

RATE_LIMITED = "rate_limited"
OVERLOADED = "overloaded"
UNAVAILABLE = "unavailable"

_listener: ContextVar[Callable[[int, int, str], None] | None] = ContextVar(
    "agentvm_model_retry_listener", default=None
)


def report_retries_to(listener: Callable[[int, int, str], None] | None) -> None:
    """In the task that consumes a model stream: call ``listener(attempt, wait_ms, reason)`` before
    each retry's wait (``attempt``: the number of the call about to be made, 2 for the first retry)."""
    _listener.set(listener)


def retry_reason(error: ProviderError) -> str:
    """A safe code for why a call is retried: ``rate_limited`` (429), ``overloaded`` (Anthropic's
    529, an ``overloaded_error``) or ``unavailable`` (any other 5xx, a timeout, a cut connection).
    The adapters build their messages from the status and error type only (adapters/llm/errors.py)."""
    if isinstance(error, ProviderRateLimited):
        return RATE_LIMITED
    message = error.message.lower()
    if "overloaded" in message or "(529" in message:
        return OVERLOADED
    return UNAVAILABLE


class RetryingModelClient:
    """Wraps a ModelClient, retrying retryable provider errors with capped, jittered backoff."""

    def __init__(
        self,
        inner: ModelClient,
        *,
        max_attempts: int = 4,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        max_total_s: float = 30.0,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self._max_attempts = max(1, max_attempts)
        self._base_delay_s = base_delay_s
        self._max_delay_s = max_delay_s
        self._max_total_s = max_total_s
        self._sleep = sleep
        self._rand = rand
        self._clock = clock

    def backoff_s(self, retry: int, error: ProviderError) -> float:
        """Delay before retry number ``retry`` (0-based): full jitter, but never below retry_after."""
        jitter = self._rand() * min(self._max_delay_s, self._base_delay_s * 2**retry)
        retry_after = getattr(error, "retry_after", None) or 0.0
        return max(retry_after, jitter)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        started = self._clock()
        attempt = 1
        while True:
            yielded = False
            events = self.inner.stream(request)
            try:
                async for event in events:
                    yielded = True
                    yield event
                return
            except ProviderError as error:
                if yielded or not error.retryable or attempt >= self._max_attempts:
                    raise
                delay = self.backoff_s(attempt - 1, error)
                if self._clock() - started + delay > self._max_total_s:
                    raise
                logger.warning(
                    "model call failed (%s: %s); retry %d of %d in %.2fs",
                    error.code,
                    error.message,
                    attempt,
                    self._max_attempts - 1,
                    delay,
                )
                listener = _listener.get()
                if listener is not None:
                    listener(attempt + 1, round(delay * 1000), retry_reason(error))
            finally:
                # Closing the inner stream closes the provider connection, also when our caller
                # stops early (aclose raises GeneratorExit at our yield).
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
            await self._sleep(delay)
            attempt += 1


__all__ = [
    "OVERLOADED",
    "RATE_LIMITED",
    "UNAVAILABLE",
    "RetryingModelClient",
    "report_retries_to",
    "retry_reason",
]
