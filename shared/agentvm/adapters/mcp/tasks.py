"""MCP Tasks: a long tool call run as a task on the server, followed until it ends.

Two wire forms, one behaviour (the SDK has the types, not the client side):

- **2025-11-25** (tasks in the core spec, experimental): a server that declares
  ``capabilities.tasks.requests.tools.call`` and lists a tool with ``execution.taskSupport``
  ``optional`` or ``required`` is sent ``tools/call`` with ``task: {ttl}``. It answers at once with
  ``CreateTaskResult`` (``{task: {taskId, status, ...}}``); the client then polls ``tasks/get`` for
  the status while ``tasks/result`` (which the server holds until the task ends, and through which it
  may send the task's own requests, such as an ``elicitation/create``) brings the ``CallToolResult``.
- **2026-07-28** (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663): the client declares the
  extension in its capabilities and the server decides per call; a task comes back as a result with
  ``resultType: "task"`` (claimed through the SDK's ``ClientExtension``), and ``tasks/get`` carries the
  status and, once completed, the result itself (``failed``: the JSON-RPC error).

While a task runs, each new status or status message becomes a progress report of the call
(``tool_progress``: progress 1, 2, 3, ...; the message is the server's ``statusMessage``, else the
status). A call that is cancelled (an interrupt, the tool's timeout, the turn's deadline) sends
``tasks/cancel`` before it ends (bounded by ``CANCEL_TIMEOUT_S``): the server stops the work instead
of running it for nobody. The poll interval is the server's ``pollInterval`` within
[``MIN_POLL_S``, ``MAX_POLL_S``].

Imported by the client when a session starts (it loads the SDK then anyway), never at module import.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import Request, RequestParams, Result

from agentvm.ports import MCP_TASK_INLINE_S, ElicitationRequest, McpTaskHandedOff, McpTaskState

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from agentvm.ports import ElicitationAnswer, ProgressFn, ToolOutput

log = logging.getLogger("agentvm.mcp")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TTL_MS = 3_600_000  # what a 2025-11-25 task is asked to be kept for (the server may keep it less)
MIN_POLL_S = 0.2
MAX_POLL_S = 5.0
DEFAULT_POLL_S = 1.0
CANCEL_TIMEOUT_S = 5.0
TERMINAL = frozenset({"completed", "failed", "cancelled"})
TASK_CAPABLE = frozenset({"optional", "required"})


class _TaskIdParams(RequestParams):
    task_id: str


class _GetTask(Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskIdParams
    name_param = "taskId"  # the Streamable HTTP ``Mcp-Name`` header, for routing to the task's node


class _CancelTask(Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskIdParams
    name_param = "taskId"


class _UpdateTaskParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class _UpdateTask(Request[_UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateTaskParams
    name_param = "taskId"


class _CreatedTask(Result):
    """A 2026-07-28 ``CreateTaskResult``: the task's fields inline, ``resultType: "task"``."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class _DetailedTask(Result):
    """A 2026-07-28 ``tasks/get`` answer: the task, with its result or error once it has ended."""

    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] | None = None


# the running call's progress reporter and question handler (the session's ``elicitation/create``
# handler: ``(context, params) -> ElicitResult``), for the 2026-07-28 claim's resolver (it runs in
# the call's task)
CALL_PROGRESS: ContextVar[ProgressFn | None] = ContextVar("agentvm_mcp_task_progress", default=None)
CALL_ELICIT: ContextVar[Callable[[Any, Any], Awaitable[Any]] | None] = ContextVar(
    "agentvm_mcp_task_elicit", default=None
)


class TaskEnded(Exception):
    """A task ended without a result: ``failed`` (with the server's error) or ``cancelled`` by the server."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class TaskFollower:
    """Reports one task's status changes as progress and paces the polls."""

    def __init__(self, task_id: str, on_progress: ProgressFn | None) -> None:
        self.task_id = task_id
        self._on_progress = on_progress
        self._seen: tuple[str, str | None] | None = None
        self.reports = 0
        self.status = "working"
        self.message: str | None = None
        self.poll_s = DEFAULT_POLL_S

    def saw(self, status: str, message: str | None, poll_ms: int | None) -> None:
        self.status, self.message = status, message
        if poll_ms is not None and poll_ms > 0:
            self.poll_s = min(max(poll_ms / 1000.0, MIN_POLL_S), MAX_POLL_S)
        if (status, message) == self._seen:
            return
        repeated = self._seen is not None and message == self._seen[1]  # a new status, the old message
        self._seen = (status, message)
        self.reports += 1
        if self._on_progress is not None:
            self._on_progress(
                float(self.reports), None, f"task {status}" if repeated or not message else message
            )

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL


def supports_tasks(capabilities: Any) -> bool:
    """The server (2025-11-25) runs ``tools/call`` as tasks when asked to."""
    tasks = getattr(capabilities, "tasks", None)
    requests = getattr(tasks, "requests", None)
    tools = getattr(requests, "tools", None)
    return getattr(tools, "call", None) is not None


async def call_tool_as_task_2025(
    session: Any, name: str, arguments: dict[str, Any], *, on_progress: ProgressFn | None
) -> Any:
    """``tools/call`` with ``task`` on a 2025-11-25 session (the SDK's ``ClientSession``); returns
    the ``CallToolResult``. The server may still answer the call directly: that result is returned."""
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(
            name=name, arguments=arguments, task=types.TaskMetadata(ttl=TASK_TTL_MS)
        )
    )
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: dict[str, Any] = {}
    # The SDK validates a ``tools/call`` answer as a ``CallToolResult``, which ``CreateTaskResult`` is
    # not, so the request goes through its dispatcher, stamped as ``send_request`` stamps it.
    session._stamp(data, options)
    if on_progress is not None:
        report = on_progress

        async def progress(value: float, total: float | None, message: str | None) -> None:
            report(value, total, message)

        options["on_progress"] = progress
    raw = await session._dispatcher.send_raw_request("tools/call", data.get("params"), options)
    if isinstance(raw, types.ErrorData):  # pragma: no cover (the dispatcher raises MCPError instead)
        raise MCPError.from_error_data(raw)
    if "task" not in raw:
        return types.CallToolResult.model_validate(raw)
    task = types.CreateTaskResult.model_validate(raw).task
    follower = TaskFollower(task.task_id, on_progress)
    follower.saw(task.status, task.status_message, task.poll_interval)

    async def get() -> None:
        got = await session.send_request(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.task_id)), types.GetTaskResult
        )
        follower.saw(got.status, got.status_message, got.poll_interval)

    async def cancel() -> None:
        await session.send_request(
            types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.task_id)),
            types.CancelTaskResult,
        )

    async def result() -> Any:
        # held by the server until the task ends; the task's own requests (an elicitation) come meanwhile
        return await session.send_request(
            types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task.task_id)),
            types.CallToolResult,
        )

    async with _cancelled_on_exit(follower, cancel):
        fetch = asyncio.ensure_future(result())
        try:
            while not fetch.done():
                await asyncio.wait({fetch}, timeout=follower.poll_s)
                if fetch.done():
                    break
                await _quietly(get)
            try:
                outcome = fetch.result()
            except MCPError as exc:  # the task failed, or the server cancelled it: its error, not a refusal
                if exc.error.code == types.CONNECTION_CLOSED:
                    raise  # the server went away (the session reports it)
                await _quietly(get)
                status = follower.status if follower.ended else "failed"
                follower.status = status
                raise TaskEnded(status, exc.error.message or str(exc)) from None
        finally:
            if not fetch.done():
                fetch.cancel()
        follower.saw("completed", follower.message, None)
        return outcome


async def follow_task_2026(
    session: Any,
    created: Any,
    *,
    on_progress: ProgressFn | None,
    elicit: Callable[[Any, Any], Awaitable[Any]] | None = None,
    inline_s: float | None = None,
) -> Any:
    """A 2026-07-28 task (``resultType: "task"``) polled with ``tasks/get`` until it ends; returns the
    ``CallToolResult`` it carries. ``failed`` and ``cancelled`` raise ``TaskEnded``. While it is
    ``input_required``, each question (``elicitation/create`` in ``inputRequests``, each key once) is
    answered through ``elicit`` and the answers sent with ``tasks/update``; other requests (sampling,
    roots: not declared) are left unanswered.

    ``inline_s`` (a host that suspends turns on tasks: AWS): a task still ``working`` after that long
    raises ``McpTaskHandedOff`` instead (not cancelled: the waits sweeper follows it from there)."""
    follower = TaskFollower(created.task_id, on_progress)
    hand_off_at = None if inline_s is None else asyncio.get_running_loop().time() + inline_s
    answered: set[str] = set()
    follower.saw(created.status, created.status_message, created.poll_interval_ms)

    async def cancel() -> None:
        await session.send_request(
            _CancelTask(params=_TaskIdParams(task_id=created.task_id)), types.EmptyResult
        )

    async with _cancelled_on_exit(follower, cancel):
        while True:
            got = await session.send_request(
                _GetTask(params=_TaskIdParams(task_id=created.task_id)), _DetailedTask
            )
            follower.saw(got.status, got.status_message, got.poll_interval_ms)
            if got.status == "completed":
                return types.CallToolResult.model_validate(got.result or {})
            if got.status == "failed":
                error = got.error or {}
                raise TaskEnded(
                    "failed", str(error.get("message") or got.status_message or "the task failed")
                )
            if got.status == "cancelled":
                raise TaskEnded("cancelled", got.status_message or "the server cancelled the task")
            if got.status == "input_required" and got.input_requests:
                responses: dict[str, Any] = {}
                for key, request in got.input_requests.items():
                    if key not in answered:
                        answered.add(key)
                        answer = await _answer(request, elicit)
                        if answer is not None:
                            responses[key] = answer
                if responses:
                    update = _UpdateTaskParams(task_id=created.task_id, input_responses=responses)
                    await session.send_request(_UpdateTask(params=update), types.EmptyResult)
                    continue
            loop_time = asyncio.get_running_loop().time()
            if got.status == "working" and hand_off_at is not None and loop_time >= hand_off_at:
                raise McpTaskHandedOff(
                    created.task_id,
                    poll_ms=got.poll_interval_ms,
                    message=follower.message,
                    reports=follower.reports,
                )
            await asyncio.sleep(follower.poll_s)


async def get_task_2026(
    session: Any, task_id: str, *, to_output: Callable[[Any], ToolOutput]
) -> McpTaskState:
    """One ``tasks/get`` of a 2026-07-28 task, on the SDK's ``ClientSession``; a completed task's
    ``CallToolResult`` made the tool's output by ``to_output``."""
    got = await session.send_request(_GetTask(params=_TaskIdParams(task_id=task_id)), _DetailedTask)
    if got.status == "input_required":
        asked = {key: question_of(request) for key, request in (got.input_requests or {}).items()}
        questions = {key: q for key, q in asked.items() if q is not None}
        return McpTaskState(got.status, got.status_message, got.poll_interval_ms, questions=questions)
    state = McpTaskState(got.status, got.status_message, got.poll_interval_ms)
    if got.status == "completed":
        result = types.CallToolResult.model_validate(got.result or {})
        return McpTaskState(got.status, got.status_message, got.poll_interval_ms, output=to_output(result))
    if got.status == "failed":
        error = got.error or {}
        message = str(error.get("message") or got.status_message or "the task failed")
        return McpTaskState(got.status, got.status_message, got.poll_interval_ms, error=message)
    return state


async def cancel_task_2026(session: Any, task_id: str) -> None:
    """``tasks/cancel`` of a 2026-07-28 task, on the SDK's ``ClientSession``."""
    await session.send_request(_CancelTask(params=_TaskIdParams(task_id=task_id)), types.EmptyResult)


async def answer_task_2026(session: Any, task_id: str, answers: Mapping[str, ElicitationAnswer]) -> None:
    """``tasks/update`` of a 2026-07-28 task with the user's answers (``ElicitResult``s by key)."""
    responses = {
        key: types.ElicitResult(
            action=answer.action, content=answer.content if answer.action == "accept" else None
        ).model_dump(by_alias=True, mode="json", exclude_none=True)
        for key, answer in answers.items()
    }
    update = _UpdateTaskParams(task_id=task_id, input_responses=responses)
    await session.send_request(_UpdateTask(params=update), types.EmptyResult)


def question_of(request: dict[str, Any]) -> ElicitationRequest | None:
    """One of a task's ``inputRequests`` as a question for the user; None when it is not an
    ``elicitation/create`` (sampling, roots: not declared, left unanswered) or is malformed."""
    if request.get("method") != "elicitation/create":
        return None
    try:
        params = types.ElicitRequest.model_validate(request).params
    except ValueError:
        return None
    return elicitation_request(params)


def elicitation_request(params: Any) -> ElicitationRequest:
    """The SDK's ``elicitation/create`` params as the port's question (a form, or a URL to open)."""
    if isinstance(params, types.ElicitRequestURLParams):
        return ElicitationRequest(params.message, mode="url", url=params.url)
    return ElicitationRequest(params.message, schema=dict(params.requested_schema or {}))


async def _answer(request: dict[str, Any], elicit: Callable[[Any, Any], Awaitable[Any]] | None) -> Any:
    """One of a task's ``inputRequests`` answered as the wire wants it, or None (not a question)."""
    if request.get("method") != "elicitation/create" or elicit is None:
        return None
    params = types.ElicitRequest.model_validate(request).params
    result = await elicit(None, params)
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _quietly(poll: Callable[[], Awaitable[None]]) -> None:
    """One status poll; a failed one costs a status line, not the call."""
    with contextlib.suppress(Exception):
        await poll()


@contextlib.asynccontextmanager
async def _cancelled_on_exit(follower: TaskFollower, cancel: Callable[[], Awaitable[None]]) -> Any:
    """A caller that stops following a task that has not ended (cancelled, or an error) cancels it
    on the server first, within ``CANCEL_TIMEOUT_S``."""
    try:
        yield
    except McpTaskHandedOff:
        raise  # followed from elsewhere now (the turn suspends on it): the task goes on
    except BaseException:
        if not follower.ended:
            try:
                await asyncio.wait_for(asyncio.shield(cancel()), CANCEL_TIMEOUT_S)
                log.info("MCP task cancelled", extra={"task_status": follower.status})
            except BaseException as exc:  # noqa: BLE001 (best effort: the server's TTL ends it otherwise)
                log.info("MCP task could not be cancelled", extra={"error": type(exc).__name__})
        raise


def tasks_extension() -> Any:
    """The SDK ``ClientExtension`` that declares the 2026-07-28 tasks extension and follows the tasks
    servers answer with (the call's progress reporter comes from ``CALL_PROGRESS``)."""
    from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim

    async def resolve(created: _CreatedTask, context: ClaimContext) -> Any:
        return await follow_task_2026(
            context.session,
            created,
            on_progress=CALL_PROGRESS.get(),
            elicit=CALL_ELICIT.get(),
            inline_s=MCP_TASK_INLINE_S.get(),
        )

    class TasksExtension(ClientExtension):
        identifier = TASKS_EXTENSION

        def claims(self) -> Any:
            return (ResultClaim(result_type="task", model=_CreatedTask, resolve=resolve),)

    return TasksExtension()


__all__ = [
    "CALL_PROGRESS",
    "TASKS_EXTENSION",
    "TASK_CAPABLE",
    "TaskEnded",
    "TaskFollower",
    "call_tool_as_task_2025",
    "cancel_task_2026",
    "follow_task_2026",
    "get_task_2026",
    "supports_tasks",
    "tasks_extension",
]
