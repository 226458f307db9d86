"""A2A tasks read from AgentVM's own store: a task IS a turn, with the turn's id (docs/a2a.md).

No second table: ``GetTask`` maps the turn record and the messages answering its user message to
an A2A ``Task`` (its state, the reply as the artifact ``reply``, the user message and the reply as
its history); ``ListTasks`` lists the turns of the image's session, newest first. So any process
on the same store answers them: a second ``avm serve`` on the same SQLite file, another cluster
node, a fresh Lambda on AWS. ``TurnTaskStore`` is the SDK's ``TaskStore`` over them; it writes
nothing (the turn's worker writes the turn).

Scoped to the request's image (found with the caller's tenant): a turn of another session, of
another image or tenant, answers as one that does not exist. Imported on the first ``/a2a``
request only (it imports the SDK).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.server.tasks import TaskStore
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError

from agentvm.messages import AssistantMessage, UserMessage, chains, text_of
from agentvm.records import turn_id_for
from agentvm.turns.watch import MAX_TURN_MESSAGES, look_at_turn

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext

    from agentvm.messages import Message as StoredMessage
    from agentvm.records import ImageRecord, TurnRecord
    from agentvm.runtime import Runtime
    from agentvm.turns.watch import FollowedTurn

TURN_ID_KEY = "agentvm.turnId"  # in each task's metadata (the task id is the turn id too)
REPLY = "reply"  # the artifact id of a task's reply
TURN_PREFIX = "turn_"

STATES = {
    "queued": TaskState.TASK_STATE_WORKING,
    "running": TaskState.TASK_STATE_WORKING,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "interrupted": TaskState.TASK_STATE_CANCELED,
    "failed": TaskState.TASK_STATE_FAILED,
}


async def read_task(rt: Runtime, image: ImageRecord, task_id: str) -> Task | None:
    """The task of turn ``task_id`` of the image's session; None if the session has no such turn."""
    if not task_id.startswith(TURN_PREFIX):
        return None
    record = await rt.store.get_turn(task_id)
    if record is None or record.sessionId != image.sessionId:
        return None
    messages = await _turn_messages(rt, record)
    user = messages[0] if messages and isinstance(messages[0], UserMessage) else None
    chain = chains(messages).get(user.id, []) if user is not None else []
    return task_of(record, user, await look_at_turn(rt, record.turnId, record.status, chain), chain)


async def list_tasks(rt: Runtime, image: ImageRecord, params: ListTasksRequest) -> ListTasksResponse:
    """The turns of the image's session as tasks, newest first, a page at a time (the page token:
    the last task id of the page before). Reads the session's history once, and one turn record per
    listed turn (per user message of the session with a ``status`` or time filter)."""
    page_size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
    if params.context_id and params.context_id != image.sessionId:
        return ListTasksResponse(page_size=page_size, total_size=0)
    history = await rt.store.list_messages(image.sessionId)
    answers = chains(history)
    users = [m for m in reversed(history) if isinstance(m, UserMessage)]
    filtered = bool(params.status) or params.HasField("status_timestamp_after")
    after_ms = params.status_timestamp_after.ToMilliseconds() if filtered else 0

    async def listed(user: UserMessage) -> Task | None:
        record = await rt.store.get_turn(turn_id_for(user.id))
        if record is None or record.sessionId != image.sessionId:  # a message with no turn (imported)
            return None
        chain = answers.get(user.id, [])
        task = task_of(record, user, await look_at_turn(rt, record.turnId, record.status, chain), chain)
        if filtered and not _matches(task, record, params.status, after_ms):
            return None
        return task

    if filtered:  # every turn read: the page and the total are of the matching ones
        every = [task for user in users if (task := await listed(user)) is not None]
        start = _start([task.id for task in every], params.page_token)
        page, more, total = every[start : start + page_size], start + page_size < len(every), len(every)
    else:  # the turns of the page read only
        rest = users[_start([turn_id_for(user.id) for user in users], params.page_token) :]
        page, read = [], 0
        while read < len(rest) and len(page) < page_size:
            task = await listed(rest[read])
            read += 1
            if task is not None:
                page.append(task)
        more, total = read < len(rest), len(users)
    token = page[-1].id if more and page else ""
    return ListTasksResponse(tasks=page, next_page_token=token, page_size=page_size, total_size=total)


def _start(ids: list[str], page_token: str) -> int:
    """Where a page starts: after the task its token names (the last of the page before)."""
    if not page_token:
        return 0
    if page_token not in ids:
        raise InvalidParamsError(message=f"Invalid page token: {page_token}")
    return ids.index(page_token) + 1


def task_of(
    record: TurnRecord, user: UserMessage | None, looked: FollowedTurn, chain: list[StoredMessage]
) -> Task:
    """The A2A task of a turn: its state (a turn suspended on someone is ``INPUT_REQUIRED``, with
    what it waits on), the reply as the artifact ``reply``, the user message and the reply."""
    status = TaskStatus(state=STATES.get(record.status, TaskState.TASK_STATE_WORKING))
    status.timestamp.FromMilliseconds(record.updatedAt)
    note = ""
    if record.status == "suspended" and looked.waiting:
        status.state = TaskState.TASK_STATE_INPUT_REQUIRED
        note = "\n".join(looked.waiting)
    elif record.status == "failed":
        note = looked.error or "the turn failed"
    if note:
        status.message.CopyFrom(
            Message(
                role=Role.ROLE_AGENT,
                message_id=f"{record.turnId}:status",
                task_id=record.turnId,
                context_id=record.sessionId,
                parts=[Part(text=note)],
            )
        )
    task = Task(id=record.turnId, context_id=record.sessionId, status=status)
    task.metadata.update({TURN_ID_KEY: record.turnId})
    if user is not None:
        task.history.append(_message(user.id, Role.ROLE_USER, text_of(user.content), record))
    if looked.reply:
        replies = [m for m in chain if isinstance(m, AssistantMessage)]
        reply_id = replies[-1].id if replies else f"{record.turnId}:reply"
        task.history.append(_message(reply_id, Role.ROLE_AGENT, looked.reply, record))
        task.artifacts.append(Artifact(artifact_id=REPLY, name=REPLY, parts=[Part(text=looked.reply)]))
    return task


class TurnTaskStore(TaskStore):
    """The SDK's task store over AgentVM's turns: ``get`` and ``list`` read the turns of the
    request's image (its call context's ``image``); ``save`` and ``delete`` write nothing, as the
    turn's worker writes the turn (the SDK keeps its working copy of a task it runs in memory, for
    that request). For the request that sent the turn, ``get`` answers the task without history
    nor artifacts: the SDK adds the request's message and the executor the reply."""

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        rt, image = _scope(context)
        task = await read_task(rt, image, task_id)
        sent = context.state.get("sent")
        if task is not None and sent is not None and sent.turn_id == task_id:
            task.ClearField("history")
            task.ClearField("artifacts")
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        rt, image = _scope(context)
        return await list_tasks(rt, image, params)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Nothing: the turn is the task (its worker writes it)."""

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Nothing: a turn goes with its image (``DELETE`` the image)."""


def _scope(context: ServerCallContext) -> tuple[Runtime, ImageRecord]:
    return context.state["runtime"], context.state["image"]


def _matches(task: Task, record: TurnRecord, state: Any, after_ms: int) -> bool:
    return (not state or task.status.state == state) and record.updatedAt > after_ms


def _message(message_id: str, role: Any, text: str, record: TurnRecord) -> Message:
    return Message(
        role=role,
        message_id=message_id,
        task_id=record.turnId,
        context_id=record.sessionId,
        parts=[Part(text=text)],
    )


async def _turn_messages(rt: Runtime, record: TurnRecord) -> list[StoredMessage]:
    """The turn's user message and every message after it: one bounded read, or the whole history
    when the session went on for more than ``MAX_TURN_MESSAGES`` since."""
    after = await rt.store.recent_messages_after(record.sessionId, record.userSeq - 1, MAX_TURN_MESSAGES)
    if after and after[0].seq == record.userSeq and record.userSeq > 0:
        return [m.message for m in after]
    history = await rt.store.list_messages(record.sessionId)
    for index, message in enumerate(history):
        if isinstance(message, UserMessage) and turn_id_for(message.id) == record.turnId:
            return history[index:]
    return []


__all__ = ["REPLY", "TURN_ID_KEY", "TurnTaskStore", "list_tasks", "read_task", "task_of"]
