"""``/a2a/{image_id}`` of a real ``avm serve`` (a subprocess on loopback, the echo model, words 40 ms
apart), driven by the maintained A2A Python SDK's own client (``a2a.client``): the card, a sent
message, a streamed one, ``GetTask``, ``ListTasks``, ``CancelTask``, a wrong key, another tenant's
image and task; a task (a turn) sent to one ``avm serve`` read and cancelled on a second one on the
same data dir."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, create_client
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
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, base_env, free_port, run_avm

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from a2a.client import Client

    from tests.integration.avm_process import AvmServer

CALC = {"type": "builtin", "name": "calculator"}
LONG = " ".join(f"word{i}" for i in range(60))  # the echo model streams it word by word, 40 ms apart
LONGER = " ".join(f"more{i}" for i in range(250))  # 10 s of streaming


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("avm")


@pytest.fixture(scope="module")
def served(data) -> Iterator[tuple[AvmServer, str, str]]:
    """A real ``avm serve``, its admin key (tenant default), and a client key of tenant acme."""
    made = run_avm("keys", "create", "--tenant", "acme", "--scope", "client", "--data-dir", str(data))
    assert made.returncode == 0, made.stderr
    with avm_serve(data, free_port(), env=base_env(AVM_ECHO_DELAY_MS="40")) as server:
        yield server, server.admin_token(), made.stdout.strip()


@pytest.fixture(scope="module")
def image(served) -> dict[str, Any]:
    server, token, _ = served

    async def create() -> dict[str, Any]:
        async with AgentVMClient.connect(server.url, token=token) as client:
            made = await client.create_image(
                "user-alice", name="calc helper", description="Does sums with its calculator.", tools=[CALC]
            )
        return {"imageId": made.imageId, "sessionId": made.sessionId}

    return asyncio.run(create())


@contextlib.asynccontextmanager
async def a2a_client(
    server: AvmServer, token: str, image_id: str, *, streaming: bool
) -> AsyncIterator[Client]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http:
        client = await create_client(
            f"{server.http}/a2a/{image_id}", ClientConfig(httpx_client=http, streaming=streaming)
        )
        try:
            yield client
        finally:
            await client.close()


def say(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=f"m-{abs(hash(text))}", parts=[Part(text=text)])
    )


def artifact_text(task: Any) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


async def test_the_card_names_the_image_its_tools_and_the_bearer_key(served, image) -> None:
    server, token, _ = served
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        card = await A2ACardResolver(http, f"{server.http}/a2a/{image['imageId']}").get_agent_card()
    assert card.name == "calc helper" and card.description == "Does sums with its calculator."
    assert [s.id for s in card.skills] == ["chat", "tool:calculator"]
    assert card.security_schemes["apiKey"].http_auth_security_scheme.scheme == "bearer"
    assert card.supported_interfaces[0].url == f"{server.http}/a2a/{image['imageId']}"
    assert card.capabilities.streaming


async def test_send_get_and_stream_are_turns_of_the_images_session(served, image) -> None:
    server, token, _ = served
    async with a2a_client(server, token, image["imageId"], streaming=False) as client:
        [answer] = [r async for r in client.send_message(say("hello there"))]
        task = answer.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.context_id == image["sessionId"]
        assert artifact_text(task) == "Echo: hello there"
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert (
            got.status.state == TaskState.TASK_STATE_COMPLETED and artifact_text(got) == "Echo: hello there"
        )
        assert task.id == task.metadata["agentvm.turnId"] and task.id.startswith(
            "turn_"
        )  # the task is the turn
        assert [(m.role, m.parts[0].text) for m in got.history] == [
            (Role.ROLE_USER, "hello there"),
            (Role.ROLE_AGENT, "Echo: hello there"),
        ]
    async with a2a_client(server, token, image["imageId"], streaming=True) as client:
        updates = [r async for r in client.send_message(say("6 times 7"))]
    states = [u.status_update.status.state for u in updates if u.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
    texts = [
        p.text for u in updates if u.HasField("artifact_update") for p in u.artifact_update.artifact.parts
    ]
    assert "".join(texts) == "Echo: 6 times 7"
    # The turns are the image's: in its session, metered as the key's tenant's usage.
    usage = httpx.get(f"{server.http}/v1/usage", headers={"Authorization": f"Bearer {token}"}).json()
    assert usage["totals"]["turns"] >= 2


async def test_cancel_interrupts_the_running_turn(served, image) -> None:
    server, token, _ = served
    async with a2a_client(server, token, image["imageId"], streaming=True) as client:
        stream = client.send_message(say(LONG))
        async for update in stream:  # the turn runs: its first text delta arrived
            if update.HasField("artifact_update"):
                task_id = update.artifact_update.task_id
                break
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        with contextlib.suppress(A2AClientError):
            async for _ in stream:
                pass
        got = await client.get_task(GetTaskRequest(id=task_id))
    assert got.status.state == TaskState.TASK_STATE_CANCELED


async def test_wrong_key_and_another_tenant_answer_like_missing(served, image) -> None:
    server, token, acme = served
    card = f"{server.http}/a2a/{image['imageId']}/.well-known/agent-card.json"
    for headers in ({}, {"Authorization": "Bearer avm_000000000000_wrong"}):
        assert httpx.get(card, headers=headers).status_code == 401
    theirs = httpx.get(card, headers={"Authorization": f"Bearer {acme}"})
    missing = httpx.get(
        f"{server.http}/a2a/img_nope/.well-known/agent-card.json", headers={"Authorization": f"Bearer {acme}"}
    )
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["error"]["code"] == missing.json()["error"]["code"]
    # A task of tenant default, asked for by acme through acme's own image: not found.
    async with a2a_client(server, token, image["imageId"], streaming=False) as client:
        [answer] = [r async for r in client.send_message(say("mine"))]
    async with AgentVMClient.connect(server.url, token=acme) as acme_client:
        own = await acme_client.create_image("user-bob", name="acme agent")
    async with a2a_client(server, acme, own.imageId, streaming=False) as client:
        for task_id in (answer.task.id, "no-such-task"):
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=task_id))
            with pytest.raises(TaskNotFoundError):
                await client.cancel_task(CancelTaskRequest(id=task_id))
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": answer.task.id}}
    posted = httpx.post(
        f"{server.http}/a2a/{image['imageId']}", json=rpc, headers={"Authorization": f"Bearer {acme}"}
    )
    assert posted.status_code == 404 and posted.json()["error"]["code"] == missing.json()["error"]["code"]


def test_the_documented_json_rpc_body_and_a_foreign_context(served, image) -> None:
    """docs/a2a.md's curl body works as written; a contextId other than the image's session is refused."""
    server, token, _ = served
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}

    def send(context_id: str | None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "ROLE_USER",
            "messageId": f"doc-{context_id}",
            "parts": [{"text": "hi"}],
        }
        if context_id is not None:
            message["contextId"] = context_id
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        return httpx.post(
            f"{server.http}/a2a/{image['imageId']}", json=rpc, headers=headers, timeout=60
        ).json()

    task = send(None)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task["contextId"] == image["sessionId"]
    assert "".join(part["text"] for part in task["artifacts"][0]["parts"]) == "Echo: hi"  # the deltas
    foreign = send("ctx-of-someone-else")
    assert foreign["error"]["code"] == -32602 and image["sessionId"] in foreign["error"]["message"]


async def test_a_task_sent_to_one_server_is_read_listed_and_cancelled_on_another(served, image, data) -> None:
    """The task is the turn, in the store: a second ``avm serve`` on the same data dir (the first's
    SDK holds the only in-memory copy of nothing) answers ``GetTask``, ``ListTasks`` and
    ``CancelTask`` for it; a non-blocking send answers ``WORKING`` at once."""
    server, token, _ = served
    async with a2a_client(server, token, image["imageId"], streaming=False) as client:
        [answer] = [r async for r in client.send_message(say("from the first server"))]
    done = answer.task
    env = base_env(AVM_ECHO_DELAY_MS="40", AVM_WORKER_ID="w1")
    with avm_serve(data, free_port(), env=env) as other:
        async with a2a_client(other, token, image["imageId"], streaming=False) as client:
            got = await client.get_task(GetTaskRequest(id=done.id))
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert artifact_text(got) == "Echo: from the first server"
            assert got.history[0].parts[0].text == "from the first server"

            # Sent (non-blocking) to the first server, cancelled on the second while it runs.
            http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            async with http:
                polling = await create_client(
                    f"{server.http}/a2a/{image['imageId']}",
                    ClientConfig(httpx_client=http, streaming=False, polling=True),
                )
                [started] = [r async for r in polling.send_message(say(LONGER))]
                await polling.close()
            running = started.task
            assert running.status.state == TaskState.TASK_STATE_WORKING  # at once
            for _ in range(200):  # until the turn streams on the first server
                seen = await client.get_task(GetTaskRequest(id=running.id))
                if seen.status.state == TaskState.TASK_STATE_WORKING and await _streaming(server, token):
                    break
                await asyncio.sleep(0.05)
            canceled = await client.cancel_task(CancelTaskRequest(id=running.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            for _ in range(200):  # the turn ends interrupted on the first server
                ended = await client.get_task(GetTaskRequest(id=running.id))
                if ended.status.state != TaskState.TASK_STATE_WORKING:
                    break
                await asyncio.sleep(0.05)
            assert ended.status.state == TaskState.TASK_STATE_CANCELED, ended
            assert len(artifact_text(ended).split()) < len(LONGER.split())  # its partial reply, if any

            listed = await client.list_tasks(ListTasksRequest(page_size=1, include_artifacts=True))
            assert [t.id for t in listed.tasks] == [running.id]  # newest first
            assert listed.total_size >= 2 and listed.next_page_token == running.id
            more = await client.list_tasks(ListTasksRequest(page_size=100, page_token=listed.next_page_token))
            assert done.id in [t.id for t in more.tasks] and more.next_page_token == ""
            finished = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
            assert done.id in [t.id for t in finished.tasks] and running.id not in [
                t.id for t in finished.tasks
            ]
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=done.id))  # a completed task: not cancelable


async def _streaming(server: AvmServer, token: str) -> bool:
    """The first server runs a turn (``GET /v1/turns``)."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        turns = (await http.get(f"{server.http}/v1/turns?status=running")).json()["turns"]
    return bool(turns)
