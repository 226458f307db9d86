"""``/a2a/{image_id}`` on the AWS host (docs/a2a.md, "On AWS"), driven by the maintained A2A SDK's
own client (``a2a.client``) through the HTTP API handler (Mangum, the same app as ``avm serve``) on
moto, each request an API Gateway payload 2.0 event; the turns run on the turn worker handler, fed
from the SQS FIFO queue as the event source mapping feeds it.

API Gateway's HTTP API sends a Lambda's answer whole, so ``SendStreamingMessage`` answers its SSE
events in one body when the turn ends: the task, ``WORKING``, the reply as one artifact chunk, the
final status. A turn still running when the wait (``AVM_MCP_CALL_DEADLINE_S``, 25 s on AWS) is over
is answered ``WORKING``; the same message id again answers that turn, never a second one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import TaskNotFoundError

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.hosts.aws import run_sync
from agentvm.runtime import TurnSettings
from tests.functions.aws_stack import TABLE, Stack, moto_resources
from tests.functions.lambda_http import LambdaTransport, one_loop_per_thread, sqs_event_source

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from a2a.client import Client

pytestmark = pytest.mark.aws

SERVER = "https://h7g6f5e4d3.execute-api.us-east-1.amazonaws.com"  # the events' host
CONN = "conn-a2a"


@pytest.fixture
def stack(monkeypatch, context, push):
    one_loop_per_thread(monkeypatch)
    turns = TurnSettings(flush_s=0.01, mcp_call_deadline_s=20.0, mcp_poll_s=0.05)
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push, turns=turns)


@pytest.fixture
def short_wait_stack(monkeypatch, context, push):
    """A stack whose HTTP API waits 0.3 s for a turn (as 25 s on AWS): its turns outlast it."""
    one_loop_per_thread(monkeypatch)
    turns = TurnSettings(flush_s=0.01, mcp_call_deadline_s=0.3, mcp_poll_s=0.05)
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push, turns=turns)


def make_image(stack: Stack, token: str, name: str = "Support") -> dict[str, Any]:
    stack.connect(CONN, headers={"Authorization": f"Bearer {token}"})
    config = {"name": name, "description": "Answers Acme's questions.", "tools": []}
    return stack.request(CONN, "image_create", "img", containerId="user-alice", config=config)["record"]


@contextlib.asynccontextmanager
async def a2a_client(stack: Stack, token: str, image_id: str, *, streaming: bool) -> AsyncIterator[Client]:
    transport = LambdaTransport(stack.http_api, stack.context)
    http = httpx.AsyncClient(transport=transport, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http:
        client = await create_client(
            f"{SERVER}/a2a/{image_id}", ClientConfig(httpx_client=http, streaming=streaming)
        )
        try:
            yield client
        finally:
            await client.close()


def say(text: str, message_id: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=message_id, parts=[Part(text=text)])
    )


def artifact_text(task: Any) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


def test_the_sdk_sends_gets_and_streams_through_the_lambda_handlers(stack):
    token = stack.new_key("acme", "admin")
    image = make_image(stack, token)
    stack.model.add("Hello from the worker Lambda.", "Streamed in one body.")

    async def scenario() -> None:
        transport = LambdaTransport(stack.http_api, stack.context)
        async with httpx.AsyncClient(
            transport=transport, headers={"Authorization": f"Bearer {token}"}
        ) as http:
            card = await A2ACardResolver(http, f"{SERVER}/a2a/{image['imageId']}").get_agent_card()
        assert card.name == "Support" and card.capabilities.streaming
        assert card.supported_interfaces[0].url == f"{SERVER}/a2a/{image['imageId']}"

        async with a2a_client(stack, token, image["imageId"], streaming=False) as client:
            [answer] = [r async for r in client.send_message(say("hi", "m-1"))]
            task = answer.task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.context_id == image["sessionId"]
            assert artifact_text(task) == "Hello from the worker Lambda."
            got = await client.get_task(GetTaskRequest(id=task.id))  # the same warm Lambda: its store
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert artifact_text(got) == "Hello from the worker Lambda."

        async with a2a_client(stack, token, image["imageId"], streaming=True) as client:
            updates = [r async for r in client.send_message(say("and again", "m-2"))]
        states = [u.status_update.status.state for u in updates if u.HasField("status_update")]
        assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
        chunks = [
            p.text for u in updates if u.HasField("artifact_update") for p in u.artifact_update.artifact.parts
        ]
        assert chunks == ["Streamed in one body."]  # no text deltas reach the HTTP API on AWS

    with sqs_event_source(stack) as source:
        asyncio.run(scenario())
    assert source.delivered == 2
    history = run_sync(DynamoDbStore(TABLE).list_messages(image["sessionId"]))
    assert [m.subtype for m in history] == ["user", "assistant", "user", "assistant"]
    assert len(stack.model.requests) == 2


def test_a_turn_outlasting_the_wait_is_working_and_the_same_message_id_answers_it_once(short_wait_stack):
    stack = short_wait_stack
    token = stack.new_key("acme", "admin")
    image = make_image(stack, token)
    stack.model.add("Done at last.")

    async def send() -> Any:
        async with a2a_client(stack, token, image["imageId"], streaming=False) as client:
            [answer] = [r async for r in client.send_message(say("a long one", "m-long"))]
        return answer.task

    first = asyncio.run(send())  # no worker has taken the job yet: the wait is over first
    assert first.status.state == TaskState.TASK_STATE_WORKING
    turn_id = first.metadata["agentvm.turnId"]
    note = first.status.message.parts[0].text
    assert "m-long" in note and "queued" in note

    stack.run_turns()  # the worker Lambda runs it
    again = asyncio.run(send())
    assert again.status.state == TaskState.TASK_STATE_COMPLETED and artifact_text(again) == "Done at last."
    stack.run_turns()
    assert len(stack.model.requests) == 1  # one turn for the one message id
    stored = run_sync(DynamoDbStore(TABLE).get_turn(turn_id))
    assert stored is not None and stored.status == "completed"


def test_a_wrong_key_and_another_tenant_answer_like_missing_on_aws(stack):
    acme = stack.new_key("acme", "admin")
    globex = stack.new_key("globex", "admin")
    image = make_image(stack, acme)
    stack.connect("conn-globex", headers={"Authorization": f"Bearer {globex}"})
    own = stack.request(
        "conn-globex", "image_create", "img2", containerId="user-bob", config={"name": "Globex agent"}
    )["record"]
    stack.model.add("Acme's answer.")

    async def scenario() -> None:
        transport = LambdaTransport(stack.http_api, stack.context)
        async with httpx.AsyncClient(transport=transport, base_url=SERVER) as http:
            card = f"/a2a/{image['imageId']}/.well-known/agent-card.json"
            for headers in ({}, {"Authorization": "Bearer avm_000000000000_wrong"}):
                assert (await http.get(card, headers=headers)).status_code == 401
            theirs = await http.get(card, headers={"Authorization": f"Bearer {globex}"})
            missing = await http.get(
                "/a2a/img_nope/.well-known/agent-card.json", headers={"Authorization": f"Bearer {globex}"}
            )
            assert theirs.status_code == missing.status_code == 404
            assert theirs.json()["error"] == {
                **missing.json()["error"],
                "message": missing.json()["error"]["message"].replace("img_nope", image["imageId"]),
            }
        async with a2a_client(stack, acme, image["imageId"], streaming=False) as client:
            [answer] = [r async for r in client.send_message(say("mine", "m-acme"))]
        assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
        async with a2a_client(stack, globex, own["imageId"], streaming=False) as client:
            for task_id in (answer.task.id, "no-such-task"):
                with pytest.raises(TaskNotFoundError):
                    await client.get_task(GetTaskRequest(id=task_id))
                with pytest.raises(TaskNotFoundError):
                    await client.cancel_task(CancelTaskRequest(id=task_id))

    with sqs_event_source(stack):
        asyncio.run(scenario())
    assert len(stack.model.requests) == 1  # only acme's turn ran


def test_the_http_api_lambda_imports_the_a2a_sdk_only_on_the_first_a2a_request():
    """The layer ships a2a-sdk; the handler's cold start (the app built, a /health answered) pays
    nothing for it."""
    code = (
        "import sys\n"
        "from agentvm.api.app import create_app\n"
        "import functions.http_api.app\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'a2a', 'google', 'grpc'}))\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root / 'shared'}{os.pathsep}{root}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"
