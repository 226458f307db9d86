"""Suspended turns: the tool calls a turn waits on, how they are answered, and the sweeper.

A turn whose model calls a client-side tool, or a tool that needs approval, stores the call and a
``ToolWait`` (``pending``), sends the client an event saying so, and *suspends*: its worker
finishes (on AWS the Lambda returns), the turn's status is ``suspended``, and nothing runs or
bills while it waits. An answer (``decide``: approved, denied, the client's result, timed out,
cancelled) is one conditional write, so exactly one answer wins, and only the winner enqueues the
*continuation*: the same ``TurnJob`` with ``resume`` set. The continuation's worker reads the turn's
waits (``resolutions``), stores each answered call's result (running an approved one now) and the
loop goes on from the stored step, on either host, after any restart.

``sweep`` runs every few seconds (locally in the server; on AWS a scheduled function): a pending
wait past its deadline is answered ``timed_out``; a decided wait not consumed ``RETRY_MS`` after
its decision has its continuation enqueued again (the first enqueue was lost). A pending wait on an
MCP task (AWS) is due at each of its polls: the sweep asks the server how the task is
(``turns/mcp_tasks.py``). Enqueuing twice is
harmless: the queue drops the same job key, and a continuation that finds nothing to do exits.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agentvm.agent.history import blocks_of
from agentvm.agent.loop import INTERRUPTED_RESULT, Resolution
from agentvm.agent.tools.toolbox import ToolRun, capped
from agentvm.errors import AlreadyAnswered, BadRequest, NotFound
from agentvm.llm import ToolResult, blocks_text
from agentvm.ports import FileChange
from agentvm.turns.mcp_tasks import cancel_task, follow_task_waits

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.records import ToolWait, WaitStatus
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.waits")

RETRY_MS = 5 * 60 * 1000  # a decided wait not consumed by then gets its continuation enqueued again
# A client-side tool's result: refused above this (a frame holds 256 KB), cut for the model like any
# tool's output (agent.tools.capped).
MAX_OUTPUT_CHARS = 128 * 1024


def resolution_of(wait: ToolWait) -> Resolution:
    """What the continuation does with a waited-on call, by the wait's status."""
    call_id, name = wait.callId, wait.toolName
    if wait.status == "pending":
        return Resolution("wait")
    if wait.status == "approved":
        return Resolution("run")
    if wait.status == "denied":
        reason = wait.reason or "no reason given"
        result = ToolResult(call_id, name, f"Execution denied: {reason}", is_error=True)
        return Resolution("result", ToolRun(result, "denied", 0.0, reason=reason))
    if wait.status == "answered":
        blocks = blocks_of(wait.content)  # bounded when the wait was answered
        text = blocks_text(blocks) if blocks else capped(wait.output or "")
        result = ToolResult(call_id, name, text, is_error=wait.isError, blocks=blocks)
        files = tuple(FileChange(**f) for f in wait.files)
        status = "error" if wait.isError else "ok"
        return Resolution("result", ToolRun(result, status, 0.0, files=files, structured=wait.structured))
    if wait.status == "timed_out":
        waited = (wait.deadlineAt - wait.createdAt) / 1000
        text = {
            "client": f"Error: no result from the client within {waited:g} s",
            "approval": f"Error: no approval within {waited:g} s; the call was not run",
            "sandbox": f"Error: the sandbox job did not finish within {waited:g} s",
            "mcp_task": f"Error: {name} timed out after {waited:g} s (its MCP task was cancelled)",
        }[wait.kind]
        return Resolution("result", ToolRun(ToolResult(call_id, name, text, is_error=True), "timeout", 0.0))
    note = INTERRUPTED_RESULT if not wait.reason else f"Error: cancelled: {wait.reason}"
    return Resolution("result", ToolRun(ToolResult(call_id, name, note, is_error=True), "error", 0.0))


def wait_event_data(wait: ToolWait) -> dict[str, Any]:
    """The ``data`` of ``tool_approval_requested`` / ``client_tool_requested``."""
    return {
        "turnId": wait.turnId,
        "toolCallId": wait.toolCallId,
        "toolName": wait.toolName,
        "input": wait.input,
        "deadlineAt": wait.deadlineAt,
    }


async def decide(
    rt: Runtime,
    wait: ToolWait,
    status: WaitStatus,
    *,
    by: str | None = None,
    reason: str | None = None,
    output: str | None = None,
    is_error: bool = False,
    files: list[dict[str, Any]] | None = None,
    content: list[dict[str, Any]] | None = None,
    structured: Any = None,
) -> ToolWait | None:
    """Answer a pending wait and enqueue the turn's continuation. None: it was answered already.
    ``content``/``structured``: a rich result (``ToolWait.content``), an MCP task's."""
    assert rt.waits is not None
    now = rt.clock.now_ms()
    changes: Mapping[str, Any] = {
        "status": status,
        "decidedAt": now,
        "decidedBy": by,
        "reason": reason,
        "output": output,
        "isError": is_error,
        "files": files or [],
        "content": content or [],
        "structured": structured,
        "checkAt": now + RETRY_MS,
    }
    decided = await rt.waits.decide(wait.turnId, wait.toolCallId, changes)
    if decided is not None:
        await continue_turn(rt, decided)
    return decided


async def continue_turn(rt: Runtime, wait: ToolWait) -> None:
    await rt.queue.enqueue(wait.job.model_copy(update={"resume": f"{wait.toolCallId}:{wait.status}"}))


async def find_wait(rt: Runtime, tenant_id: str, turn_id: str, call_id: str) -> ToolWait:
    """The caller's wait, or ``NotFound`` (another tenant's reads exactly like none)."""
    wait = None if rt.waits is None else await rt.waits.get_wait(turn_id, call_id)
    if wait is None or wait.tenantId != tenant_id:
        raise NotFound(f"No tool call {call_id} is waiting in turn {turn_id}")
    return wait


async def answer(
    rt: Runtime,
    tenant_id: str,
    turn_id: str,
    call_id: str,
    *,
    kind: str,
    status: WaitStatus,
    by: str | None,
    reason: str | None = None,
    output: str | None = None,
    is_error: bool = False,
) -> ToolWait:
    """A client's answer (approval or a client-side tool's result), checked: the call must be the
    caller's, of the right kind, and still pending."""
    wait = await find_wait(rt, tenant_id, turn_id, call_id)
    if wait.kind != kind:
        if wait.kind in ("sandbox", "mcp_task"):
            raise BadRequest(f"{call_id} is running ({wait.kind}): its result comes from the tool itself")
        if wait.kind == "client":
            raise BadRequest(f"{call_id} is a client-side tool call: send its result (tool_result_request)")
        raise BadRequest(f"{call_id} waits for approval, not for a result (tool_approval_request)")
    if output is not None and len(output) > MAX_OUTPUT_CHARS:
        raise BadRequest(f"output: at most {MAX_OUTPUT_CHARS} characters")
    decided = await decide(rt, wait, status, by=by, reason=reason, output=output, is_error=is_error)
    if decided is None:
        current = await find_wait(rt, tenant_id, turn_id, call_id)
        raise AlreadyAnswered(f"{call_id} was answered already ({current.status})")
    return decided


async def cancel_turn_waits(rt: Runtime, turn_id: str, reason: str) -> bool:
    """Cancel every pending wait of a suspended turn (an interrupt); True if one was, and so the
    continuation (which ends the turn as interrupted) is enqueued."""
    if rt.waits is None:
        return False
    cancelled = False
    for wait in await rt.waits.turn_waits(turn_id):
        pending = wait.status == "pending" and not wait.consumed
        if pending and await decide(rt, wait, "cancelled", reason=reason) is not None:
            cancelled = True
            await cancel_task(rt, wait)  # an MCP task's: tasks/cancel (nothing for other kinds)
    return cancelled


async def sweep_waits(rt: Runtime, *, limit: int = 100) -> int:
    """Time out the waits past their deadline, re-enqueue lost continuations. Returns how many
    waits it acted on. Never raises for one wait's failure (the next sweep tries again)."""
    if rt.waits is None:
        return 0
    now = rt.clock.now_ms()
    acted = 0
    tasks: list[ToolWait] = []  # pending waits on MCP tasks: polled below, a session per server
    for wait in await rt.waits.due_waits(now, limit):
        try:
            if wait.status == "pending" and wait.kind == "mcp_task" and wait.task is not None:
                tasks.append(wait)
                continue
            if wait.status == "pending":
                if wait.deadlineAt > now:  # rescheduled early: look again at the deadline
                    await rt.waits.reschedule(wait, wait.deadlineAt)
                    continue
                if await decide(rt, wait, "timed_out") is None:
                    continue  # answered meanwhile: that answer enqueued its continuation
            else:
                log.info("re-enqueuing a continuation", extra={"turn_id": wait.turnId})
                await continue_turn(rt, wait)
                await rt.waits.reschedule(wait, now + RETRY_MS)
            acted += 1
        except Exception as exc:
            log.warning("sweeping a wait failed", extra={"turn_id": wait.turnId, "error": type(exc).__name__})
    return acted + await follow_task_waits(rt, tasks, decide)


__all__ = [
    "RETRY_MS",
    "answer",
    "cancel_turn_waits",
    "continue_turn",
    "decide",
    "find_wait",
    "resolution_of",
    "sweep_waits",
    "wait_event_data",
]
