"""``run_turn``: the agent loop. The model streams; if it asks for tools, they run (concurrently),
their results go back, and the model continues, until it stops, ``max_steps`` model calls were
made, or the turn is cancelled (interrupt, deadline).

A call that must wait (a client-side tool, a tool that needs approval: ``Toolbox.wait_for``) is
not run: ``StepHooks.tool_waits`` records it, the step's other calls run, and the turn *suspends*
(``outcome.suspended``): nothing runs while it waits. Its continuation calls ``run_turn`` again
with the open step (``PendingStep``) and how each waiting call was answered (``Resolution``).

Pure orchestration: no storage, no transport. ``StepHooks`` (implemented by ``turns.hooks``) sends
each event and persists each step's outcome as it happens, so a redelivered turn resumes after the
last completed step. Provider failures (and an ``AgentVMError`` from a wrapping client, such as a
budget cut) end the turn as data (``outcome.error``), never as an escape; tool failures become
error results for the model (``agent.tools.Toolbox``), never a failed turn.

Its size (~520 lines) is one loop and the step hooks it calls; split, a reader would follow one
step across files.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from agentvm.agent.context import estimate_request_tokens
from agentvm.agent.pacing import pace_reads_by
from agentvm.agent.retry import report_retries_to
from agentvm.errors import AgentVMError, ProviderUnavailable, StepLimitReached, TurnDeadlineExceeded
from agentvm.llm import (
    ChatTurn,
    ModelStart,
    ModelStop,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
)

if TYPE_CHECKING:
    from agentvm.agent.tools.toolbox import Toolbox, ToolRun
    from agentvm.llm import ModelRequest
    from agentvm.ports import Clock, McpTaskHandedOff, ModelClient
    from agentvm.records import WaitKind

INTERRUPTED_RESULT = "Error: the tool was stopped before it finished (the turn was interrupted)"
CUT_RESULT = "Error: not run: the model's message was cut off before it ended"


@dataclass
class StepOutcome:
    """One model call of the turn."""

    index: int  # 0 for the turn's first model call
    model: str
    text: str = ""
    message_id: str | None = None
    stop_reason: str | None = None
    calls: list[ToolCallEnd] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    usage_reported: bool = False  # False: the stream ended before the provider reported usage
    start_input_tokens: int | None = None
    cache_read_tokens: int = 0  # of input_tokens (the provider's prompt cache)
    cache_write_tokens: int = 0
    deltas: int = 0
    ttft_s: float | None = None
    error: AgentVMError | None = None
    interrupted: bool = False

    @property
    def usage_estimated(self) -> bool:
        """The tokens are ours, not the provider's: it started answering, never reported usage."""
        return not self.usage_reported and self.message_id is not None

    @property
    def wants_tools(self) -> bool:
        return bool(self.calls) and self.error is None and not self.interrupted


@dataclass
class TurnOutcome:
    """The whole turn: the last step's reply, usage summed over every step."""

    model: str
    text: str = ""  # the final step's text (what the final assistant message holds)
    message_id: str | None = None
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    usage_reported: bool = False
    deltas: int = 0
    ttft_s: float | None = None
    error: AgentVMError | None = None
    interrupted: bool = False
    steps: int = 0  # model calls made by this attempt
    tool_calls: int = 0
    tool_failures: int = 0
    last: StepOutcome | None = None
    suspended: bool = False  # waiting on ``waiting`` (call ids): the turn goes on when they are answered
    waiting: list[str] = field(default_factory=list)

    @property
    def usage_estimated(self) -> bool:
        return self.last.usage_estimated if self.last is not None else False


class StreamHooks(Protocol):
    """What one streamed model call tells the world."""

    def on_start(self, message_id: str, model: str) -> None: ...
    def on_text(self, text: str) -> None: ...
    def on_tool_start(self, call_id: str, name: str) -> None: ...
    async def on_tool_call(self, step: StepOutcome, call: ToolCall) -> None:
        """A call's input is complete: store the call, then announce it (while the model streams on)."""
        ...


class StepHooks(StreamHooks, Protocol):
    """What the loop tells the world. Sync hooks queue frames; async ones persist, then queue."""

    async def client_for_step(self, index: int) -> ModelClient:
        """The model client of step ``index`` (budgets are checked again between steps)."""
        ...

    async def step_finished(self, step: StepOutcome) -> None:
        """The model call is over (usage known): bill it."""
        ...

    async def tools_planned(self, step: StepOutcome) -> None:
        """The model's message ended asking for ``step.calls``: store the step's text, announce it."""
        ...

    async def tool_finished(self, step: StepOutcome, run: ToolRun) -> None:
        """Store one call's result, then announce it."""
        ...

    async def tool_waits(
        self,
        step: StepOutcome,
        call: ToolCall,
        kind: WaitKind,
        timeout_s: float,
        *,
        handoff: McpTaskHandedOff | None = None,
    ) -> ToolRun | None:
        """Record that ``call`` waits (for the client, approval, a sandbox job, or its MCP task:
        ``handoff``), then announce it. None: it waits; a ``ToolRun``: it cannot wait here, and
        this is its (error) result."""
        ...


@dataclass(frozen=True)
class Resolution:
    """How a waiting call was answered: ``run`` it now (approved), this ``result`` (denied, the
    client's result, timed out, cancelled), or still ``wait``."""

    action: Literal["run", "result", "wait"]
    run: ToolRun | None = None


@dataclass
class PendingStep:
    """A step a previous attempt left with calls but not all results (its worker died mid-tools)."""

    text: str
    calls: list[ToolCall]
    results: dict[str, ToolResult]
    rerun: frozenset[str]  # ids of calls to run again (idempotent tools); the rest are reported
    resolutions: dict[str, Resolution] = field(default_factory=dict)  # calls the turn waited on


async def run_turn(
    request: ModelRequest,
    hooks: StepHooks,
    *,
    toolbox: Toolbox | None,
    cancelled: asyncio.Event,
    clock: Clock,
    max_steps: int = 20,
    first_step: int = 0,
    deadline_s: float | None = None,
    pending: PendingStep | None = None,
) -> TurnOutcome:
    outcome = TurnOutcome(model=request.model)
    messages = list(request.messages)
    timed_out = asyncio.Event()
    timer = None
    if deadline_s is not None:
        timer = asyncio.get_running_loop().call_later(deadline_s, _expire, timed_out, cancelled)
    try:
        if pending is not None and toolbox is not None:
            results, waiting = await _finish_pending(
                pending, toolbox, hooks, cancelled, first_step - 1, request.model
            )
            if waiting:
                outcome.suspended, outcome.waiting = True, waiting
            messages += _exchange(pending.text, pending.calls, results)
        step_index = first_step
        while not outcome.suspended:
            if cancelled.is_set():
                outcome.interrupted = True
                break
            client = await hooks.client_for_step(step_index)
            step = await _stream_step(
                client,
                dataclasses.replace(request, messages=tuple(messages)),
                hooks,
                cancelled=cancelled,
                clock=clock,
                index=step_index,
            )
            _add(outcome, step)
            await hooks.step_finished(step)
            if not step.wants_tools:
                for call in step.calls:  # stored already, but the message was cut: never run
                    await hooks.tool_finished(step, _refused(call, CUT_RESULT))
                break
            if step_index + 1 >= max_steps:
                # No model call is left to read the results: the calls are answered, not run.
                await hooks.tools_planned(step)
                note = f"Error: not run: the turn reached its step limit (maxSteps={max_steps})"
                for call in step.calls:
                    await hooks.tool_finished(step, _refused(call, note))
                outcome.error = StepLimitReached(
                    f"stopped after {max_steps} model calls: the model kept calling tools (maxSteps)"
                )
                break
            await hooks.tools_planned(step)
            assert toolbox is not None
            runs, waiting = await _run_tools(step, toolbox, hooks, cancelled)
            outcome.tool_calls += len(runs)
            outcome.tool_failures += sum(1 for run in runs if run.result.is_error)
            if cancelled.is_set():
                for call in step.calls:  # waits recorded before the cancel are answered, not left open
                    if call.id in waiting:
                        await hooks.tool_finished(step, _refused(call, INTERRUPTED_RESULT))
                outcome.interrupted = True
                break
            if waiting:
                outcome.suspended, outcome.waiting = True, waiting
                break
            calls = [ToolCall(c.id, c.name, c.input) for c in step.calls]
            messages += _exchange(step.text, calls, [run.result for run in runs])
            step_index += 1
    finally:
        if timer is not None:
            timer.cancel()
    if timed_out.is_set():
        outcome.interrupted = False
        outcome.error = TurnDeadlineExceeded(f"the turn ran past its deadline ({deadline_s:g} s)")
    return outcome


def _expire(timed_out: asyncio.Event, cancelled: asyncio.Event) -> None:
    timed_out.set()
    cancelled.set()


def _add(outcome: TurnOutcome, step: StepOutcome) -> None:
    outcome.steps += 1
    outcome.last = step
    outcome.model = step.model
    outcome.text = step.text
    outcome.message_id = step.message_id
    outcome.stop_reason = step.stop_reason
    outcome.input_tokens += step.input_tokens
    outcome.output_tokens += step.output_tokens
    outcome.usage_reported = step.usage_reported
    outcome.deltas += step.deltas
    if outcome.ttft_s is None:
        outcome.ttft_s = step.ttft_s
    outcome.error = step.error
    outcome.interrupted = step.interrupted


def _exchange(text: str, calls: list[ToolCall], results: list[ToolResult]) -> list[ChatTurn]:
    return [
        ChatTurn("assistant", text, tool_calls=tuple(calls)),
        ChatTurn("user", tool_results=tuple(results)),
    ]


def _refused(call: ToolCallEnd | ToolCall, note: str) -> ToolRun:
    from agentvm.agent.tools.toolbox import ToolRun

    return ToolRun(ToolResult(call.id, call.name, note, is_error=True), "error", 0.0)


async def _run_tools(
    step: StepOutcome, toolbox: Toolbox, hooks: StepHooks, cancelled: asyncio.Event
) -> tuple[list[ToolRun], list[str]]:
    """Run the step's calls concurrently; each result is stored as soon as it is there. Calls that
    must wait are recorded first and not run; their ids come back second.

    Cancel (interrupt, deadline) stops the calls still running; they are answered with an error
    result saying so, so the stored exchange stays whole (every call has its result).
    """
    runnable: list[ToolCallEnd] = []
    answered: list[ToolRun] = []
    waiting: list[str] = []
    for call in step.calls:
        plain = ToolCall(call.id, call.name, call.input)
        wait = toolbox.wait_for(plain, input_error=call.input_error)
        if wait is None:
            runnable.append(call)
            continue
        refused = await hooks.tool_waits(step, plain, *wait)
        if refused is None:
            waiting.append(call.id)
        else:
            await hooks.tool_finished(step, refused)
            answered.append(refused)

    async def one(call: ToolCallEnd) -> ToolRun:
        plain = ToolCall(call.id, call.name, call.input)
        return await _waits_or_finished(
            step, plain, await toolbox.run(plain, input_error=call.input_error), hooks
        )

    tasks = [asyncio.create_task(one(call)) for call in runnable]
    waiter = asyncio.create_task(cancelled.wait())
    runs = await _gather_until_cancel(runnable, tasks, waiter, step, hooks)
    waiting += [run.result.call_id for run in runs if run.handoff is not None]
    by_id = {run.result.call_id: run for run in [*runs, *answered] if run.handoff is None}
    return [by_id[c.id] for c in step.calls if c.id in by_id], waiting


async def _waits_or_finished(step: StepOutcome, call: ToolCall, run: ToolRun, hooks: StepHooks) -> ToolRun:
    """A call's run stored as its result; or, for a call whose MCP task runs on (``run.handoff``),
    recorded as a wait (the run comes back as it is: the turn suspends on it)."""
    if run.handoff is not None:
        refused = await hooks.tool_waits(step, call, "mcp_task", run.handoff.remaining_s, handoff=run.handoff)
        if refused is None:
            return run
        run = refused
    await hooks.tool_finished(step, run)
    return run


async def _gather_until_cancel(
    calls: list[ToolCallEnd],
    tasks: list[asyncio.Task[ToolRun]],
    waiter: asyncio.Task[bool],
    step: StepOutcome,
    hooks: StepHooks,
) -> list[ToolRun]:
    pending: set[asyncio.Task[object]] = set(tasks)  # the tool runs, and the waiter while waiting
    while pending and not waiter.done():
        done, pending = await asyncio.wait({*pending, waiter}, return_when=asyncio.FIRST_COMPLETED)
        pending.discard(waiter)
    waiter.cancel()
    runs: list[ToolRun] = []
    for task, call in zip(tasks, calls, strict=True):
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        failure = None if task.cancelled() else task.exception()
        if failure is not None and not isinstance(failure, Exception):
            raise failure  # the process is going down: nothing is answered for it
        if not task.cancelled() and failure is None:
            runs.append(task.result())
        else:
            run = _refused(call, INTERRUPTED_RESULT)
            await hooks.tool_finished(step, run)
            runs.append(run)
    return runs


async def _finish_pending(
    pending: PendingStep,
    toolbox: Toolbox,
    hooks: StepHooks,
    cancelled: asyncio.Event,
    index: int,
    model: str,
) -> tuple[list[ToolResult], list[str]]:
    """Answer the open step's calls that have no result yet; returns the results (in call order)
    and the ids of calls still waiting (then the turn suspends again).

    A call the turn waited on is answered as its ``Resolution`` says (an approved one runs now);
    with a cancel, nothing runs and every open call is answered as interrupted. A call a dead
    worker left: an idempotent one runs again, the others are reported as interrupted (they may
    have had effects: running them twice is worse than not)."""
    step = StepOutcome(index=index, model=model, text=pending.text)
    step.calls = [ToolCallEnd(c.id, c.name, c.input) for c in pending.calls if c.id not in pending.results]
    results = dict(pending.results)
    waiting: list[str] = []
    stop = cancelled.is_set()
    for call in step.calls:
        resolution = pending.resolutions.get(call.id)
        plain = ToolCall(call.id, call.name, call.input)
        if resolution is not None and resolution.action == "result" and resolution.run is not None:
            run = resolution.run
        elif resolution is not None and stop:
            run = _refused(call, INTERRUPTED_RESULT)
        elif resolution is not None and resolution.action == "wait":
            waiting.append(call.id)
            continue
        elif resolution is not None and not stop and (job := toolbox.job_wait(plain)) is not None:
            refused = await hooks.tool_waits(step, plain, *job)  # approved: its job goes out now
            if refused is None:
                waiting.append(call.id)
                continue
            run = refused
        elif (resolution is not None or call.id in pending.rerun) and not stop:
            run = await _waits_or_finished(step, plain, await toolbox.run(plain), hooks)
            if run.handoff is not None:
                waiting.append(call.id)
            else:
                results[call.id] = run.result
            continue
        else:
            run = _refused(
                call, "Error: the worker running this tool stopped before it finished; it was not run again"
            )
        await hooks.tool_finished(step, run)
        results[call.id] = run.result
    return [results[c.id] for c in pending.calls if c.id in results], waiting


class _Quiet:
    """Hooks for a model call nobody watches (a compaction summary)."""

    def on_start(self, message_id: str, model: str) -> None:
        pass

    def on_text(self, text: str) -> None:
        pass

    def on_tool_start(self, call_id: str, name: str) -> None:
        pass

    async def on_tool_call(self, step: StepOutcome, call: ToolCall) -> None:
        pass


async def complete(client: ModelClient, request: ModelRequest, *, clock: Clock) -> StepOutcome:
    """One unobserved model call to its end (tools are not offered): its text and usage."""
    return await _stream_step(client, request, _Quiet(), cancelled=asyncio.Event(), clock=clock, index=0)


async def _stream_step(
    client: ModelClient,
    request: ModelRequest,
    hooks: StreamHooks,
    *,
    cancelled: asyncio.Event,
    clock: Clock,
    index: int,
) -> StepOutcome:
    """One streamed model call, stoppable at any point (the provider stream is closed on cancel)."""
    step = StepOutcome(index=index, model=request.model)
    started = clock.monotonic()
    parts: list[str] = []

    async def consume() -> None:
        next_send_at = getattr(hooks, "next_send_at", None)
        if next_send_at is not None:  # this task's context: the adapter's reads (agent/pacing.py)
            pace_reads_by(next_send_at, hooks.send_text_now)  # type: ignore[attr-defined]
        on_retry = getattr(hooks, "on_model_retry", None)
        if on_retry is not None:  # this task's context: the retrying client's waits (agent/retry.py)
            report_retries_to(on_retry)
        async for ev in client.stream(request):
            if isinstance(ev, TextDelta):
                if step.ttft_s is None:
                    step.ttft_s = clock.monotonic() - started
                parts.append(ev.text)
                step.deltas += ev.deltas
                hooks.on_text(ev.text)
            elif isinstance(ev, ToolCallStart):
                if step.ttft_s is None:
                    step.ttft_s = clock.monotonic() - started
                hooks.on_tool_start(ev.id, ev.name)
            elif isinstance(ev, ToolCallDelta):
                step.deltas += 1
            elif isinstance(ev, ToolCallEnd):
                step.calls.append(ev)
                await hooks.on_tool_call(step, ToolCall(ev.id, ev.name, ev.input))
            elif isinstance(ev, ModelStart):
                step.message_id = ev.message_id
                step.model = ev.model or request.model
                step.start_input_tokens = ev.input_tokens
                step.cache_read_tokens = ev.cache_read_tokens
                step.cache_write_tokens = ev.cache_write_tokens
                hooks.on_start(ev.message_id, step.model)
            elif isinstance(ev, ModelStop):
                step.stop_reason = ev.stop_reason
                step.input_tokens = ev.input_tokens
                step.output_tokens = ev.output_tokens
                step.cache_read_tokens = ev.cache_read_tokens
                step.cache_write_tokens = ev.cache_write_tokens
                step.usage_reported = True

    consumer = asyncio.create_task(consume())
    waiter = asyncio.create_task(cancelled.wait())
    try:
        await asyncio.wait({consumer, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not consumer.done():
            # Interrupt: cancelling the consumer closes the provider stream (its `async with`
            # exits), so the provider stops producing and we stop paying for tokens.
            step.interrupted = True
            consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
        else:
            exc = consumer.exception()
            if exc is not None and not isinstance(exc, Exception):
                raise exc  # the process is going down (exit, a dying worker): not a model failure
            if isinstance(exc, AgentVMError):
                step.error = exc
            elif exc is not None:
                step.error = ProviderUnavailable(f"model stream failed: {type(exc).__name__}")
            elif step.stop_reason is None:
                step.error = ProviderUnavailable("model stream ended without a stop event")
    finally:
        waiter.cancel()
        if not consumer.done():
            consumer.cancel()
    step.text = "".join(parts)
    if not step.usage_reported:
        # The provider never reported usage (interrupted or cut): count what was consumed. Output:
        # the deltas received. Input: what the provider said at the start (Anthropic does), else
        # an estimate of the request, but only if the provider started answering (it read it).
        step.output_tokens = step.deltas
        if step.start_input_tokens is not None:
            step.input_tokens = step.start_input_tokens
        elif step.message_id is not None:
            step.input_tokens = estimate_request_tokens(request)
    if step.cache_read_tokens + step.cache_write_tokens > step.input_tokens:  # an estimate fell short
        step.cache_read_tokens = step.cache_write_tokens = 0
    return step


__all__ = [
    "INTERRUPTED_RESULT",
    "PendingStep",
    "Resolution",
    "StepHooks",
    "StreamHooks",
    "StepOutcome",
    "TurnOutcome",
    "complete",
    "run_turn",
]
