"""How a turn's attempt ends, by one path: the attempt says how it ends (an ``Ending``), and
``finish`` does what every end does, in one order.

``finish``: store the turn's status (with the frame map of what the attempt sent), then send the
frames the sink holds (results are persisted before the end is seen), charge what the turn stored
(``security/storage_quota.py``), close the sink, drop the turn's interrupt signal and count the
attempt (``observability/metrics.py``, one that ran the loop), and answer the AgentX v2
``message.send`` waiting for the turn (``turns/status.py``). ``ended`` is a completed, interrupted
or failed turn's part before that: its reply (or error) stored, its terminal frames held
(``emit_terminal``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from agentvm.messages import AssistantMessage, ErrorMessage, TextPart, message_to_wire
from agentvm.observability.metrics import record_turn, turn_status
from agentvm.streaming.frames import error_occurred_data
from agentvm.turns.hooks import token_usage
from agentvm.turns.status import answer_send, set_status

if TYPE_CHECKING:
    from agentvm.agent.context import TurnContext
    from agentvm.agent.loop import TurnOutcome
    from agentvm.events import Json
    from agentvm.messages import Message
    from agentvm.records import ImageRecord, TurnJob, TurnStatus
    from agentvm.runtime import Runtime
    from agentvm.streaming.sink import CoalescingSink
    from agentvm.turns.hooks import TurnHooks


@dataclasses.dataclass(frozen=True)
class LoopRun:
    """An attempt that ran the loop: counted when it ends, then compacted and titled if it ended."""

    outcome: TurnOutcome
    hooks: TurnHooks
    image: ImageRecord
    context: TurnContext


@dataclasses.dataclass(frozen=True)
class Ending:
    """How an attempt ends: what ``finish`` stores, sends, charges and answers."""

    status: TurnStatus  # stored as the turn's, and the status a v2 ``message.send`` is answered with
    store: bool = True  # False: a redelivered job of a finished turn (its status is stored already)
    attempt: int = 0
    sink: CoalescingSink | None = None  # holding the attempt's terminal frames; None: it sent none
    error: Json | None = None  # the answer's error
    stored_bytes: int = 0  # the turn's messages not charged yet (charged after the frames are out)
    run: LoopRun | None = None


async def ended(
    rt: Runtime, job: TurnJob, sink: CoalescingSink, run: LoopRun, attempt: int, started_ms: int
) -> Ending:
    """The turn completed, was interrupted or failed: store its reply (or error) and hold its
    terminal frames."""
    outcome, hooks = run.outcome, run.hooks
    if outcome.interrupted:  # the turn saw the cancel: say so at once, before persisting and the end
        sink.emit("interrupted", {"agentId": job.agentId, "containerId": job.containerId})
    status: TurnStatus = "interrupted" if outcome.interrupted else "failed" if outcome.error else "completed"
    sink.hold()  # the terminal frames wait for the status write (with what the turn sent): finish
    result: Message | None = None
    if outcome.last is not None and not outcome.last.wants_tools:
        # The final step's text (a tool step's text was stored with its calls).
        result = _result_message(rt, job, outcome, started_ms)
    stored_bytes = hooks.stored_bytes  # the turn's messages, charged with one write: finish
    if result is not None:
        appended = await rt.store.append_message(
            job.sessionId, result, idempotency_key=f"result:{job.turnId}"
        )
        result = appended.message
        if appended.created:
            stored_bytes += len(result.model_dump_json())
    if outcome.error is not None and not outcome.interrupted:
        error = ErrorMessage(
            id=rt.ids.new("msg"),
            timestamp=rt.clock.now_ms(),
            content=outcome.error.message,
            errorCode=outcome.error.code,
            parentId=job.userMessageId,
        )
        appended = await rt.store.append_message(job.sessionId, error, idempotency_key=f"error:{job.turnId}")
        if appended.created:
            stored_bytes += len(appended.message.model_dump_json())
        if result is not None:
            sink.emit("assistant_message", message_to_wire(result), ref=result.id)
        result = appended.message
    emit_terminal(
        sink,
        result,
        stop_reason=outcome.stop_reason or "end_turn",
        interrupted=outcome.interrupted,
        stopped=hooks.stop_sent,
    )
    failure = outcome.error if status == "failed" else None
    return Ending(
        status,
        attempt=attempt,
        sink=sink,
        error=None if failure is None else {"code": failure.code, "message": failure.message},
        stored_bytes=stored_bytes,
        run=run,
    )


async def finish_turn(rt: Runtime, job: TurnJob, end: Ending) -> None:
    """The one way an attempt ends, whichever its end: store the status (with the frame map of what
    the attempt sent), then send the frames the sink holds (the end is seen only once it is stored),
    charge what the turn stored (after the frames are out: no wait for it), close the sink, drop the
    turn's interrupt signal and count the attempt (one that ran the loop), and answer the v2
    ``message.send`` waiting for the turn."""
    sink = end.sink
    if end.store:
        frames = None if sink is None else sink.frame_map()
        await set_status(rt, job, end.status, attempt=end.attempt, frames=frames)
        if rt.webhooks is not None:  # the tenant's endpoints get the event (turns/webhooks.py)
            from agentvm.turns.webhooks import record_turn_event

            await record_turn_event(rt, job, end.status, end.error, attempt=end.attempt)
    if sink is not None:
        sink.release()
        await charge_storage(rt, job, end.stored_bytes)
        await sink.aclose()
    if end.run is not None:
        rt.signals.forget(job.turnId)
        _count(rt, job, end.run.outcome, end.run.hooks)
    await answer_send(rt, job, end.status, end.error)


async def charge_storage(rt: Runtime, job: TurnJob, stored_bytes: int) -> None:
    """Count what the turn stored (its reply, calls and results) in the tenant's storage account:
    one write per attempt, never a refusal (the turn was accepted; security/storage_quota.py)."""
    if rt.storage_quota is not None and stored_bytes > 0:
        await rt.storage_quota.charge(job.tenantId, stored_bytes)


def _count(rt: Runtime, job: TurnJob, outcome: TurnOutcome, hooks: TurnHooks) -> None:
    """The attempt's figures (observability/metrics.py) and the end of its trace: once it has
    ended or suspended."""
    hooks.trace.end(outcome, turn_status(outcome))
    record_turn(
        rt,
        job,
        outcome,
        model=hooks.model_ref,
        duration_s=rt.clock.monotonic() - hooks.started_mono,
        tool_calls=hooks.tool_calls,
        tool_failures=hooks.tool_failures,
    )


def _result_message(
    rt: Runtime, job: TurnJob, outcome: TurnOutcome, started_ms: int
) -> AssistantMessage | None:
    """The turn's reply: the final step's text (None: it has none)."""
    if not outcome.text.strip():
        return None
    last = outcome.last
    # One step: the message's usage is the turn's; in a tool turn, the final model call's.
    tokens = (
        (outcome.input_tokens, outcome.output_tokens)
        if last is None
        else (last.input_tokens, last.output_tokens)
    )
    return AssistantMessage(
        id=outcome.message_id or rt.ids.new("msg"),
        timestamp=started_ms if outcome.steps <= 1 else rt.clock.now_ms(),
        content=[TextPart(text=outcome.text)],
        parentId=job.userMessageId,
        usage=token_usage(*tokens),
    )


def emit_terminal(
    sink: CoalescingSink,
    result: Message | None,
    *,
    stop_reason: str,
    interrupted: bool,
    stopped: bool = False,
) -> None:
    """The frames that end a turn, after ``result`` (its reply, an error, or None): an error's, or the
    message's stop (unless the last step sent its own: ``stopped``), the reply and the end."""
    if isinstance(result, ErrorMessage):
        sink.emit("error_message", message_to_wire(result))
        sink.emit("error_occurred", error_occurred_data(result))
        return
    if not stopped:
        sink.emit("message_stop", {"stopReason": stop_reason})
    if result is not None:
        sink.emit("assistant_message", message_to_wire(result), ref=result.id)
    sink.emit("conversation_end", {"reason": "interrupted" if interrupted else "completed"})


__all__ = ["Ending", "LoopRun", "charge_storage", "emit_terminal", "ended", "finish_turn"]
