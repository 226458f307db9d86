"""``/a2a/{image_id}`` on the AWS host (docs/a2a.md, "On AWS"), driven by the maintained A2A SDK's
own client (``a2a.client``) through the HTTP API handler (Mangum, the same app as ``avm serve``) on
moto, each request an API Gateway payload 2.0 event; the turns run on the turn worker handler, fed
from the SQS FIFO queue as the event source mapping feeds it.

API Gateway's HTTP API sends a Lambda's answer whole, so ``SendStreamingMessage`` answers its SSE
events in one body when the turn ends: ``WORKING``, the reply as one artifact chunk, the
final status. A turn still running when the wait (``AVM_MCP_CALL_DEADLINE_S``, 25 s on AWS) is over
is answered ``WORKING``; the same message id again answers that turn, never a second one.

A task is its turn, read from DynamoDB: ``GetTask``/``ListTasks``/``CancelTask`` answer from a fresh
HTTP API Lambda (``Stack.function``) as from the one that sent it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
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
from a2a.utils.errors import TaskNotFoundError

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.hosts.aws import run_sync
from agentvm.runtime import TurnSettings
from functions.http_api import app as http_api
from functions.turn_worker import app as turn_worker
from tests.functions.aws_stack import TABLE, Stack, lambda_sqs_event, moto_resources
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


@pytest.fixture
def slow_stack(monkeypatch, context, push):
    """Words 10 ms apart, the worker polling for cancel marks every 20 ms in a thread of its own
    (another Lambda: nothing in memory shared)."""
    monkeypatch.setattr(turn_worker, "run_sync", lambda coro: asyncio.run(coro))
    one_loop_per_thread(monkeypatch)
    turns = TurnSettings(flush_s=0.01, mcp_call_deadline_s=20.0, mcp_poll_s=0.05, cancel_poll_s=0.02)
    with moto_resources(monkeypatch) as resources:
        stack = Stack(resources, context, push, turns=turns)
        stack.model.word_delay_s = 0.01
        yield stack


def make_image(stack: Stack, token: str, name: str = "Support") -> dict[str, Any]:
    stack.connect(CONN, headers={"Authorization": f"Bearer {token}"})
    config = {"name": name, "description": "Answers Acme's questions.", "tools": []}
    return stack.request(CONN, "image_create", "img", containerId="user-alice", config=config)["record"]


@contextlib.asynccontextmanager
async def a2a_client(
    stack: Stack, token: str, image_id: str, *, streaming: bool, polling: bool = False, handler: Any = None
) -> AsyncIterator[Client]:
    """The SDK's client through the HTTP API handler (``handler``: another execution environment's)."""
    transport = LambdaTransport(handler or stack.http_api, stack.context)
    http = httpx.AsyncClient(transport=transport, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http:
        client = await create_client(
            f"{SERVER}/a2a/{image_id}",
            ClientConfig(httpx_client=http, streaming=streaming, polling=polling),
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


def test_a_task_is_its_turn_read_and_listed_from_a_fresh_lambda(stack):
    """Sent non-blocking (answered ``WORKING`` at once, nothing left running in the function), run
    by the worker, then read by another execution environment of the HTTP API function."""
    token = stack.new_key("acme", "admin")
    image = make_image(stack, token)
    stack.model.add("Read from another Lambda.")

    async def send() -> Any:
        async with a2a_client(stack, token, image["imageId"], streaming=False, polling=True) as client:
            [answer] = [r async for r in client.send_message(say("who reads this?", "m-read"))]
        return answer.task

    sent = asyncio.run(send())
    assert sent.status.state == TaskState.TASK_STATE_WORKING and sent.id.startswith("turn_")
    stack.run_turns()

    async def read() -> None:
        fresh = stack.function(http_api)  # a cold execution environment: an empty process
        async with a2a_client(stack, token, image["imageId"], streaming=False, handler=fresh) as client:
            got = await client.get_task(GetTaskRequest(id=sent.id))
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert artifact_text(got) == "Read from another Lambda."
            assert [m.parts[0].text for m in got.history] == ["who reads this?", "Read from another Lambda."]
            listed = await client.list_tasks(ListTasksRequest())
            assert [t.id for t in listed.tasks] == [sent.id] and listed.total_size == 1

    asyncio.run(read())
    assert len(stack.model.requests) == 1


def test_cancel_task_from_a_fresh_lambda_stops_the_turn_the_worker_runs(slow_stack):
    stack = slow_stack
    token = stack.new_key("acme", "admin")
    image = make_image(stack, token)
    stack.model.add(" ".join(f"w{i}" for i in range(400)))

    async def send() -> Any:
        async with a2a_client(stack, token, image["imageId"], streaming=False, polling=True) as client:
            [answer] = [r async for r in client.send_message(say("a long story", "m-long-story"))]
        return answer.task

    sent = asyncio.run(send())
    assert sent.status.state == TaskState.TASK_STATE_WORKING
    sqs, url = stack.resources.sqs, stack.resources.queue_url
    received = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    result: dict[str, Any] = {}
    event = lambda_sqs_event(received, stack.resources.queue_arn)
    worker = threading.Thread(target=lambda: result.update(stack.worker(event, stack.context)))
    worker.start()  # the worker Lambda runs the turn
    deadline, store = time.monotonic() + 10, DynamoDbStore(TABLE)
    while (record := run_sync(store.get_turn(sent.id))) is None or record.status != "running":
        assert time.monotonic() < deadline and worker.is_alive(), "the turn did not start"
        time.sleep(0.01)
    time.sleep(0.2)  # about 20 words streamed

    async def cancel() -> Any:
        async with a2a_client(
            stack, token, image["imageId"], streaming=False, handler=stack.function(http_api)
        ) as client:
            canceled = await client.cancel_task(CancelTaskRequest(id=sent.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        worker.join(10)
        async with a2a_client(
            stack, token, image["imageId"], streaming=False, handler=stack.function(http_api)
        ) as client:
            return await client.get_task(GetTaskRequest(id=sent.id))

    ended = asyncio.run(cancel())
    assert not worker.is_alive() and result == {"batchItemFailures": []}
    assert stack.model.closed_early == 1  # the worker closed the model stream
    assert ended.status.state == TaskState.TASK_STATE_CANCELED
    assert 5 <= len(artifact_text(ended).split()) < 400  # the partial reply
    stored = run_sync(store.get_turn(sent.id))
    assert stored is not None and stored.status == "interrupted"


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
