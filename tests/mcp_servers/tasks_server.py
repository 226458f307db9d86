"""An MCP server on the official SDK that runs long calls as tasks: the 2026-07-28 Tasks extension
(``io.modelcontextprotocol/tasks``, SEP-2663), served through the SDK's ``Extension`` interface.
``python tasks_server.py`` (stdio) or ``python tasks_server.py http <port>`` (Streamable HTTP).

- ``survey(stages, seconds, map)``: to a client that declares the extension on its request, a task
  (``resultType: "task"``) whose ``statusMessage`` says which stage runs (``stage 2 of 4``), then
  completes with ``surveyed <stages> stages`` (and ``structuredContent``; with ``map``, a PNG image
  after the text: ``MAP_PNG``); to any other client, the same work in the call itself.
- ``doomed(seconds)``: a task that fails after ``seconds`` (0.3) with a JSON-RPC error (``the survey
  site is flooded``).
- ``consent(question, after)``: a task that asks the user (``input_required``: an
  ``elicitation/create`` in ``inputRequests``, answered with ``tasks/update``), after working
  ``after`` seconds (0), then completes with what it was told (``accept: {'approve': True}``,
  ``decline``...).
- ``quick()``: an ordinary tool (``quick answer``), never a task.
- ``tasks/get``, ``tasks/update``, ``tasks/cancel``; each task's end is appended to the file
  ``MCP_TASKS_LOG`` names (``<taskId> completed|failed|cancelled``), so a test sees what the server did.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import sys
from datetime import UTC, datetime
from typing import Any

from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, RequestParams

TASKS = "io.modelcontextprotocol/tasks"
POLL_MS = 200
MAP_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"map" * 40).decode()  # 128 bytes: a "map"

_tasks: dict[str, dict[str, Any]] = {}
_work: dict[str, asyncio.Task[None]] = {}


class TaskIdParams(RequestParams):
    task_id: str


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _log(task_id: str, status: str) -> None:
    path = os.environ.get("MCP_TASKS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{task_id} {status}\n")


def _set(task_id: str, status: str, message: str | None = None, **payload: Any) -> None:
    task = _tasks[task_id]
    if task["status"] in ("completed", "failed", "cancelled"):
        return
    task.update(status=status, lastUpdatedAt=_now(), **payload)
    if message is not None:
        task["statusMessage"] = message
    if status in ("completed", "failed", "cancelled"):
        _log(task_id, status)


async def _survey_work(task_id: str, stages: int, seconds: float, with_map: bool = False) -> None:
    for stage in range(1, stages + 1):
        _set(task_id, "working", f"stage {stage} of {stages}")
        await asyncio.sleep(seconds)
    text = f"surveyed {stages} stages"
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if with_map:
        content.append({"type": "image", "data": MAP_PNG, "mimeType": "image/png"})
    _set(
        task_id,
        "completed",
        "done",
        result={
            "content": content,
            "structuredContent": {"result": text},
            "isError": False,
        },
    )


async def _doomed_work(task_id: str, seconds: float) -> None:
    _set(task_id, "working", "surveying")
    await asyncio.sleep(seconds)
    _set(task_id, "failed", "flooded", error={"code": -32603, "message": "the survey site is flooded"})


class UpdateParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any]


_answers: dict[str, asyncio.Future[dict[str, Any]]] = {}


async def _consent_work(task_id: str, question: str, after: float = 0.0) -> None:
    if after:
        _set(task_id, "working", "reading the request")
        await asyncio.sleep(after)
    key = f"consent-{task_id[:6]}"
    _answers[task_id] = asyncio.get_running_loop().create_future()
    schema = {"type": "object", "properties": {"approve": {"type": "boolean"}}, "required": ["approve"]}
    request = {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": question, "requestedSchema": schema},
    }
    _set(task_id, "input_required", "waiting for the user", inputRequests={key: request})
    answer = (await _answers[task_id]).get(key) or {}
    _tasks[task_id].pop("inputRequests", None)
    _set(task_id, "working", "answered")
    action = answer.get("action")
    text = f"{action}: {answer.get('content')}" if action == "accept" else str(action)
    result = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"result": text},
        "isError": False,
    }
    _set(task_id, "completed", "done", result=result)


class TasksExtension(Extension):
    identifier = TASKS

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self.get),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel),
            MethodBinding("tasks/update", UpdateParams, self.update),
        ]

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        capabilities = ctx.session.client_capabilities
        declared = (capabilities.extensions or {}) if capabilities else {}
        if params.name not in ("survey", "doomed", "consent") or TASKS not in declared:
            return await call_next(ctx)
        task_id = secrets.token_urlsafe(16)
        now = _now()
        _tasks[task_id] = {
            "taskId": task_id,
            "status": "working",
            "statusMessage": "queued",
            "createdAt": now,
            "lastUpdatedAt": now,
            "ttlMs": 600_000,
            "pollIntervalMs": POLL_MS,
        }
        arguments = params.arguments or {}
        work = (
            _survey_work(
                task_id,
                int(arguments.get("stages", 3)),
                float(arguments.get("seconds", 0.4)),
                bool(arguments.get("map", False)),
            )
            if params.name == "survey"
            else _consent_work(task_id, str(arguments.get("question", "")), float(arguments.get("after", 0)))
            if params.name == "consent"
            else _doomed_work(task_id, float(arguments.get("seconds", 0.3)))
        )
        _work[task_id] = asyncio.get_running_loop().create_task(work)
        return {"resultType": "task", **_tasks[task_id]}

    async def get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        task = _tasks.get(params.task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        return {"resultType": "complete", **task}

    async def update(self, ctx: Any, params: UpdateParams) -> dict[str, Any]:
        waiting = _answers.get(params.task_id)
        if params.task_id not in _tasks or waiting is None:
            raise MCPError(code=INVALID_PARAMS, message="Failed to update task: Task not found")
        if not waiting.done():
            waiting.set_result(params.input_responses)
        return {"resultType": "complete"}

    async def cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        if params.task_id not in _tasks:
            raise MCPError(code=INVALID_PARAMS, message="Failed to cancel task: Task not found")
        work = _work.pop(params.task_id, None)
        if work is not None:
            work.cancel()
        _set(params.task_id, "cancelled", "cancelled by the client")
        return {"resultType": "complete"}


server = MCPServer("agentvm-test-tasks", extensions=[TasksExtension()])


@server.tool()
async def survey(stages: int = 3, seconds: float = 0.4, map: bool = False) -> str:  # noqa: A002
    """Survey something in stages (a task, for clients that take tasks)."""
    await asyncio.sleep(stages * seconds)
    return f"surveyed {stages} stages"


@server.tool()
async def doomed(seconds: float = 0.3) -> str:
    """A survey that cannot succeed (it fails after ``seconds``)."""
    raise RuntimeError("the survey site is flooded")


@server.tool()
async def consent(question: str, after: float = 0.0) -> str:
    """Ask the user to approve something (a task, for clients that take tasks)."""
    return "no task: nobody was asked"


@server.tool()
def quick() -> str:
    """Answer at once."""
    return "quick answer"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
