"""Running one queued turn: rebuild the agent, stream, persist, then send the terminal events.

Exactly-once rules: a turn whose record is terminal is skipped (a redelivered job does nothing);
a turn whose reply is already stored (the worker died after persisting) is finished from the
stored reply without calling the model again; results are appended with an idempotency key
derived from the turn, so no path appends a reply twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from agentvm.agent.compaction import compact_after_turn, prepare_context
from agentvm.agent.history import result_of
from agentvm.agent.loop import TurnOutcome, run_turn
from agentvm.errors import AgentVMError, ProviderError, ProviderRejected
from agentvm.events import EventContext
from agentvm.messages import AssistantMessage, ErrorMessage, TextPart, TokenUsage, message_to_wire
from agentvm.records import TurnRecord, UsageRecord
from agentvm.security.budgets import BudgetedModelClient
from agentvm.streaming.fanout import Fanout
from agentvm.streaming.frames import error_occurred_data, first_seq, persisted_event
from agentvm.streaming.sink import CoalescingSink

if TYPE_CHECKING:
    from agentvm.agent.context import TurnContext
    from agentvm.events import Json
    from agentvm.messages import Message
    from agentvm.ports import ModelClient
    from agentvm.records import FrameMap, ImageRecord, TurnJob, TurnStatus
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.turns")

TERMINAL: frozenset[str] = frozenset({"completed", "interrupted", "failed"})


def turn_id_for(user_message_id: str) -> str:
    return "turn_" + user_message_id.removeprefix("msg_")


def context_for(job: TurnJob) -> EventContext:
    return EventContext(
        containerId=job.containerId,
        imageId=job.imageId,
        agentId=job.agentId,
        sessionId=job.sessionId,
        turnId=job.turnId,
    )


async def process_turn(rt: Runtime, job: TurnJob) -> TurnOutcome | None:
    """Run one turn job to completion. Returns None when there was nothing to do."""
    store = rt.store
    turn = await store.get_turn(job.turnId)
    if turn is not None and turn.status in TERMINAL:
        log.info("turn already finished; skipping redelivery", extra={"turn_id": job.turnId})
        return None
    attempt = _attempt_of(turn)
    image = await store.get_image(job.tenantId, job.imageId)
    if image is None:  # deleted while queued
        await _set_status(rt, job, "failed")
        return None
    # The summary of older history (if any) and the messages after it: bounded reads (compaction.py).
    context = await prepare_context(rt, job, image)
    history = context.messages
    sink = CoalescingSink(
        session_id=job.sessionId,
        context=context_for(job),
        fanout=Fanout(rt.connections, rt.push),
        clock=rt.clock,
        flush_s=rt.turns.flush_s,
        flush_max_s=rt.turns.flush_max_s,
        subscriber_refresh_s=rt.turns.subscriber_refresh_s,
        first_seq=first_seq(job.userSeq, attempt),
    )
    sink.emit_frame(_persisted(rt, job))  # every attempt's first frame
    stored = result_of(history, job.userMessageId)
    if stored is not None:
        # A previous attempt persisted the reply and died before finishing: finish from storage.
        sink.hold()
        _emit_terminal(sink, stored, stop_reason="end_turn", interrupted=False)
        done: TurnStatus = "failed" if isinstance(stored, ErrorMessage) else "completed"
        await _set_status(rt, job, done, attempt=attempt, frames=sink.frame_map())
        sink.release()
        await sink.aclose()
        return None

    await _set_status(rt, job, "running", attempt=attempt)
    started_ms = rt.clock.now_ms()
    started = rt.clock.monotonic()
    outcome, model_ref = await _stream(rt, job, image, context, sink)
    duration_ms = int((rt.clock.monotonic() - started) * 1000)
    if outcome.interrupted:  # the turn saw the cancel: say so at once, before persisting and the end
        sink.emit("interrupted", {"agentId": job.agentId, "containerId": job.containerId})
    status: TurnStatus = "interrupted" if outcome.interrupted else "failed" if outcome.error else "completed"

    # Persist before the terminal events: a client that saw the end can always read it back.
    billed = await store.put_usage(
        UsageRecord(
            turnId=job.turnId,
            tenantId=job.tenantId,
            containerId=job.containerId,
            imageId=job.imageId,
            sessionId=job.sessionId,
            model=model_ref,
            inputTokens=outcome.input_tokens,
            outputTokens=outcome.output_tokens,
            ttftMs=None if outcome.ttft_s is None else int(outcome.ttft_s * 1000),
            durationMs=duration_ms,
            status=status,
            createdAt=rt.clock.now_ms(),
            estimated=outcome.usage_estimated,
        )
    )
    # Counted only by the attempt that stored the usage record: the counters agree with the bill.
    if billed and rt.budgets is not None:
        await rt.budgets.record(job.tenantId, job.containerId, outcome.input_tokens + outcome.output_tokens)
    sink.hold()  # the terminal frames wait for the status write (with what the turn sent) below
    result = _result_message(rt, job, outcome, started_ms)
    if result is not None:
        appended = await store.append_message(job.sessionId, result, idempotency_key=f"result:{job.turnId}")
        result = appended.message
    if outcome.error is not None and not outcome.interrupted:
        error = ErrorMessage(
            id=rt.ids.new("msg"),
            timestamp=rt.clock.now_ms(),
            content=outcome.error.message,
            errorCode=outcome.error.code,
            parentId=job.userMessageId,
        )
        appended = await store.append_message(job.sessionId, error, idempotency_key=f"error:{job.turnId}")
        if result is not None:
            sink.emit("assistant_message", message_to_wire(result))
        result = appended.message
    _emit_terminal(
        sink, result, stop_reason=outcome.stop_reason or "end_turn", interrupted=outcome.interrupted
    )
    await _set_status(rt, job, status, attempt=attempt, frames=sink.frame_map())
    sink.release()
    await sink.aclose()
    rt.signals.forget(job.turnId)
    await compact_after_turn(rt, job, image, context, outcome)  # after the reply; never raises
    return outcome


async def _stream(
    rt: Runtime, job: TurnJob, image: ImageRecord, context: TurnContext, sink: CoalescingSink
) -> tuple[TurnOutcome, str]:
    cancelled = rt.signals.event_for(job.turnId)
    if await rt.store.is_cancel_requested(job.sessionId, job.turnId):
        cancelled.set()
    try:
        client, model_name, model_ref = rt.models.resolve(image.model)
    except AgentVMError as exc:
        return TurnOutcome(model=image.model or "", error=_as_provider_error(exc)), image.model or ""
    client = await _within_budget(rt, job, client)
    request = context.request(
        model=model_name,
        image_prompt=image.systemPrompt,
        up_to_user_id=job.userMessageId,
        max_tokens=rt.turns.max_output_tokens,
    )
    poller = asyncio.create_task(_poll_cancel(rt, job, cancelled)) if rt.turns.cancel_poll_s > 0 else None
    try:
        outcome = await run_turn(client, request, _SinkObserver(sink), cancelled=cancelled, clock=rt.clock)
    finally:
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
    return outcome, model_ref


async def _within_budget(rt: Runtime, job: TurnJob, client: ModelClient) -> ModelClient:
    """With budgets, the model stream is cut once the turn's output crosses what is left of them."""
    if rt.budgets is None:
        return client
    limit = await rt.budgets.allowance(job.tenantId, job.containerId)
    return client if limit is None else BudgetedModelClient(client, limit)


async def _poll_cancel(rt: Runtime, job: TurnJob, cancelled: asyncio.Event) -> None:
    """On AWS the interrupt arrives in another Lambda: look for its mark between flushes."""
    while not cancelled.is_set():
        await asyncio.sleep(rt.turns.cancel_poll_s)
        try:
            if await rt.store.is_cancel_requested(job.sessionId, job.turnId):
                cancelled.set()
        except Exception as exc:  # a failed read must not fail a turn that streams fine: poll again
            log.warning("cancel poll failed", extra={"turn_id": job.turnId, "error": type(exc).__name__})


class _SinkObserver:
    def __init__(self, sink: CoalescingSink) -> None:
        self._sink = sink

    def on_start(self, message_id: str, model: str) -> None:
        self._sink.emit("message_start", {"messageId": message_id, "model": model})
        self._sink.emit("conversation_start", {"messageId": message_id})

    def on_text(self, text: str) -> None:
        self._sink.text(text)


def _result_message(
    rt: Runtime, job: TurnJob, outcome: TurnOutcome, started_ms: int
) -> AssistantMessage | None:
    if not outcome.text.strip():
        return None
    return AssistantMessage(
        id=outcome.message_id or rt.ids.new("msg"),
        timestamp=started_ms,
        content=[TextPart(text=outcome.text)],
        parentId=job.userMessageId,
        usage=TokenUsage(
            inputTokens=outcome.input_tokens,
            outputTokens=outcome.output_tokens,
            totalTokens=outcome.input_tokens + outcome.output_tokens,
        ),
    )


def _emit_terminal(
    sink: CoalescingSink, result: Message | None, *, stop_reason: str, interrupted: bool
) -> None:
    if isinstance(result, ErrorMessage):
        sink.emit("error_message", message_to_wire(result))
        sink.emit("error_occurred", error_occurred_data(result))
        return
    sink.emit("message_stop", {"stopReason": stop_reason})
    if result is not None:
        sink.emit("assistant_message", message_to_wire(result))
    sink.emit("conversation_end", {"reason": "interrupted" if interrupted else "completed"})


def _as_provider_error(exc: AgentVMError) -> ProviderError:
    return exc if isinstance(exc, ProviderError) else ProviderRejected(exc.message)


def _attempt_of(turn: TurnRecord | None) -> int:
    """1, or one more than the attempt of a worker that died mid-turn (it left the turn running)."""
    if turn is None or turn.status != "running":
        return 1
    return max(turn.attempt, 1) + 1


def _persisted(rt: Runtime, job: TurnJob) -> Json:
    return persisted_event(
        session_id=job.sessionId,
        message_id=job.userMessageId,
        saved_at=job.userSavedAt or job.enqueuedAt,
        now_ms=rt.clock.now_ms(),
        context=context_for(job),
    )


async def _set_status(
    rt: Runtime, job: TurnJob, status: TurnStatus, *, attempt: int = 0, frames: FrameMap | None = None
) -> None:
    await rt.store.put_turn(
        TurnRecord(
            turnId=job.turnId,
            sessionId=job.sessionId,
            status=status,
            updatedAt=rt.clock.now_ms(),
            userSeq=job.userSeq,
            attempt=attempt,
            frames=frames,
        )
    )


__all__ = ["TERMINAL", "context_for", "process_turn", "turn_id_for"]
