"""The loop's hooks for a stored, streamed turn (``agent.loop.StepHooks``): ``TurnHooks`` bills each
model call, stores each tool call and result (with its idempotency key: ``call:``/``tool:<turn>:<call
id>``, ``step:<turn>:<n>``), records the waits of a call that needs approval, the client's result or
a sandbox worker (``turns/suspend.py``), and sends each frame made from the stored message, so a
replay sends the same. ``context_for`` is the event context of a turn's frames.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentvm.agent.history import stored_output
from agentvm.agent.tools.toolbox import ToolRun
from agentvm.events import EventContext, event
from agentvm.llm import ToolResult
from agentvm.messages import (
    AssistantMessage,
    TextPart,
    TokenUsage,
    ToolCallMessage,
    ToolCallPart,
    ToolResultMessage,
    ToolResultOutput,
    ToolResultPart,
)
from agentvm.observability.tracing import NO_TRACE
from agentvm.records import JOB_SUFFIX, TASK_SUFFIX, ToolWait, UsageRecord
from agentvm.security.budgets import BudgetedModelClient
from agentvm.streaming.frames import message_frame_data
from agentvm.turns.mcp_tasks import cancel_task, task_of_wait
from agentvm.turns.suspend import sandbox_job
from agentvm.turns.waits import wait_event_data

if TYPE_CHECKING:
    from agentvm.agent.loop import StepOutcome
    from agentvm.agent.tools.toolbox import Toolbox
    from agentvm.agent.window import PrefixBreak
    from agentvm.llm import ToolCall
    from agentvm.messages import Message
    from agentvm.observability.tracing import TurnTrace, _NoTrace
    from agentvm.ports import McpTaskHandedOff, ModelClient
    from agentvm.records import TurnJob, WaitKind
    from agentvm.runtime import Runtime
    from agentvm.security.budgets import Scope
    from agentvm.streaming.sink import CoalescingSink

log = logging.getLogger("agentvm.turns")


def context_for(job: TurnJob) -> EventContext:
    """The context every frame of the turn carries (its container, image, agent, session and turn)."""
    return EventContext(
        containerId=job.containerId,
        imageId=job.imageId,
        agentId=job.agentId,
        sessionId=job.sessionId,
        turnId=job.turnId,
    )


class TurnHooks:
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
        *,
        routed_by: str | None = None,
        prefix_break: PrefixBreak | None = None,
    ) -> None:
        self.rt = rt
        self.job = job
        self.sink = sink
        self.client = client
        self.model_ref = model_ref
        self.routed_by = routed_by  # the routing rule that chose model_ref (agent/model_policy.py)
        self.prefix_break = (
            prefix_break  # why the prompt prefix differs from the last turn's (agent/window.py)
        )
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

    def on_model_retry(self, attempt: int, delay_ms: int, reason: str) -> None:
        """The model call failed before answering and is made again after ``delay_ms``
        (``agent/retry.py``): the client can say so instead of showing seconds of silence."""
        self.sink.emit("model_retry", {"attempt": attempt, "delayMs": delay_ms, "reason": reason})

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
        # from the stored reply with no call (only this record holds its usage):
        # adapters/aws/dynamodb/usage.py.
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
                routedBy=self.routed_by,
                prefixBreak=self.prefix_break if first else None,
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
                usage=token_usage(step.input_tokens, step.output_tokens),
            )
            stored = await self._append(message, f"step:{self.job.turnId}:{step.index}")
            self._emit("assistant_message", stored)

    async def tool_waits(
        self,
        step: StepOutcome,
        call: ToolCall,
        kind: WaitKind,
        timeout_s: float,
        *,
        handoff: McpTaskHandedOff | None = None,
    ) -> ToolRun | None:
        rt, job = self.rt, self.job
        if (
            rt.waits is None
            or (kind == "sandbox" and rt.sandbox_jobs is None)
            or (kind == "mcp_task" and (rt.mcp_tasks is None or handoff is None))
        ):
            who = {
                "approval": "approval",
                "client": "the client's result",
                "sandbox": "a sandbox worker",
                "mcp_task": "its MCP task's end",
            }[kind]
            note = f"Error: {call.name} needs {who}, and this server cannot suspend a turn to wait for it"
            return ToolRun(ToolResult(call.id, call.name, note, is_error=True), "error", 0.0)
        now = rt.clock.now_ms()
        deadline = now + int(timeout_s * 1000)
        key = call.id + (JOB_SUFFIX if kind == "sandbox" else TASK_SUFFIX if kind == "mcp_task" else "")
        task = None
        if handoff is not None:
            assert rt.mcp_tasks is not None
            task = task_of_wait(rt.mcp_tasks, job, key, handoff, now)
        wait = ToolWait(
            tenantId=job.tenantId,
            containerId=job.containerId,
            imageId=job.imageId,
            sessionId=job.sessionId,
            turnId=job.turnId,
            toolCallId=key,
            toolName=call.name,
            input=call.input,
            kind=kind,
            createdAt=now,
            deadlineAt=deadline,
            # an MCP task's wait is looked at by the sweeper at each poll (turns/mcp_tasks.py)
            checkAt=deadline if task is None else min(deadline, int(task["pollAt"])),
            # its continuation: a v2 message.send was answered when the turn suspended
            job=job.model_copy(update={"resume": None, "rpcConnectionId": None, "rpcId": None}),
            task=task,
        )
        if not await rt.waits.put_wait(wait):  # a redelivered attempt: the first one recorded it
            wait = await rt.waits.get_wait(job.turnId, wait.toolCallId) or wait
        if kind in ("sandbox", "mcp_task"):
            for other in self._wait_keys.get(call.id, set()) - {wait.toolCallId}:
                await rt.waits.consume(job.turnId, other)  # its approval is used: the job answers now
        self.remember(wait)
        if kind == "mcp_task":
            log.info("turn suspends on an MCP task", extra={"turn_id": job.turnId, "tool": call.name})
            return None
        if kind == "sandbox":
            assert rt.sandbox_jobs is not None
            if wait.status == "pending":  # (again, if a redelivery finds it pending: idempotent)
                tool = self.toolbox.get(call.name) if self.toolbox is not None else None
                limits = getattr(tool, "limits", None)
                await rt.sandbox_jobs.submit(sandbox_job(rt, wait, limits))
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
            output = stored_output(result, structured=run.structured)
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
            waited = self.waits.get(result.call_id)
            if waited is not None and waited.kind == "mcp_task" and waited.status == "pending":
                await cancel_task(self.rt, waited)  # answered without its task (interrupted): stop it
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


def token_usage(input_tokens: int, output_tokens: int) -> TokenUsage:
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


__all__ = ["TurnHooks", "context_for", "token_usage"]
