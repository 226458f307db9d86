"""Suspension: a turn that waits on tool calls (a person's approval, the client's result, a sandbox
worker's job: ``turns/waits.py``, ``turns/sandbox_jobs.py``) ends its attempt ``suspended``, and a
later attempt (the job with ``resume`` set) continues it from its open step.

``hold_suspended`` holds the attempt's last frame, ``turn_suspended`` (what the turn waits for);
``pending_step`` is the open step a continuation (or a redelivered attempt) starts from, with how
each call it waited on was answered; ``suspended_before`` finds an earlier suspended turn of the
session, which this one may not overtake; ``sandbox_job`` is the job a sandbox tool call waits on.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from agentvm.agent.history import open_step, pending_user_ids, tool_result_of
from agentvm.agent.loop import PendingStep
from agentvm.llm import ToolCall
from agentvm.records import SandboxJob, turn_id_for
from agentvm.turns.mcp_tasks import cancel_task
from agentvm.turns.waits import resolution_of

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    from agentvm.agent.loop import Resolution
    from agentvm.agent.tools.toolbox import Toolbox
    from agentvm.messages import Message
    from agentvm.ports import SandboxLimits
    from agentvm.records import ToolWait, TurnJob
    from agentvm.runtime import Runtime
    from agentvm.streaming.sink import CoalescingSink


def hold_suspended(
    sink: CoalescingSink, job: TurnJob, waits: Mapping[str, ToolWait], waiting: Collection[str]
) -> None:
    """The turn waits on the calls ``waiting``: hold the frames (they go out once the ``suspended``
    status is stored) and say what it waits for (``waits``: the turn's latest wait, by call id)."""
    sink.hold()
    waiting_for = [waits[c] for c in waiting if c in waits]
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
                for w in waiting_for
            ],
        },
    )


async def suspended_before(rt: Runtime, job: TurnJob, history: list[Message]) -> str | None:
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


async def pending_step(
    rt: Runtime,
    job: TurnJob,
    history: list[Message],
    toolbox: Toolbox | None,
    remember: Callable[[ToolWait], None],
) -> PendingStep | None:
    """The step a previous attempt left open (its calls stored, not all their results): what the
    loop starts from, with how each call the turn waited on was answered (each of those waits is
    handed to ``remember``: the hooks' ``TurnHooks.remember``). None: no open step."""
    step = open_step(history, job.userMessageId)
    if step is None or toolbox is None:
        return None
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
        resolutions=await _resolutions(rt, job, {c.toolCall.id for c in step.missing}, remember),
    )


async def _resolutions(
    rt: Runtime, job: TurnJob, missing: set[str], remember: Callable[[ToolWait], None]
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
            if timed_out is not None:
                await cancel_task(rt, timed_out)  # an MCP task's: tasks/cancel (no-op for other kinds)
            wait = timed_out or await rt.waits.get_wait(wait.turnId, wait.toolCallId) or wait
        remember(wait)
        out[wait.callId] = resolution_of(wait)
    return out


def sandbox_job(rt: Runtime, wait: ToolWait, limits: SandboxLimits | None) -> SandboxJob:
    """The job a sandbox worker runs for ``wait`` (a sandbox tool call), within the tool's limits."""
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


__all__ = ["hold_suspended", "pending_step", "sandbox_job", "suspended_before"]
