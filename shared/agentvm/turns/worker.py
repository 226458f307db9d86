"""Running one queued turn: rebuild the agent, run the loop, persist each step, send the events.

Exactly-once rules: a turn whose record is terminal is skipped (a redelivered job does nothing);
a turn whose reply is already stored (the worker died after persisting) is finished from the
stored reply without calling the model again; every message is appended with an idempotency key
derived from the turn and step (``call:``/``tool:<turn>:<call id>``, ``step:<turn>:<n>``,
``result:``/``error:<turn>``), so no path appends anything twice. A turn redelivered mid-way
resumes after its last stored step: a tool whose result is stored is never run again, and one that
was running when the worker died is reported to the model as interrupted (or run again when its
definition says it is idempotent).

Interrupts: the in-process signal (``rt.signals``) where gateway and worker share a process; on
AWS the worker's one poll for all its turns (``agent.cancel_poll``, whose docstring argues why an
interrupt racing the turn's start is never missed: the running write names the poller, then the
turn's own mark is read once, strongly consistent).

A turn that waits on a tool call (approval, a client-side tool: ``agent.waits``) ends its attempt
``suspended``; its continuation (the job with ``resume`` set) is a later attempt that numbers its
frames right after the suspended attempt's and starts from the open step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING

from agentvm.agent.compaction import compact_after_turn, prepare_context
from agentvm.agent.history import open_step, pending_user_ids, result_of, turn_steps
from agentvm.agent.loop import PendingStep, TurnOutcome, run_turn
from agentvm.agent.tools.declarations import DEFAULT_MAX_STEPS
from agentvm.agent.tools.toolbox import ToolRun
from agentvm.errors import AgentVMError, ProviderError, ProviderRejected, SessionBusy, StorageUnavailable
from agentvm.events import EventContext, event, system_error
from agentvm.llm import ToolCall, ToolResult
from agentvm.messages import (
    AssistantMessage,
    ErrorMessage,
    TextPart,
    TokenUsage,
    ToolCallMessage,
    ToolCallPart,
    ToolResultMessage,
    ToolResultOutput,
    ToolResultPart,
    message_to_wire,
)
from agentvm.observability.logcontext import bind, unbind
from agentvm.observability.metrics import record_turn, turn_status
from agentvm.observability.tracing import NO_TRACE, start_turn
from agentvm.records import JOB_SUFFIX, TERMINAL, SandboxJob, ToolWait, TurnRecord, UsageRecord, turn_id_for
from agentvm.security.budgets import BudgetedModelClient
from agentvm.streaming.agentx_v2_events import send_result
from agentvm.streaming.fanout import Fanout
from agentvm.streaming.frames import (
    error_occurred_data,
    first_seq,
    last_seq,
    message_frame_data,
    persisted_event,
)
from agentvm.streaming.sink import CoalescingSink
from agentvm.turns.waits import resolution_of, wait_event_data

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterator

    from agentvm.agent.context import TurnContext
    from agentvm.agent.loop import Resolution, StepOutcome
    from agentvm.agent.tools.toolbox import Toolbox
    from agentvm.events import Json
    from agentvm.messages import Message
    from agentvm.observability.tracing import TurnTrace, _NoTrace
    from agentvm.ports import ModelClient, SandboxLimits
    from agentvm.records import FrameMap, ImageRecord, TurnJob, TurnStatus, WaitKind
    from agentvm.runtime import Runtime
    from agentvm.security.budgets import Scope

log = logging.getLogger("agentvm.turns")


def context_for(job: TurnJob) -> EventContext:
    return EventContext(
        containerId=job.containerId,
        imageId=job.imageId,
        agentId=job.agentId,
        sessionId=job.sessionId,
        turnId=job.turnId,
    )


async def process_turn(rt: Runtime, job: TurnJob) -> TurnOutcome | None:
    """Run one turn job to completion. Returns None when there was nothing to do.

    If storage cannot be written (a full disk), the session's subscribers are told at once with a
    ``system_error`` (``storage_unavailable``, not stored: nothing can be), and the error goes to
    the queue, which runs the turn again later: it resumes from what was stored."""
    if rt.config is not None:  # the config centre's layers for this tenant (configcentre/centre.py)
        rt = await rt.config.runtime_for(rt, job.tenantId)
    started = rt.clock.monotonic()
    ids = bind(
        tenant_id=job.tenantId, container_id=job.containerId, session_id=job.sessionId, turn_id=job.turnId
    )
    try:
        return await _process_turn(rt, job)
    except Exception as exc:  # the attempt failed (the queue retries it): counted as failed
        failure = exc if isinstance(exc, AgentVMError) else AgentVMError("internal error")
        record_turn(
            rt,
            job,
            TurnOutcome(model="", error=failure),
            model="",
            duration_s=rt.clock.monotonic() - started,
            tool_calls=0,
            tool_failures=0,
        )
        if not isinstance(exc, StorageUnavailable):
            raise
        log.warning("turn could not be stored; it will be retried", extra={"turn_id": job.turnId})
        frame = system_error(
            exc.message,
            now_ms=rt.clock.now_ms(),
            code=exc.code,
            request_id=job.requestId,
            details={"sessionId": job.sessionId, "turnId": job.turnId},
        )
        with contextlib.suppress(Exception):
            await Fanout(rt.connections, rt.push).publish_frame(job.sessionId, frame)
        raise
    finally:
        unbind(ids)
        rt.progress.forget(job.turnId)


async def _process_turn(rt: Runtime, job: TurnJob) -> TurnOutcome | None:
    store = rt.store
    turn = await store.get_turn(job.turnId)
    if turn is not None and turn.status in TERMINAL:
        log.info("turn already finished; skipping redelivery", extra={"turn_id": job.turnId})
        await _answer_send(rt, job, turn.status)  # its worker may have died before answering
        return None
    resuming = turn is not None and turn.status == "suspended"
    if job.resume is not None and turn is None:
        return None  # a continuation of a turn that was never stored: nothing to continue
    attempt = _attempt_of(turn)
    image = await store.get_image(job.tenantId, job.imageId)
    if image is None:  # deleted while queued
        await _set_status(rt, job, "failed")
        await _answer_send(rt, job, "failed", {"code": "not_found", "message": "the image was deleted"})
        return None
    # The summary of older history (if any) and the messages after it: bounded reads (compaction.py).
    # A first attempt (nothing of it stored: its status is still the gateway's `queued`) needs only
    # the history up to its user message: read eventually consistent, checked whole (context.py).
    first_attempt = job.resume is None and (turn is None or turn.status == "queued")
    context = await prepare_context(rt, job, image, first_attempt=first_attempt)
    history = context.messages
    sink = CoalescingSink(
        session_id=job.sessionId,
        context=context_for(job),
        fanout=Fanout(rt.connections, rt.push),
        clock=rt.clock,
        flush_s=rt.turns.flush_s,
        flush_max_s=rt.turns.flush_max_s,
        subscriber_refresh_s=rt.turns.subscriber_refresh_s,
        first_seq=_first_seq(job, turn, attempt),
        batch_flush_max_s=rt.turns.batch_flush_max_s,
        batch_flush_s=rt.turns.batch_flush_s,
        began_ms=job.userSavedAt or job.enqueuedAt,
    )
    if not resuming:
        # every attempt's first frame (a continuation's: its results); it goes out with the turn's
        # message_start, one flush window later at most (one WebSocket pass less: streaming.sink)
        sink.emit_frame(_persisted(rt, job), linger=True)
    stored = result_of(history, job.userMessageId)
    if stored is not None:
        # A previous attempt persisted the reply and died before finishing: finish from storage.
        sink.hold()
        _emit_terminal(sink, stored, stop_reason="end_turn", interrupted=False)
        done: TurnStatus = "failed" if isinstance(stored, ErrorMessage) else "completed"
        await _set_status(rt, job, done, attempt=attempt, frames=sink.frame_map())
        sink.release()
        await sink.aclose()
        await _answer_send(rt, job, done)
        return None

    cancelled = rt.signals.event_for(job.turnId)
    with _polled(rt, job, cancelled) as poller:  # until the attempt suspends or ends
        # the running record names the poller: an interrupt from now on marks the turn for it
        await _set_status(rt, job, "running", attempt=attempt, poller=poller)
        if attempt > 1 and not resuming:
            # A client still subscribed may hold the half-streamed message of the attempt that died:
            # close it as interrupted, so this attempt starts a new message instead of splicing into it.
            sink.emit("message_stop", {"stopReason": "end_turn"})
            sink.emit("conversation_end", {"reason": "interrupted"})
        started_ms = rt.clock.now_ms()
        toolbox = await _toolbox(rt, image)
        try:
            outcome, hooks = await _run(rt, job, image, context, sink, toolbox, started_ms, cancelled)
        finally:
            if toolbox is not None:
                await toolbox.aclose()
    if outcome.suspended:
        await _charge_storage(rt, job, hooks.stored_bytes)
        await _suspend(rt, job, sink, hooks, outcome, attempt)
        _count(rt, job, outcome, hooks)
        return outcome
    if outcome.interrupted:  # the turn saw the cancel: say so at once, before persisting and the end
        sink.emit("interrupted", {"agentId": job.agentId, "containerId": job.containerId})
    status: TurnStatus = "interrupted" if outcome.interrupted else "failed" if outcome.error else "completed"
    sink.hold()  # the terminal frames wait for the status write (with what the turn sent) below
    result = None
    if outcome.last is not None and not outcome.last.wants_tools:
        # The final step's text (a tool step's text was stored with its calls).
        result = _result_message(rt, job, outcome, started_ms)
    stored_bytes = hooks.stored_bytes  # the turn's messages, charged with one write below
    if result is not None:
        appended = await store.append_message(job.sessionId, result, idempotency_key=f"result:{job.turnId}")
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
        appended = await store.append_message(job.sessionId, error, idempotency_key=f"error:{job.turnId}")
        if appended.created:
            stored_bytes += len(appended.message.model_dump_json())
        if result is not None:
            sink.emit("assistant_message", message_to_wire(result), ref=result.id)
        result = appended.message
    _emit_terminal(
        sink,
        result,
        stop_reason=outcome.stop_reason or "end_turn",
        interrupted=outcome.interrupted,
        stopped=hooks.stop_sent,
    )
    await _set_status(rt, job, status, attempt=attempt, frames=sink.frame_map())
    sink.release()
    await _charge_storage(rt, job, stored_bytes)  # after the terminal frames are out: no wait for it
    await sink.aclose()
    rt.signals.forget(job.turnId)
    _count(rt, job, outcome, hooks)
    failure = outcome.error if status == "failed" else None
    await _answer_send(
        rt, job, status, None if failure is None else {"code": failure.code, "message": failure.message}
    )
    await compact_after_turn(rt, job, image, context, outcome)  # after the reply; never raises
    if rt.turns.auto_title:  # name an untitled session (opt-in; turns/title.py); never raises
        from agentvm.turns.title import title_after_turn

        await title_after_turn(rt, job, image, context, outcome)
    return outcome


async def _charge_storage(rt: Runtime, job: TurnJob, stored_bytes: int) -> None:
    """Count what the turn stored (its reply, calls and results) in the tenant's storage account:
    one write per attempt, never a refusal (the turn was accepted; security/storage_quota.py)."""
    if rt.storage_quota is not None and stored_bytes > 0:
        await rt.storage_quota.charge(job.tenantId, stored_bytes)


def _count(rt: Runtime, job: TurnJob, outcome: TurnOutcome, hooks: _TurnHooks) -> None:
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


async def _suspend(
    rt: Runtime, job: TurnJob, sink: CoalescingSink, hooks: _TurnHooks, outcome: TurnOutcome, attempt: int
) -> None:
    """The turn waits on ``outcome.waiting``: say what for, store the status, and let the worker go."""
    sink.hold()
    waiting = [hooks.waits[c] for c in outcome.waiting if c in hooks.waits]
    sink.emit(
        "turn_suspended",
        {
            "turnId": job.turnId,
            "waitingFor": [
                {
                    "toolCallId": w.toolCallId,
                    "toolName": w.toolName,
                    "kind": w.kind,
                    "deadlineAt": w.deadlineAt,
                }
                for w in waiting
            ],
        },
    )
    await _set_status(rt, job, "suspended", attempt=attempt, frames=sink.frame_map())
    sink.release()
    await sink.aclose()
    rt.signals.forget(job.turnId)
    await _answer_send(rt, job, "suspended")
    log.info("turn suspended", extra={"turn_id": job.turnId, "waiting": len(outcome.waiting)})


async def _toolbox(rt: Runtime, image: ImageRecord) -> Toolbox | None:
    """The image's tools for this turn (None: it declares none, or the host runs no tools), plus
    the search tools of the knowledge resources it was built with (``agent.knowledge_tools``)."""
    box = None
    if rt.tools is not None and (image.tools or image.mcpServers):
        box = await rt.tools.toolbox(rt.store, image, storage=rt.storage_quota)
    knowledge = [t for t in image.tools or [] if t.get("type") == "knowledge"]
    if knowledge and rt.resources is not None:
        from agentvm.agent.tools.knowledge import knowledge_tools
        from agentvm.agent.tools.toolbox import Toolbox

        found = knowledge_tools(knowledge, rt.resources.store)
        if box is None:
            box = Toolbox(found)
        else:
            box.add(found)
    return box


async def _run(
    rt: Runtime,
    job: TurnJob,
    image: ImageRecord,
    context: TurnContext,
    sink: CoalescingSink,
    toolbox: Toolbox | None,
    started_ms: int,
    cancelled: asyncio.Event,
) -> tuple[TurnOutcome, _TurnHooks]:
    # After the running write, strongly consistent: an interrupt whose read of the turn record
    # missed that write (so marked no poller) is seen here (turns/cancel_poll.py)
    if await rt.store.is_cancel_requested(job.sessionId, job.turnId):
        cancelled.set()
    blocked = await _suspended_before(rt, job, context.messages)
    if blocked is not None:
        hooks = _TurnHooks(rt, job, sink, None, image.model or "", started_ms)
        busy = SessionBusy(
            f"an earlier turn of this session ({blocked}) is suspended, waiting for a tool call to be "
            "approved or answered: answer it or interrupt it, then send this message again"
        )
        return TurnOutcome(model=image.model or "", error=busy), hooks
    try:
        client, model_name, model_ref = rt.models.resolve(image.model)
    except AgentVMError as exc:
        hooks = _TurnHooks(rt, job, sink, None, image.model or "", started_ms)
        return TurnOutcome(model=image.model or "", error=_as_provider_error(exc)), hooks
    hooks = _TurnHooks(rt, job, sink, client, model_ref, started_ms)
    hooks.toolbox = toolbox
    hooks.trace = start_turn(
        job, agent_name=image.name or "", model_ref=model_ref, max_tokens=rt.turns.max_output_tokens
    )
    request = context.request(
        model=model_name,
        image_prompt=image.systemPrompt,
        up_to_user_id=job.userMessageId,
        max_tokens=rt.turns.max_output_tokens,
        tools=toolbox.specs if toolbox is not None else (),
    )
    # A redelivered turn resumes after the steps a previous attempt stored.
    done_steps = turn_steps(context.messages, job.userMessageId)
    pending = await _pending(rt, job, context.messages, toolbox, hooks)
    outcome = await run_turn(
        request,
        hooks,
        toolbox=toolbox,
        cancelled=cancelled,
        clock=rt.clock,
        max_steps=image.maxSteps or DEFAULT_MAX_STEPS,
        first_step=len(done_steps),
        deadline_s=rt.turns.turn_deadline_s or None,
        pending=pending,
    )
    return outcome, hooks


async def _suspended_before(rt: Runtime, job: TurnJob, history: list[Message]) -> str | None:
    """An earlier turn of the session that is suspended (this one cannot run before it ends).
    Reads nothing in the common case: only unanswered user messages before this one are looked up."""
    unanswered = pending_user_ids(history)
    mine = job.userMessageId
    earlier = unanswered[: unanswered.index(mine)] if mine in unanswered else unanswered
    for user_id in earlier:
        turn = await rt.store.get_turn(turn_id_for(user_id))
        if turn is not None and turn.status == "suspended":
            return turn.turnId
    return None


async def _pending(
    rt: Runtime, job: TurnJob, history: list[Message], toolbox: Toolbox | None, hooks: _TurnHooks
) -> PendingStep | None:
    step = open_step(history, job.userMessageId)
    if step is None or toolbox is None:
        return None
    from agentvm.agent.history import tool_result_of

    rerun = frozenset(
        c.toolCall.id
        for c in step.missing
        if (tool := toolbox.get(c.toolCall.name)) is not None and tool.idempotent
    )
    return PendingStep(
        text=step.text,
        calls=[ToolCall(c.toolCall.id, c.toolCall.name, dict(c.toolCall.input)) for c in step.calls],
        results={cid: tool_result_of(m) for cid, m in step.results.items()},
        rerun=rerun,
        resolutions=await _resolutions(rt, job, {c.toolCall.id for c in step.missing}, hooks),
    )


async def _resolutions(
    rt: Runtime, job: TurnJob, missing: set[str], hooks: _TurnHooks
) -> dict[str, Resolution]:
    """How each open call the turn waited on was answered (one read: the turn's waits). A pending
    wait past its deadline is timed out here (the sweeper only wakes the turn up)."""
    if rt.waits is None or not missing:
        return {}
    out: dict[str, Resolution] = {}
    now = rt.clock.now_ms()
    for wait in await rt.waits.turn_waits(job.turnId):  # oldest first: a job's wait after its approval's
        if wait.callId not in missing or wait.consumed:
            continue
        if wait.status == "pending" and wait.deadlineAt <= now:
            timed_out = await rt.waits.decide(
                wait.turnId, wait.toolCallId, {"status": "timed_out", "decidedAt": now}
            )
            wait = timed_out or await rt.waits.get_wait(wait.turnId, wait.toolCallId) or wait
        hooks.remember(wait)
        out[wait.callId] = resolution_of(wait)
    return out


class _TurnHooks:
    """The loop's hooks for a stored, streamed turn: bill each step, store each call and result,
    then send its frames (each frame made from the stored message: replay sends the same)."""

    def __init__(
        self,
        rt: Runtime,
        job: TurnJob,
        sink: CoalescingSink,
        client: ModelClient | None,
        model_ref: str,
        started_ms: int,
    ) -> None:
        self.rt = rt
        self.job = job
        self.sink = sink
        self.client = client
        self.model_ref = model_ref
        self.started_ms = started_ms
        self.stop_sent = False  # the last step's message_stop is out (a tool step sends its own)
        self._step_started = rt.clock.monotonic()
        # the scopes with a budget, as this step's model call looked them up (their counters get
        # its tokens); None: not looked up (record looks them up)
        self.budget_scopes: frozenset[Scope] | None = None
        self.waits: dict[str, ToolWait] = {}  # the calls this turn waits on: the latest wait, by call id
        self._wait_keys: dict[str, set[str]] = {}  # every wait of a call (approval, then its job)
        self.toolbox: Toolbox | None = None
        self.started_mono = rt.clock.monotonic()  # for the turn's duration (metrics)
        self.tool_calls = 0  # results stored by this attempt (metrics), and how many were errors
        self.tool_failures = 0
        self.trace: TurnTrace | _NoTrace = NO_TRACE  # OpenTelemetry spans (observability/tracing.py)
        self.stored_bytes = 0  # the calls and results this attempt stored, charged once at its end

    # frames during the stream
    def on_start(self, message_id: str, model: str) -> None:
        self.rt.progress.started(self.job.turnId)
        self.stop_sent = False
        self.sink.new_message()
        self.sink.emit("message_start", {"messageId": message_id, "model": model})
        self.sink.emit("conversation_start", {"messageId": message_id})

    def on_text(self, text: str) -> None:
        self.rt.progress.delta(self.job.turnId)
        self.sink.text(text)

    def next_send_at(self) -> float | None:
        """When buffered text will be sent (loop time), if model reads are paced (agent/pacing.py)."""
        return self.sink.next_flush_at() if self.rt.turns.pace_reads else None

    def send_text_now(self) -> None:
        """Send the buffered text at once (a paced read that came after its window)."""
        self.sink.flush()

    def on_tool_start(self, call_id: str, name: str) -> None:
        self.sink.emit("tool_use_start", {"toolCallId": call_id, "toolName": name})
        self.sink.emit("tool_planned", {"toolId": call_id, "toolName": name})
        self.sink.emit("tool_executing", {"toolId": call_id, "toolName": name, "input": {}})

    async def client_for_step(self, index: int) -> ModelClient:
        assert self.client is not None
        self._step_started = self.rt.clock.monotonic()
        self.trace.model_call_started()
        client, self.budget_scopes = await _within_budget(self.rt, self.job, self.client)
        return client

    async def step_finished(self, step: StepOutcome) -> None:
        rt, job = self.rt, self.job
        self.trace.model_call_finished(step)
        rt.progress.forget(job.turnId)  # the call's tokens are its usage record's from now on
        first = step.index == 0
        if not first and step.message_id is None and not (step.input_tokens or step.output_tokens):
            return  # a later step refused before the model was reached: nothing to bill
        # Now, before the reply: the first durable write after the call. A redelivery after a crash
        # past this point either calls the model again (this record stays the turn's one) or finishes
        # from the stored reply with no call (only this record holds its usage): dynamodb_usage.py.
        billed = await rt.store.put_usage(
            UsageRecord(
                turnId=job.turnId if first else f"{job.turnId}:step:{step.index}",
                tenantId=job.tenantId,
                containerId=job.containerId,
                imageId=job.imageId,
                sessionId=job.sessionId,
                model=self.model_ref,
                inputTokens=step.input_tokens,
                outputTokens=step.output_tokens,
                cacheReadTokens=step.cache_read_tokens,
                cacheWriteTokens=step.cache_write_tokens,
                ttftMs=None if step.ttft_s is None else int(step.ttft_s * 1000),
                durationMs=int((rt.clock.monotonic() - self._step_started) * 1000),
                status="interrupted" if step.interrupted else "failed" if step.error else "completed",
                createdAt=rt.clock.now_ms(),
                kind="turn" if first else "step",
                estimated=step.usage_estimated,
            )
        )
        # Counted only by the attempt that stored the usage record: the counters agree with the bill.
        if billed and rt.budgets is not None:
            tokens = step.input_tokens + step.output_tokens
            await rt.budgets.record(job.tenantId, job.containerId, tokens, scopes=self.budget_scopes)

    async def on_tool_call(self, step: StepOutcome, call: ToolCall) -> None:
        message = ToolCallMessage(
            id=self.rt.ids.new("msg"),
            timestamp=self.rt.clock.now_ms(),
            toolCall=ToolCallPart(id=call.id, name=call.name, input=call.input),
            parentId=self.job.userMessageId,
        )
        stored = await self._append(message, f"call:{self.job.turnId}:{call.id}")
        for kind in ("input_json_delta", "tool_use_stop", "tool_call_message"):
            self._emit(kind, stored)

    async def tools_planned(self, step: StepOutcome) -> None:
        self.sink.emit("message_stop", {"stopReason": "tool_use"})
        self.stop_sent = True
        if step.text.strip():
            message = AssistantMessage(
                id=step.message_id or self.rt.ids.new("msg"),
                timestamp=self.rt.clock.now_ms(),
                content=[TextPart(text=step.text)],
                parentId=self.job.userMessageId,
                usage=_usage(step.input_tokens, step.output_tokens),
            )
            stored = await self._append(message, f"step:{self.job.turnId}:{step.index}")
            self._emit("assistant_message", stored)

    async def tool_waits(
        self, step: StepOutcome, call: ToolCall, kind: WaitKind, timeout_s: float
    ) -> ToolRun | None:
        rt, job = self.rt, self.job
        if rt.waits is None or (kind == "sandbox" and rt.sandbox_jobs is None):
            who = {"approval": "approval", "client": "the client's result", "sandbox": "a sandbox worker"}[
                kind
            ]
            note = f"Error: {call.name} needs {who}, and this server cannot suspend a turn to wait for it"
            return ToolRun(ToolResult(call.id, call.name, note, is_error=True), "error", 0.0)
        now = rt.clock.now_ms()
        deadline = now + int(timeout_s * 1000)
        wait = ToolWait(
            tenantId=job.tenantId,
            containerId=job.containerId,
            imageId=job.imageId,
            sessionId=job.sessionId,
            turnId=job.turnId,
            toolCallId=call.id + JOB_SUFFIX if kind == "sandbox" else call.id,
            toolName=call.name,
            input=call.input,
            kind=kind,
            createdAt=now,
            deadlineAt=deadline,
            checkAt=deadline,
            # its continuation: a v2 message.send was answered when the turn suspended
            job=job.model_copy(update={"resume": None, "rpcConnectionId": None, "rpcId": None}),
        )
        if not await rt.waits.put_wait(wait):  # a redelivered attempt: the first one recorded it
            wait = await rt.waits.get_wait(job.turnId, wait.toolCallId) or wait
        if kind == "sandbox":
            for key in self._wait_keys.get(call.id, set()) - {wait.toolCallId}:
                await rt.waits.consume(job.turnId, key)  # its approval is used: the job answers now
        self.remember(wait)
        if kind == "sandbox":
            assert rt.sandbox_jobs is not None
            if wait.status == "pending":  # (again, if a redelivery finds it pending: idempotent)
                tool = self.toolbox.get(call.name) if self.toolbox is not None else None
                limits = getattr(tool, "limits", None)
                await rt.sandbox_jobs.submit(_sandbox_job(rt, wait, limits))
            return None
        event = "tool_approval_requested" if kind == "approval" else "client_tool_requested"
        self.sink.emit(event, wait_event_data(wait))
        return None

    def remember(self, wait: ToolWait) -> None:
        self.waits[wait.callId] = wait
        self._wait_keys.setdefault(wait.callId, set()).add(wait.toolCallId)

    async def tool_finished(self, step: StepOutcome, run: ToolRun) -> None:
        result = run.result
        if run.status == "denied":
            output = ToolResultOutput(type="execution-denied", value=result.content, reason=run.reason)
        else:
            output = ToolResultOutput(type="error-text" if result.is_error else "text", value=result.content)
        message = ToolResultMessage(
            id=self.rt.ids.new("msg"),
            timestamp=self.rt.clock.now_ms(),
            toolCallId=result.call_id,
            toolResult=ToolResultPart(id=result.call_id, name=result.name, output=output),
        )
        stored = await self._append(message, f"tool:{self.job.turnId}:{result.call_id}")
        self.tool_calls += 1
        self.tool_failures += result.is_error
        self.trace.tool_finished(run)
        if self.rt.waits is not None:
            for key in self._wait_keys.get(result.call_id, ()):
                await self.rt.waits.consume(self.job.turnId, key)
        for kind in (
            "tool_result",
            "tool_result_message",
            "tool_failed" if result.is_error else "tool_completed",
        ):
            self._emit(kind, stored)
        for change in run.files:  # a sandbox tool's workspace changes (additive: source "sandbox")
            self.sink.emit_frame(
                event(
                    "file_changed",
                    {"path": change.path, "change": change.change, "size": change.size},
                    now_ms=self.rt.clock.now_ms(),
                    source="sandbox",
                    category="workdir",
                    context=context_for(self.job).to_wire(),
                )
            )
        log.info(
            "tool call",
            extra={
                "turn_id": self.job.turnId,
                "tool": result.name,
                "status": run.status,
                "duration_ms": int(run.duration_s * 1000),
            },
        )

    async def _append(self, message: Message, key: str) -> Message:
        appended = await self.rt.store.append_message(self.job.sessionId, message, idempotency_key=key)
        if appended.created:
            self.stored_bytes += len(appended.message.model_dump_json())
        return appended.message

    def _emit(self, kind: str, message: Message) -> None:
        data = message_frame_data(kind, message)
        if data is not None:
            self.sink.emit(kind, data, ref=message.id)


async def _answer_send(rt: Runtime, job: TurnJob, status: str, error: Json | None = None) -> None:
    """An AgentX v2 ``message.send`` waits for its turn: answer it on its connection (one post)."""
    if job.rpcConnectionId is None:
        return
    payload = send_result(
        rpc_id=job.rpcId,
        instance_id=job.agentId,
        image_id=job.imageId,
        turn_id=job.turnId,
        status=status,
        error=error,
    )
    try:
        await rt.push.send(job.rpcConnectionId, payload)
    except Exception as exc:  # gone or unreachable: the client reads the turn's outcome back
        log.info(
            "message.send answer not delivered", extra={"turn_id": job.turnId, "error": type(exc).__name__}
        )


def _sandbox_job(rt: Runtime, wait: ToolWait, limits: SandboxLimits | None) -> SandboxJob:
    return SandboxJob(
        turnId=wait.turnId,
        waitId=wait.toolCallId,
        tenantId=wait.tenantId,
        containerId=wait.containerId,
        tool=wait.toolName,
        input=wait.input,
        limits=dataclasses.asdict(limits) if limits is not None else {},
        enqueuedAt=rt.clock.now_ms(),
    )


def _usage(input_tokens: int, output_tokens: int) -> TokenUsage:
    return TokenUsage(
        inputTokens=input_tokens, outputTokens=output_tokens, totalTokens=input_tokens + output_tokens
    )


async def _within_budget(
    rt: Runtime, job: TurnJob, client: ModelClient
) -> tuple[ModelClient, frozenset[Scope] | None]:
    """With budgets, the model stream is cut once the turn's output crosses what is left of them;
    and the scopes with a budget, whose counters the call's tokens go to."""
    if rt.budgets is None:
        return client, None
    limit, scopes = await rt.budgets.for_call(job.tenantId, job.containerId)
    return (client if limit is None else BudgetedModelClient(client, limit)), scopes


@contextlib.contextmanager
def _polled(rt: Runtime, job: TurnJob, cancelled: asyncio.Event) -> Iterator[str | None]:
    """On AWS the interrupt arrives in another Lambda: the worker's one poll looks for its mark
    (turns/cancel_poll.py). Yields the poller id the running record names; None: no poll (the
    local host's in-process signals)."""
    if rt.turns.cancel_poll_s <= 0:
        yield None
        return
    with rt.cancel_poll.watch(rt, job.turnId, cancelled) as poller:
        yield poller


def _result_message(
    rt: Runtime, job: TurnJob, outcome: TurnOutcome, started_ms: int
) -> AssistantMessage | None:
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
        usage=_usage(*tokens),
    )


def _emit_terminal(
    sink: CoalescingSink,
    result: Message | None,
    *,
    stop_reason: str,
    interrupted: bool,
    stopped: bool = False,
) -> None:
    if isinstance(result, ErrorMessage):
        sink.emit("error_message", message_to_wire(result))
        sink.emit("error_occurred", error_occurred_data(result))
        return
    if not stopped:
        sink.emit("message_stop", {"stopReason": stop_reason})
    if result is not None:
        sink.emit("assistant_message", message_to_wire(result), ref=result.id)
    sink.emit("conversation_end", {"reason": "interrupted" if interrupted else "completed"})


def _as_provider_error(exc: AgentVMError) -> ProviderError:
    return exc if isinstance(exc, ProviderError) else ProviderRejected(exc.message)


def _attempt_of(turn: TurnRecord | None) -> int:
    """1, or one more than the attempt before: a worker that died mid-turn (it left the turn
    running), or a continuation of a suspended turn."""
    if turn is None or turn.status not in ("running", "suspended"):
        return 1
    return max(turn.attempt, 1) + 1


def _first_seq(job: TurnJob, turn: TurnRecord | None, attempt: int) -> int:
    """A continuation numbers its frames right after the suspended attempt's; any other attempt
    from its own band (``streaming.frames``)."""
    if turn is not None and turn.status == "suspended" and turn.frames is not None:
        return last_seq(turn.frames) + 1
    return first_seq(job.userSeq, attempt)


def _persisted(rt: Runtime, job: TurnJob) -> Json:
    return persisted_event(
        session_id=job.sessionId,
        message_id=job.userMessageId,
        saved_at=job.userSavedAt or job.enqueuedAt,
        now_ms=rt.clock.now_ms(),
        context=context_for(job),
    )


async def _set_status(
    rt: Runtime,
    job: TurnJob,
    status: TurnStatus,
    *,
    attempt: int = 0,
    frames: FrameMap | None = None,
    poller: str | None = None,
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
            poller=poller,
        )
    )
    if status in TERMINAL and rt.running is not None:  # off the operator's list (observability/running.py)
        try:
            await rt.running.unmark(job.tenantId, job.containerId, job.turnId)
        except Exception as exc:  # the next listing removes a mark whose turn has ended
            log.warning(
                "could not unmark a finished turn", extra={"turn_id": job.turnId, "error": type(exc).__name__}
            )


__all__ = ["context_for", "process_turn"]
