"""A turn suspended on an MCP task (AWS): the call's 2026-07-28 task outlived the inline follow, so
the call became an ``mcp_task`` wait and the turn's worker returned; the waits sweeper follows the
task from there, as a sandbox worker answers a sandbox job's wait (``turns/sandbox_jobs.py``).

- ``task_of_wait``: what the wait keeps of the task. The task id is the server's bearer token for
  the task: it is sealed (``McpTaskSuspension.sealer``, under a name binding the tenant, the turn
  and the call, so a sealed id copied to another wait does not open) and never leaves the wait's
  record (``ToolWait.to_wire`` has no ``task``), nor is it logged.
- ``follow_task_waits`` (each sweep, for the pending ``mcp_task`` waits that are due): one session
  per (tenant, image, server) per sweep, its config and header secrets resolved again for the
  tenant (``ToolCatalog.task_session``), one ``tasks/get`` per task, no more often than its
  ``pollIntervalMs``. A new status message is pushed to the session's subscribers as
  ``tool_progress``; an ended task answers the wait (``decide``: one conditional write wins), which
  queues the continuation, and the call's result is the task's (a failed or cancelled task: an error
  result, as inline); past its deadline the wait is ``timed_out`` and the task cancelled. A server
  that cannot be reached leaves the wait pending until its deadline.
- ``cancel_task``: an interrupt (``turns/waits.cancel_turn_waits``) sends ``tasks/cancel``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
from typing import TYPE_CHECKING, Any

from agentvm.agent.history import content_parts
from agentvm.agent.tools.media import result_blocks
from agentvm.events import EventContext, agent_event
from agentvm.ports import McpServerFailed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.ports import McpSession, McpTaskHandedOff, McpTaskState, McpTaskSuspension, ToolOutput
    from agentvm.records import ToolWait, TurnJob
    from agentvm.runtime import Runtime

    # ``turns.waits.decide`` (that module calls this one: it is passed in): answers a pending wait once
    Decide = Callable[..., Awaitable[Any]]

log = logging.getLogger("agentvm.mcp_tasks")

DEFAULT_POLL_MS = 1000  # a task whose server gave no poll interval
REQUEST_TIMEOUT_S = 10.0  # a session's connection, and then one tasks/get
CANCEL_TIMEOUT_S = 5.0  # a tasks/cancel, connection included (an interrupt waits for it)
_MAX_MESSAGE_CHARS = 500
# a suspended task's questions (``_questions``): at most this many in all, each key at most this
# long; more are left unanswered (the wait's record keeps their keys: it must stay small)
MAX_QUESTIONS = 20
MAX_QUESTION_KEY_CHARS = 200

_Key = tuple[str, str, str]  # (tenant, image, server)


def sealed_name(tenant_id: str, turn_id: str, wait_key: str) -> str:
    """The name a task id is sealed under: it opens only as this tenant's, this turn's, this call's."""
    return f"mcp-task:{tenant_id}:{turn_id}:{wait_key}"


def task_of_wait(
    suspension: McpTaskSuspension, job: TurnJob, wait_key: str, handoff: McpTaskHandedOff, now_ms: int
) -> dict[str, Any]:
    """The ``ToolWait.task`` of a call whose task was handed off (the task id sealed)."""
    poll_ms = handoff.poll_ms if handoff.poll_ms and handoff.poll_ms > 0 else DEFAULT_POLL_MS
    return {
        "server": handoff.server,
        "sealedTaskId": suspension.sealer.seal(
            sealed_name(job.tenantId, job.turnId, wait_key), handoff.task_id
        ),
        "pollMs": poll_ms,
        "pollAt": now_ms + poll_ms,
        "reports": handoff.reports,
        "message": handoff.message,
    }


def _task_id(rt: Runtime, wait: ToolWait) -> str:
    assert rt.mcp_tasks is not None and wait.task is not None
    name = sealed_name(wait.tenantId, wait.turnId, wait.toolCallId)
    return rt.mcp_tasks.sealer.open(name, str(wait.task["sealedTaskId"]))


class _Sessions:
    """One session per (tenant, image, server) for one sweep, closed at its end; a server that
    could not be reached is not tried again in the same sweep."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._open: dict[_Key, McpSession] = {}
        self._failed: dict[_Key, Exception] = {}

    async def of(self, wait: ToolWait) -> McpSession:
        assert wait.task is not None
        key = (wait.tenantId, wait.imageId, str(wait.task["server"]))
        if key in self._failed:
            raise self._failed[key]
        if key not in self._open:
            try:
                self._open[key] = await asyncio.wait_for(self._session(wait, key[2]), REQUEST_TIMEOUT_S)
            except Exception as exc:
                self._failed[key] = exc
                raise
        return self._open[key]

    async def _session(self, wait: ToolWait, server: str) -> McpSession:
        image = await self._rt.store.get_image(wait.tenantId, wait.imageId)
        if image is None or image.tenantId != wait.tenantId or self._rt.tools is None:
            raise McpServerFailed(server, "call", "is gone: its image was deleted")
        return await self._rt.tools.task_session(image, server, mcp_oauth=self._rt.mcp_oauth_access())

    async def aclose(self) -> None:
        sessions, self._open = list(self._open.values()), {}
        await asyncio.gather(*(s.aclose() for s in sessions), return_exceptions=True)


async def follow_task_waits(rt: Runtime, waits: list[ToolWait], decide: Decide) -> int:
    """Poll each due ``mcp_task`` wait's task once (see the module docstring) and answer the ended
    ones with ``decide``; returns how many waits it handled (answered, or polled and rescheduled).
    Never raises for one wait's failure (that wait is tried again by the next sweep)."""
    if not waits:
        return 0
    sessions = _Sessions(rt)
    handled = 0
    try:
        for wait in waits:
            try:
                await _follow(rt, wait, sessions, decide)
                handled += 1
            except Exception as exc:
                log.warning(
                    "following an MCP task failed",
                    extra={"turn_id": wait.turnId, "error": type(exc).__name__},
                )
    finally:
        await sessions.aclose()
    return handled


async def _follow(rt: Runtime, wait: ToolWait, sessions: _Sessions, decide: Decide) -> None:
    assert rt.waits is not None and wait.task is not None
    now = rt.clock.now_ms()
    if wait.deadlineAt <= now:
        if await decide(rt, wait, "timed_out") is not None:
            await _cancel(rt, wait, sessions)
        return
    poll_ms = int(wait.task.get("pollMs") or DEFAULT_POLL_MS)
    if rt.mcp_tasks is None:  # a sweeper without the server secret: nothing opens the task id
        log.warning("MCP task waits need the server secret (AVM_AUTH_SECRET_PARAMETER)")
        await _remember(rt, wait, wait.task, now + poll_ms)
        return
    task_id = _task_id(rt, wait)

    def said(text: str) -> str:  # what the server says, without the task id (a bearer token)
        return text.replace(task_id, "[task id]")

    try:
        session = await sessions.of(wait)
        state = await asyncio.wait_for(session.get_task(task_id), REQUEST_TIMEOUT_S)
    except (McpServerFailed, TimeoutError, OSError) as exc:  # unreachable: pending until its deadline
        log.info(
            "MCP task not reachable this sweep",
            extra={"turn_id": wait.turnId, "server": wait.task.get("server"), "error": type(exc).__name__},
        )
        await _remember(rt, wait, wait.task, now + poll_ms)
        return
    except Exception as exc:  # the server refused tasks/get (it no longer knows the task): ended
        text = f"Error: the MCP task could not be read: {said(str(exc)[:300]) or type(exc).__name__}"
        await decide(rt, wait, "answered", output=text, is_error=True)
        return
    if state.status == "completed" and state.output is not None:
        output = state.output
        await decide(
            rt,
            wait,
            "answered",
            output=output.text,
            is_error=output.is_error,
            content=_content(rt, output),
            structured=output.structured,
        )
        return
    if state.status in ("completed", "failed", "cancelled"):
        why = said(state.error or state.message or f"the task {state.status}")
        status = "failed" if state.status == "completed" else state.status
        await decide(rt, wait, "answered", output=f"Error: the MCP task {status}: {why}", is_error=True)
        return
    task = await _report(rt, wait, state, said)
    if state.status == "input_required" and state.questions:
        task = await _questions(rt, wait, session, task_id, state, task)
    if state.poll_ms is not None and state.poll_ms > 0:
        task["pollMs"] = poll_ms = state.poll_ms
    await _remember(rt, wait, task, now + poll_ms)


def _content(rt: Runtime, output: ToolOutput) -> list[dict[str, Any]]:
    """A task's rich result as the wait keeps it: the blocks a call followed inline keeps, within
    the host's limits (``result_blocks``)."""
    return [] if rt.tools is None else content_parts(result_blocks(output, rt.tools))


async def _report(
    rt: Runtime, wait: ToolWait, state: McpTaskState, said: Callable[[str], str]
) -> dict[str, Any]:
    """A new status message (or status) of the task, pushed to the session's subscribers as the
    call's ``tool_progress``; returns the wait's task as it is now."""
    assert wait.task is not None
    task = dict(wait.task)
    seen = (task.get("status") or "working", task.get("message"))
    if (state.status, state.message) == seen:
        return task
    repeated = state.message == seen[1]
    task.update(status=state.status, message=state.message, reports=int(task.get("reports") or 0) + 1)
    message = f"task {state.status}" if repeated or not state.message else state.message
    data = {
        "toolId": wait.callId,
        "toolName": wait.toolName,
        "progress": float(task["reports"]),
        "message": said(message)[:_MAX_MESSAGE_CHARS],
    }
    await _publish(rt, wait, "tool_progress", data)
    return task


async def _questions(
    rt: Runtime, wait: ToolWait, session: McpSession, task_id: str, state: McpTaskState, task: dict[str, Any]
) -> dict[str, Any]:
    """A suspended task asks the user (``input_required``): each new question is opened in the host's
    shared question store until the wait's deadline and sent to the session's subscribers as
    ``tool_elicitation`` (declined at once when nobody is subscribed, the question is too large, the
    tenant has too many open or there is no shared store: as inline); each question answered since
    (``POST /v1/elicitations/{id}`` in any function) goes to the server in one ``tasks/update``, then
    ``tool_elicitation_ended``. Returns the wait's task with the open questions (``asked``: key ->
    question id) and the keys answered (``answered``, each key is asked once)."""
    from agentvm.agent.tools.elicitation import MAX_MESSAGE_CHARS, elicitation_event_data, too_large
    from agentvm.ports import ElicitationAnswer, ElicitationOwner, PendingElicitation

    desk, tenant = rt.elicitations, wait.tenantId
    store = desk.store if desk is not None else None
    asked: dict[str, str] = dict(task.get("asked") or {})
    answered: list[str] = list(task.get("answered") or [])
    answers: dict[str, ElicitationAnswer] = {}
    owner = ElicitationOwner(tenant, wait.containerId, wait.sessionId, wait.turnId)
    now = desk.now_ms() if desk is not None else 0  # the questions' clock: open until the wait's deadline
    deadline_at = now + max(0, wait.deadlineAt - rt.clock.now_ms())
    left_out = 0
    for key, question in state.questions.items():
        if key in asked or key in answered:
            continue
        if len(key) > MAX_QUESTION_KEY_CHARS or len(asked) + len(answered) + len(answers) >= MAX_QUESTIONS:
            left_out += 1  # a server asking without end: the task waits until the wait's deadline
            continue
        if (
            desk is None
            or store is None
            or too_large(question)
            or not await rt.connections.subscribers(wait.sessionId)
            or await store.open_count(tenant, now) >= desk.max_per_tenant
        ):
            answers[key] = ElicitationAnswer("decline")
            continue
        kept = dataclasses.replace(question, message=question.message[:MAX_MESSAGE_CHARS])
        pending = PendingElicitation(
            f"elicit_{secrets.token_hex(12)}", owner, wait.callId, wait.toolName, kept, deadline_at
        )
        await store.put(pending)
        asked[key] = pending.elicitation_id
        await _publish(rt, wait, "tool_elicitation", elicitation_event_data(pending))
    given: dict[str, ElicitationAnswer] = {}
    for key, elicitation_id in asked.items():
        answer = None if store is None else await store.answer_of(tenant, elicitation_id)
        if answer is not None:
            given[key] = answer
    if left_out:
        log.info("MCP task questions left unanswered (over the limits)", extra={"turn_id": wait.turnId})
    if answers or given:
        try:
            await asyncio.wait_for(session.answer_task(task_id, {**answers, **given}), REQUEST_TIMEOUT_S)
        except Exception as exc:  # the questions opened are kept; the answers go at the next sweep
            log.warning(
                "answering an MCP task failed", extra={"turn_id": wait.turnId, "error": type(exc).__name__}
            )
            return {**task, "asked": asked, "answered": answered}
        answered.extend([*answers, *given])
    for key, answer in given.items():
        if store is not None:
            await store.finish(tenant, asked[key])
        data = {"elicitationId": asked.pop(key), "toolId": wait.callId, "toolName": wait.toolName}
        await _publish(
            rt, wait, "tool_elicitation_ended", {**data, "action": answer.action, "reason": "answered"}
        )
    return {**task, "asked": asked, "answered": answered}


async def _publish(rt: Runtime, wait: ToolWait, kind: str, data: dict[str, Any]) -> None:
    """An event of the waiting call, pushed to the session's subscribers (best effort)."""
    from agentvm.streaming.fanout import Fanout

    job = wait.job
    context = EventContext(job.containerId, job.imageId, job.agentId, job.sessionId, job.turnId)
    frame = agent_event(kind, data, now_ms=rt.clock.now_ms(), context=context)
    with contextlib.suppress(Exception):  # a push that fails costs the client one event
        await Fanout(rt.connections, rt.push).publish_frame(job.sessionId, frame)


async def _remember(rt: Runtime, wait: ToolWait, task: dict[str, Any], poll_at: int) -> None:
    """Keep what the client was told and when the sweeper polls next (no later than the deadline),
    only while the wait is still pending (a conditional write: an answer meanwhile wins)."""
    assert rt.waits is not None
    check_at = min(poll_at, wait.deadlineAt)
    await rt.waits.decide(
        wait.turnId, wait.toolCallId, {"task": {**task, "pollAt": poll_at}, "checkAt": check_at}
    )


async def cancel_task(rt: Runtime, wait: ToolWait) -> None:
    """``tasks/cancel`` for a wait's task (an interrupt): best effort, its own session."""
    if wait.kind != "mcp_task" or wait.task is None or rt.mcp_tasks is None:
        return
    sessions = _Sessions(rt)
    try:
        await _cancel(rt, wait, sessions)
    finally:
        await sessions.aclose()


async def _cancel(rt: Runtime, wait: ToolWait, sessions: _Sessions) -> None:
    """``tasks/cancel``, within ``CANCEL_TIMEOUT_S`` in all (an interrupt's function waits for it);
    the task's open questions are closed first (an answer given now would go nowhere)."""
    store = rt.elicitations.store if rt.elicitations is not None else None
    if store is not None:
        for elicitation_id in dict((wait.task or {}).get("asked") or {}).values():
            with contextlib.suppress(Exception):  # best effort: a question also closes at its deadline
                await store.finish(wait.tenantId, elicitation_id)

    async def cancel() -> None:
        session = await sessions.of(wait)
        await session.cancel_task(_task_id(rt, wait))

    try:
        await asyncio.wait_for(cancel(), CANCEL_TIMEOUT_S)
        log.info("MCP task cancelled", extra={"turn_id": wait.turnId})
    except Exception as exc:  # noqa: BLE001 (best effort: the server's TTL ends it otherwise)
        log.info(
            "MCP task could not be cancelled", extra={"turn_id": wait.turnId, "error": type(exc).__name__}
        )


__all__ = [
    "cancel_task",
    "follow_task_waits",
    "sealed_name",
    "task_of_wait",
]
