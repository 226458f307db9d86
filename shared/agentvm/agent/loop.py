"""``run_turn``: one model call streamed to an observer, stoppable at any point.

Pure orchestration: no storage, no transport. The caller persists the outcome and sends the
terminal events. Provider failures (and an ``AgentVMError`` from a wrapping client, such as a
budget cut) end the turn as data (``outcome.error``), never as an escape.
Tools are not executed yet: images may carry ``mcpServers``, which are stored, not run.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agentvm.agent.context import estimate_request_tokens
from agentvm.errors import AgentVMError, ProviderUnavailable
from agentvm.llm import ModelStart, ModelStop, TextDelta

if TYPE_CHECKING:
    from agentvm.llm import ModelRequest
    from agentvm.ports import Clock, ModelClient


class TurnObserver(Protocol):
    def on_start(self, message_id: str, model: str) -> None: ...
    def on_text(self, text: str) -> None: ...


@dataclass
class TurnOutcome:
    model: str
    text: str = ""
    message_id: str | None = None
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    usage_reported: bool = False  # False: the stream ended before the provider reported usage
    start_input_tokens: int | None = None  # what ModelStart said, if the provider says it up front
    deltas: int = 0
    ttft_s: float | None = None
    error: AgentVMError | None = None
    interrupted: bool = False

    @property
    def usage_estimated(self) -> bool:
        """The tokens are ours, not the provider's: it started answering, never reported usage."""
        return not self.usage_reported and self.message_id is not None


async def run_turn(
    client: ModelClient,
    request: ModelRequest,
    observer: TurnObserver,
    *,
    cancelled: asyncio.Event,
    clock: Clock,
) -> TurnOutcome:
    outcome = TurnOutcome(model=request.model)
    started = clock.monotonic()
    parts: list[str] = []

    async def consume() -> None:
        async for ev in client.stream(request):
            if isinstance(ev, TextDelta):
                if outcome.ttft_s is None:
                    outcome.ttft_s = clock.monotonic() - started
                parts.append(ev.text)
                outcome.deltas += 1
                observer.on_text(ev.text)
            elif isinstance(ev, ModelStart):
                outcome.message_id = ev.message_id
                outcome.model = ev.model or request.model
                outcome.start_input_tokens = ev.input_tokens
                observer.on_start(ev.message_id, outcome.model)
            elif isinstance(ev, ModelStop):
                outcome.stop_reason = ev.stop_reason
                outcome.input_tokens = ev.input_tokens
                outcome.output_tokens = ev.output_tokens
                outcome.usage_reported = True

    consumer = asyncio.create_task(consume())
    waiter = asyncio.create_task(cancelled.wait())
    try:
        await asyncio.wait({consumer, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not consumer.done():
            # Interrupt: cancelling the consumer closes the provider stream (its `async with`
            # exits), so the provider stops producing and we stop paying for tokens.
            outcome.interrupted = True
            consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
        else:
            exc = consumer.exception()
            if isinstance(exc, AgentVMError):
                outcome.error = exc
            elif exc is not None:
                outcome.error = ProviderUnavailable(f"model stream failed: {type(exc).__name__}")
            elif outcome.stop_reason is None:
                outcome.error = ProviderUnavailable("model stream ended without a stop event")
    finally:
        waiter.cancel()
        if not consumer.done():
            consumer.cancel()
    outcome.text = "".join(parts)
    if not outcome.usage_reported:
        # The provider never reported usage (interrupted or cut): count what was consumed. Output:
        # the deltas received. Input: what the provider said at the start (Anthropic does), else
        # an estimate of the request, but only if the provider started answering (it read it).
        outcome.output_tokens = outcome.deltas
        if outcome.start_input_tokens is not None:
            outcome.input_tokens = outcome.start_input_tokens
        elif outcome.message_id is not None:
            outcome.input_tokens = estimate_request_tokens(request)
    return outcome


__all__ = ["TurnObserver", "TurnOutcome", "run_turn"]
