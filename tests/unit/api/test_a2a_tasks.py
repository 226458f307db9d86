"""A2A tasks are turns (api/a2a_tasks.py), driven by the A2A SDK's own client over the app
in-process, a **fresh app instance** per call (nothing the SDK holds in memory carries over): a
non-blocking send answers ``WORKING`` at once and nothing else; ``GetTask`` of a completed, a
failed and a suspended turn (``INPUT_REQUIRED``, naming the wait); ``CancelTask`` of the suspended
one; ``ListTasks`` paged newest first, filtered by state; a message naming a task is refused."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError

from agentvm.adapters.llm.scripted import Calls, Fail
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from tests.harness import Harness
from tests.security_harness import ManualClock, keyed_client, new_key, secure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from a2a.client import Client


@dataclasses.dataclass
class World:
    h: Harness
    token: str
    image: dict[str, Any]


@pytest.fixture
async def world(tmp_path) -> AsyncIterator[World]:
    h = Harness(tmp_path)
    secure(h, ManualClock())
    h.rt.tools = ToolSources()  # the calculator
    token = await new_key(h.rt, "tenant-a", "client")
    a = await keyed_client(h, token)
    config = {
        "name": "guarded",
        "tools": [{"type": "builtin", "name": "calculator"}],
        "approval": {"tools": "*"},
    }
    image = (await a.request("image_create", containerId="user-alice", config=config))["record"]
    yield World(h, token, image)
    h.queue.close()
    h.store.close()


@contextlib.asynccontextmanager
async def a2a(world: World) -> AsyncIterator[Client]:
    """The SDK's client, non-blocking, over a new app of the same runtime (a fresh process's)."""
    transport = httpx.ASGITransport(app=create_app(world.h.rt))
    headers = {"Authorization": f"Bearer {world.token}"}
    async with httpx.AsyncClient(transport=transport, headers=headers) as http:
        client = await create_client(
            f"http://avm/a2a/{world.image['imageId']}",
            ClientConfig(httpx_client=http, streaming=False, polling=True),
        )
        try:
            yield client
        finally:
            await client.close()


@contextlib.asynccontextmanager
async def worker(h: Harness) -> AsyncIterator[None]:
    """Runs queued turns while a call waits for them (the local host's consumer)."""

    async def loop() -> None:
        while True:
            await h.run_turns()
            await asyncio.sleep(0.005)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def send(world: World, text: str, message_id: str, **fields: Any) -> Any:
    message = Message(role=Role.ROLE_USER, message_id=message_id, parts=[Part(text=text)], **fields)
    async with a2a(world) as client:
        [answer] = [r async for r in client.send_message(SendMessageRequest(message=message))]
    return answer.task


async def get(world: World, task_id: str) -> Any:
    async with a2a(world) as client:
        return await client.get_task(GetTaskRequest(id=task_id))


async def test_tasks_are_turns_read_by_a_fresh_app(world: World) -> None:
    h = world.h
    h.model.add("Plain answer.", Fail("the model broke"))
    done = await send(world, "first", "m-1")
    assert done.status.state == TaskState.TASK_STATE_WORKING  # at once: queued, no worker yet
    assert done.id.startswith("turn_") and done.context_id == world.image["sessionId"]
    await h.run_turns()
    got = await get(world, done.id)
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.artifact_id for a in got.artifacts] == ["reply"] and got.artifacts[0].parts[
        0
    ].text == "Plain answer."
    assert [(m.role, m.parts[0].text) for m in got.history] == [
        (Role.ROLE_USER, "first"),
        (Role.ROLE_AGENT, "Plain answer."),
    ]
    again = await send(world, "first", "m-1")  # the same message id: the same task, answered at once
    assert again.id == done.id and again.status.state == TaskState.TASK_STATE_COMPLETED

    failed = await send(world, "second", "m-2")
    await h.run_turns()
    got = await get(world, failed.id)
    assert got.status.state == TaskState.TASK_STATE_FAILED and got.status.message.parts[0].text

    h.model.add(Calls(("calculator", {"expression": "2+2"})), "It is 4.")
    held = await send(world, "add, once approved", "m-3")
    await h.run_turns()
    got = await get(world, held.id)
    assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "a person's approval of tool calculator" in got.status.message.parts[0].text

    async with a2a(world) as client, worker(h):  # the cancelled waits wake the turn: it ends
        canceled = await client.cancel_task(CancelTaskRequest(id=held.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=done.id))
    assert (await get(world, held.id)).status.state == TaskState.TASK_STATE_CANCELED
    assert (await h.store.get_turn(held.id)).status == "interrupted"  # type: ignore[union-attr]

    async with a2a(world) as client:
        first = await client.list_tasks(ListTasksRequest(page_size=2))
        assert [t.id for t in first.tasks] == [held.id, failed.id]  # newest first
        assert first.total_size == 3 and first.next_page_token == failed.id
        assert all(not t.artifacts for t in first.tasks)  # without includeArtifacts
        rest = await client.list_tasks(
            ListTasksRequest(page_size=2, page_token=first.next_page_token, include_artifacts=True)
        )
        assert [t.id for t in rest.tasks] == [done.id] and rest.next_page_token == ""
        assert rest.tasks[0].artifacts[0].parts[0].text == "Plain answer."
        completed = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
        assert [t.id for t in completed.tasks] == [done.id] and completed.total_size == 1
        other = await client.list_tasks(ListTasksRequest(context_id="ctx-elsewhere"))
        assert list(other.tasks) == [] and other.total_size == 0
        with pytest.raises(InvalidParamsError):
            await client.list_tasks(ListTasksRequest(page_token="turn_nope"))


async def test_a_message_naming_a_task_is_refused_and_runs_nothing(world: World) -> None:
    world.h.model.add("One.")
    first = await send(world, "one", "m-1")
    with pytest.raises(InvalidParamsError):
        await send(world, "two", "m-2", task_id=first.id)
    await world.h.run_turns()
    history = await world.h.store.list_messages(world.image["sessionId"])
    assert [m.subtype for m in history] == ["user", "assistant"]
