"""Parity: one scripted conversation through the AWS host on moto and through the local host.

AWS side: the real handlers (ws_authorizer, ws_connect, ws_default, turn_worker, ws_disconnect),
each with its own runtime wired by ``aws_runtime`` (DynamoDB, SQS FIFO, API Gateway management API,
SSM, all moto), fed API-Gateway-shaped events; the client connects with an API key (``?token=``),
through the authorizer. The turn jobs are received from the moto queue and delivered to the worker
as the SQS event Lambda would build. Local side: the local adapters (SQLite store and queue,
in-memory connections, in-process push), as ``avm serve`` wires them. Both use the same scripted
model and flush window. The client must see the same frames, in the same order.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

import pytest
from aws_lambda_powertools.utilities.parser.models import SqsModel
from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends

from agentvm.adapters.llm.scripted import Calls, ScriptedModelClient, SingleModelResolver
from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.agent.tools.sources import ToolSources
from agentvm.config import Settings
from agentvm.gateway.dispatch import handle_frame
from agentvm.hosts.aws import aws_runtime, aws_security, run_sync
from agentvm.observability.metrics import NoMetrics
from agentvm.observability.running import TurnProgress
from agentvm.ports import ConnectionInfo
from agentvm.runtime import Runtime, SystemClock, TurnSettings
from agentvm.turns.cancel_poll import CancelPoll
from agentvm.turns.worker import process_turn
from functions.turn_worker import app as turn_worker
from functions.ws_authorizer import app as ws_authorizer
from functions.ws_connect import app as ws_connect
from functions.ws_default import app as ws_default
from functions.ws_disconnect import app as ws_disconnect
from tests.functions.aws_stack import TABLE, Resources, lambda_sqs_event, moto_resources
from tests.functions.aws_stack import frame as _frame

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.aws

# The third turn is a tool turn: the model calls the image's built-in calculator, then answers.
REPLIES = [
    "Hello there, how are you today?",
    "Fine, thanks for asking.",
    Calls(("calculator", {"expression": "6*7"}), text="Let me compute."),
    "It is 42.",
]
IMAGE = {"name": "Helper", "tools": [{"type": "builtin", "name": "calculator"}]}
TURNS = TurnSettings(flush_s=10.0)  # deterministic coalescing: first delta at once, the rest at the end
CONNECTION = "Q3xYzfGIoAMCJqg="  # the id in events/apigw-ws-*.json


class Conversation:
    """The script: what the client sends, given what it has received so far."""

    def __init__(
        self,
        send: Callable[[dict[str, Any]], None],
        run_turns: Callable[[], None],
        received: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self.send = send
        self.run_turns = run_turns
        self.received = received

    def response(self, type_: str) -> dict[str, Any]:
        return next(f for f in reversed(self.received()) if f["type"] == f"{type_}_response")["data"]

    def play(self) -> None:
        self.send(_frame("container_create", "req_1", containerId="user-alice"))
        self.send(_frame("image_create", "req_2", containerId="user-alice", config=IMAGE))
        image = self.response("image_create")["record"]
        self.send({"type": "subscribe", "sessionId": image["sessionId"]})
        for n, content in enumerate(["Hi!", "How are you?", "What is 6*7?"]):
            self.send(_frame("message_send", f"req_{3 + n}", imageId=image["imageId"], content=content))
            self.run_turns()
        self.send(_frame("image_messages", "req_9", imageId=image["imageId"]))
        self.send(_frame("image_get", "req_10", imageId="img_does_not_exist"))


# -- local host ---------------------------------------------------------------------------------


def _local_stream(tmp_path: Path) -> list[dict[str, Any]]:
    store, queue, push = SqliteStore(":memory:"), SqliteTurnQueue(tmp_path / "queue.db"), LocalPush()
    rt = Runtime(
        store=store,
        queue=queue,
        connections=InMemoryConnections(),
        push=push,
        models=SingleModelResolver(ScriptedModelClient(REPLIES)),
        turns=TURNS,
        tools=ToolSources(),
        cancel_poll=CancelPoll(),
        progress=TurnProgress(),
        metrics=NoMetrics(),
    )
    received: list[dict[str, Any]] = []

    async def deliver(payload: str) -> None:
        received.append(json.loads(payload))

    push.attach("conn_local", deliver)
    run_sync(rt.connections.register(ConnectionInfo("conn_local", "default", rt.clock.now_ms())))

    async def send(frame: dict[str, Any]) -> None:
        for payload in await handle_frame(rt, "conn_local", json.dumps(frame)):
            await push.send("conn_local", payload)

    conversation = Conversation(
        lambda frame: run_sync(send(frame)),
        lambda: run_sync(queue.drain(lambda job: process_turn(rt, job))),
        lambda: received,
    )
    try:
        conversation.play()
    finally:
        queue.close()
        store.close()
    return received


# -- AWS host on moto ---------------------------------------------------------------------------


class SpyPush:
    """Wraps a function's real ``ApiGatewayPush``: moto keeps one byte buffer per connection, so the
    individual frames are recorded here, in delivery order, after the real post succeeded."""

    def __init__(self, inner: Any, log: list[tuple[str, str]]) -> None:
        self.inner = inner
        self.log = log

    async def send(self, connection_id: str, payload: str) -> None:
        await self.inner.send(connection_id, payload)  # ConnectionGone propagates, unrecorded
        self.log.append((connection_id, payload))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    with moto_resources(monkeypatch) as resources:
        yield resources


def _aws_stream(aws: Resources, load_event, context) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Play the conversation through the Lambda handlers; returns the frames and the raw posts."""
    sqs, queue_url, queue_arn = aws.sqs, aws.queue_url, aws.queue_arn
    model = ScriptedModelClient(REPLIES)
    posts: list[tuple[str, str]] = []

    def handler(app: Any) -> Callable[[dict[str, Any], Any], Any]:
        # One runtime per function, as each Lambda builds its own from its environment.
        rt = aws_runtime(Settings(), require=app.REQUIRED_SETTINGS)
        rt = dataclasses.replace(
            rt, models=SingleModelResolver(model), turns=TURNS, push=SpyPush(rt.push, posts)
        )
        return app.build_handler(rt)

    authorizer, connect, default, worker, disconnect = (
        handler(m) for m in (ws_authorizer, ws_connect, ws_default, turn_worker, ws_disconnect)
    )

    def send(frame: dict[str, Any]) -> None:
        event = load_event("apigw-ws-default-container-create.json")
        event["body"] = json.dumps(frame)
        assert default(event, context) == {"statusCode": 200}

    def run_turns() -> None:
        received = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )["Messages"]
        event = lambda_sqs_event(received, queue_arn)
        SqsModel.model_validate(event)  # the shape Lambda delivers
        assert worker(event, context) == {"batchItemFailures": []}
        for m in received:  # what the event source mapping does with records not reported failed
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])

    def received() -> list[dict[str, Any]]:  # the client's view: every post so far
        return [json.loads(payload) for _, payload in posts]

    # The upgrade, as API Gateway runs it: the authorizer with the client's ?token=, then $connect
    # with the context it answered (the local side registers the same tenant).
    security = aws_security(Settings(), SystemClock())
    _, token = run_sync(security.auth.keys.create("default", ["client"]))
    upgrade = load_event("apigw-ws-authorizer.json")
    upgrade["queryStringParameters"] = {"token": token}
    allowed = authorizer(upgrade, context)
    assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    connect_event = load_event("apigw-ws-connect.json")
    connect_event["requestContext"]["authorizer"] = {
        **allowed["context"],
        "principalId": allowed["principalId"],
    }
    assert connect(connect_event, context) == {"statusCode": 200}
    Conversation(send, run_turns, received).play()
    assert disconnect(load_event("apigw-ws-disconnect.json"), context) == {"statusCode": 200}
    assert {conn for conn, _ in posts} == {CONNECTION}
    return received(), posts


# -- comparison ---------------------------------------------------------------------------------

# Ids are <kind>_<base36 time>_<suffix> (scripted ones msg_scripted_<n>); event types such as
# agent_registered have no second part.
_ID = re.compile(r"\b(img|sess|agent|msg|turn|conn)_[0-9a-z]+_[0-9a-z]+\b")
_TIME_KEYS = {"timestamp", "createdAt", "updatedAt", "savedAt", "registeredAt", "connectedAt"}


def _normalised(frames: list[dict[str, Any]]) -> list[Any]:
    """Ids become ``<kind#n>`` by first appearance (so references still have to match), times ``<t>``."""
    names: dict[str, str] = {}

    def id_name(match: re.Match[str]) -> str:
        kind = match.group(1)
        return names.setdefault(
            match.group(0), f"<{kind}#{sum(v.startswith(f'<{kind}#') for v in names.values())}>"
        )

    def walk(value: Any, key: str | None = None) -> Any:
        if key in _TIME_KEYS and isinstance(value, int):
            return "<t>"
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            return _ID.sub(id_name, value)
        return value

    return [walk(f) for f in frames]


def test_aws_host_sends_the_client_what_the_local_host_sends(aws, tmp_path, load_event, context):
    local = _local_stream(tmp_path)
    remote, posts = _aws_stream(aws, load_event, context)

    types = [f["type"] for f in remote]
    assert types.count("conversation_end") == 3 and types[-1] == "image_get_response"
    assert types.count("tool_result") == 1 and types.count("message_stop") == 4
    assert _normalised(remote) == _normalised(local)

    # Every frame really went through the management API: moto holds them, concatenated.
    backend = apigatewaymanagementapi_backends["123456789012"]["us-east-1"]
    delivered = backend.connections[CONNECTION.replace("=", "%3D")].data
    assert delivered == "".join(payload for _, payload in posts).encode()


def test_aws_host_persists_what_the_turns_streamed(aws, load_event, context):
    remote, _ = _aws_stream(aws, load_event, context)
    history = next(f for f in remote if f["type"] == "image_messages_response")["data"]["messages"]
    assert [m["subtype"] for m in history] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",  # the tool step's text, before its call, as streamed
        "tool-call",
        "tool-result",
        "assistant",
    ]
    texts = [m["content"][0]["text"] for m in history if m["subtype"] == "assistant"]
    assert texts == [REPLIES[0], REPLIES[1], "Let me compute.", REPLIES[3]]
    assert history[7]["toolResult"]["output"] == {"type": "text", "value": "42"}
    # $disconnect removed the connection from DynamoDB
    from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections

    assert run_sync(DynamoDbConnections(TABLE).get(CONNECTION)) is None
