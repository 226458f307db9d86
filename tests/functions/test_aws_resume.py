"""Resumable streams on the AWS host: the Lambda handlers with DynamoDB, SQS FIFO and API Gateway on moto.

As in ``test_aws_parity``: each function gets the runtime ``aws_runtime`` builds (PynamoDB, boto3),
fed API-Gateway-shaped events; turn jobs are received from the moto queue and handed to the worker
as the SQS event Lambda builds. Authentication, budgets and rate limits are switched off here (they
have their own tests): connections are registered by ``$connect`` with the tenant an authorizer
would have put in the event.

A client "loses its connection" by its posts answering 410 from then on (what API Gateway answers
for a closed socket, and what makes the fanout prune it). A resume in the middle of a turn happens
while the worker runs: its ``subscribe`` frame goes through the gateway as ``$default`` would run
it, concurrently, on the same event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.client import SessionCursors
from agentvm.config import Settings
from agentvm.errors import ConnectionGone
from agentvm.gateway.dispatch import handle_frame
from agentvm.hosts.aws import aws_runtime, run_sync
from agentvm.runtime import TurnSettings
from agentvm.streaming.frames import TURN_SPAN, last_seq
from functions.turn_worker import app as turn_worker
from functions.ws_connect import app as ws_connect
from functions.ws_default import app as ws_default
from functions.ws_disconnect import app as ws_disconnect
from tests.functions.aws_stack import TABLE, Resources, lambda_sqs_event, moto_resources
from tests.functions.aws_stack import frame as _frame

if TYPE_CHECKING:
    from agentvm.records import TurnRecord
    from agentvm.runtime import Runtime

pytestmark = pytest.mark.aws

WORDS = " ".join(f"w{i}" for i in range(40))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    with moto_resources(monkeypatch) as resources:
        yield resources


class Push:
    """A function's real ``ApiGatewayPush`` (moto), recording each delivered frame per connection.
    Posts to a ``dropped`` connection answer 410; ``hooks`` run after every delivered frame."""

    def __init__(self, inner: Any, host: AwsHost) -> None:
        self.inner = inner
        self.host = host

    async def send(self, connection_id: str, payload: str) -> None:
        if connection_id in self.host.dropped:
            raise ConnectionGone(f"{connection_id} is closed")
        await self.inner.send(connection_id, payload)
        frame = json.loads(payload)
        self.host.received[connection_id].append(frame)
        for hook in list(self.host.hooks):
            hook(connection_id, frame)


class AwsHost:
    def __init__(self, aws: Resources, load_event: Any, context: Any, turns: TurnSettings) -> None:
        self.sqs, self.queue_url, self.queue_arn = aws.sqs, aws.queue_url, aws.queue_arn
        self.load_event = load_event
        self.context = context
        self.model = ScriptedModelClient()
        self.received: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.dropped: set[str] = set()
        self.hooks: list[Any] = []
        self.requests = 0
        self.runtimes: dict[str, Runtime] = {}
        self.handlers = {
            name: self._handler(name, app, turns)
            for name, app in (
                ("connect", ws_connect),
                ("default", ws_default),
                ("worker", turn_worker),
                ("disconnect", ws_disconnect),
            )
        }
        self.store = DynamoDbStore(TABLE)

    def _handler(self, name: str, app: Any, turns: TurnSettings) -> Any:
        rt = aws_runtime(Settings(), require=app.REQUIRED_SETTINGS)  # one per function, as on Lambda
        rt = dataclasses.replace(
            rt,
            models=SingleModelResolver(self.model),
            turns=turns,
            push=Push(rt.push, self),
            auth=None,
            budgets=None,
            rate_limiter=None,
        )
        self.runtimes[name] = rt
        return app.build_handler(rt)

    def connect(self, connection_id: str, tenant: str = "tenant-a") -> str:
        event = self.load_event("apigw-ws-connect.json")
        event["requestContext"]["connectionId"] = connection_id
        event["requestContext"]["authorizer"] = {"tenantId": tenant}
        assert self.handlers["connect"](event, self.context) == {"statusCode": 200}
        return connection_id

    def disconnect(self, connection_id: str) -> None:
        event = self.load_event("apigw-ws-disconnect.json")
        event["requestContext"]["connectionId"] = connection_id
        assert self.handlers["disconnect"](event, self.context) == {"statusCode": 200}

    def send(self, connection_id: str, frame: dict[str, Any]) -> list[dict[str, Any]]:
        """One frame through ``$default``; returns what the caller was posted meanwhile."""
        before = len(self.received[connection_id])
        event = self.load_event("apigw-ws-default-container-create.json")
        event["requestContext"]["connectionId"] = connection_id
        event["body"] = json.dumps(frame)
        assert self.handlers["default"](event, self.context) == {"statusCode": 200}
        return self.received[connection_id][before:]

    def request(self, connection_id: str, type_: str, **data: Any) -> dict[str, Any]:
        self.requests += 1
        replies = self.send(connection_id, _frame(type_, f"req_{self.requests}", **data))
        return next(f for f in replies if f["type"] == f"{type_}_response")["data"]

    async def subscribe_now(self, connection_id: str, session_id: str, after_seq: int) -> None:
        """A ``subscribe`` frame handled by ``$default`` while the worker runs (another Lambda)."""
        frame = {"type": "subscribe", "sessionId": session_id, "afterSeq": after_seq}
        rt = self.runtimes["default"]
        for payload in await handle_frame(rt, connection_id, json.dumps(frame)):
            await rt.push.send(connection_id, payload)

    def run_turns(self) -> None:
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                return
            event = lambda_sqs_event(messages, self.queue_arn)
            assert self.handlers["worker"](event, self.context) == {"batchItemFailures": []}
            for m in messages:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])

    def turn_frames(self, connection_id: str) -> list[dict[str, Any]]:
        return [f for f in self.received[connection_id] if "seq" in f]

    def reply(self, session_id: str, n: int = -1) -> str:
        history = run_sync(self.store.list_messages(session_id))
        return [m.content[0].text for m in history if m.subtype == "assistant"][n]

    def turn(self, turn_id: str) -> TurnRecord:
        turn = run_sync(self.store.get_turn(turn_id))
        assert turn is not None and turn.frames is not None
        return turn


def _host(aws, load_event, context, **turns: Any) -> AwsHost:
    return AwsHost(aws, load_event, context, TurnSettings(**{"flush_s": 0.005, **turns}))


def _session(host: AwsHost, conn: str) -> dict[str, Any]:
    image = host.request(conn, "image_create", containerId="user-alice", config={"name": "R"})["record"]
    host.send(conn, {"type": "subscribe", "sessionId": image["sessionId"]})
    return image


def _text(frames: list[dict[str, Any]]) -> str:
    return "".join(f["data"]["text"] for f in frames if f["type"] == "text_delta")


def _drop_after(host: AwsHost, conn: str, deltas: int, then: Any = None) -> list[int]:
    """``conn``'s socket closes once it received ``deltas`` text deltas; returns [its last seq]."""
    cursor: list[int] = []

    def hook(connection_id: str, frame: dict[str, Any]) -> None:
        if connection_id != conn or cursor:
            return
        if sum(f["type"] == "text_delta" for f in host.received[conn]) >= deltas:
            host.dropped.add(conn)
            cursor.append(frame["seq"])
            if then is not None:
                then(cursor[0])

    host.hooks.append(hook)
    return cursor


def _check(host: AwsHost, before: list[dict[str, Any]], after: list[dict[str, Any]], reply: str) -> None:
    seqs = [f["seq"] for f in before + after]
    assert seqs == sorted(set(seqs))  # nothing twice, in order
    assert _text(before) + _text(after) == reply  # nothing missing
    assert [f["type"] for f in after[-3:]] == ["message_stop", "assistant_message", "conversation_end"]
    assert seqs[-1] == last_seq(host.turn(after[-1]["context"]["turnId"]).frames)


@pytest.mark.parametrize("refresh_s", [0.02, 2.0], ids=["worker-refresh", "pre-terminal-refresh"])
def test_a_client_that_reconnects_mid_turn_gets_the_exact_reply(aws, load_event, context, refresh_s):
    host = _host(aws, load_event, context, subscriber_refresh_s=refresh_s)
    a, b = host.connect("conn-A="), host.connect("conn-B=")
    image = _session(host, a)
    host.model.add(WORDS)
    host.model.word_delay_s = 0.01
    resumed: list[asyncio.Task[None]] = []

    def reconnect(cursor: int) -> None:  # B is the same client's new socket
        async def later() -> None:
            await asyncio.sleep(0.03)  # the turn goes on: frames this client misses
            await host.subscribe_now(b, image["sessionId"], cursor)

        resumed.append(asyncio.get_running_loop().create_task(later()))

    cursor = _drop_after(host, a, 3, then=reconnect)
    host.request(a, "message_send", imageId=image["imageId"], content="go")
    host.run_turns()
    run_sync(resumed[0])
    host.disconnect(a)  # $disconnect arrives late (best-effort)

    before = [f for f in host.turn_frames(a) if f["seq"] <= cursor[0]]
    after = host.turn_frames(b)
    assert after[0]["seq"] == cursor[0] + 1 and _text(after)  # resumed while it streamed
    _check(host, before, after, host.reply(image["sessionId"]))
    assert host.reply(image["sessionId"]) == WORDS


def test_a_client_that_reconnects_after_the_turn_is_sent_the_rest_from_dynamodb(aws, load_event, context):
    host = _host(aws, load_event, context)
    a, b = host.connect("conn-A="), host.connect("conn-B=")
    image = _session(host, a)
    host.model.add(WORDS)
    host.model.word_delay_s = 0.005
    cursor = _drop_after(host, a, 2)
    host.request(a, "message_send", imageId=image["imageId"], content="go")
    host.run_turns()

    assert host.send(b, {"type": "subscribe", "sessionId": image["sessionId"], "afterSeq": cursor[0]}) != []
    before = [f for f in host.turn_frames(a) if f["seq"] <= cursor[0]]
    after = host.turn_frames(b)
    assert [f["type"] for f in after] == [
        "text_delta",
        "message_stop",
        "assistant_message",
        "conversation_end",
    ]
    _check(host, before, after, WORDS)


def test_resume_from_zero_returns_both_finished_turns_in_order(aws, load_event, context):
    host = _host(aws, load_event, context)
    a, b = host.connect("conn-A="), host.connect("conn-B=")
    image = _session(host, a)
    host.model.add("the first reply", "the second reply")
    for content in ("one", "two"):
        host.request(a, "message_send", imageId=image["imageId"], content=content)
        host.run_turns()

    host.send(b, {"type": "subscribe", "sessionId": image["sessionId"], "afterSeq": 0})
    got = host.turn_frames(b)
    seqs = [f["seq"] for f in got]
    assert seqs == sorted(set(seqs)) and seqs[0] == TURN_SPAN + 1
    turns = list(dict.fromkeys(f["context"]["turnId"] for f in got))
    assert [_text([f for f in got if f["context"]["turnId"] == t]) for t in turns] == [
        "the first reply",
        "the second reply",
    ]
    assert [f["data"]["content"][0]["text"] for f in got if f["type"] == "assistant_message"] == [
        "the first reply",
        "the second reply",
    ]
    # the live subscriber saw the same frames (text merged on replay), with the same seqs
    live = {f["seq"]: f["type"] for f in host.turn_frames(a)}
    assert all(live[f["seq"]] == f["type"] for f in got)


def test_a_cursor_from_the_future_returns_nothing(aws, load_event, context):
    host = _host(aws, load_event, context)
    a, b = host.connect("conn-A="), host.connect("conn-B=")
    image = _session(host, a)
    host.model.add("done")
    host.request(a, "message_send", imageId=image["imageId"], content="one")
    host.run_turns()

    assert host.send(b, {"type": "subscribe", "sessionId": image["sessionId"], "afterSeq": 10**12}) == []
    host.model.add("later turns still stream")
    host.request(a, "message_send", imageId=image["imageId"], content="two")
    host.run_turns()
    assert _text(host.turn_frames(b)) == "later turns still stream"


def test_a_cursor_for_another_tenants_session_is_refused_like_any_subscribe(aws, load_event, context):
    host = _host(aws, load_event, context)
    a = host.connect("conn-A=")
    intruder = host.connect("conn-X=", tenant="tenant-b")
    image = _session(host, a)
    host.model.add("private words")
    host.request(a, "message_send", imageId=image["imageId"], content="secret")
    host.run_turns()

    with_cursor = host.send(intruder, {"type": "subscribe", "sessionId": image["sessionId"], "afterSeq": 0})
    without = host.send(intruder, {"type": "subscribe", "sessionId": image["sessionId"]})
    strip = [{k: v for k, v in f.items() if k != "timestamp"} for f in with_cursor]
    assert strip == [{k: v for k, v in f.items() if k != "timestamp"} for f in without]
    assert [f["data"]["details"]["code"] for f in with_cursor] == ["not_found"]
    assert host.turn_frames(intruder) == [] and "private" not in json.dumps(host.received[intruder])


def test_the_sdk_view_of_a_resume_racing_the_end_of_a_turn(aws, load_event, context):
    """Resubscribe the moment the worker writes the turn's end: on both sides of the write, the
    client ends with every frame once (after dropping seqs it has seen, as the SDK does)."""
    host = _host(aws, load_event, context, subscriber_refresh_s=2.0)
    a, b = host.connect("conn-A="), host.connect("conn-B=")
    image = _session(host, a)
    host.model.add(WORDS)
    host.model.word_delay_s = 0.005
    cursor = _drop_after(host, a, 2)
    worker = host.runtimes["worker"]
    original = worker.store.put_turn
    tasks: list[asyncio.Task[None]] = []

    async def put_turn(turn: TurnRecord) -> None:
        if turn.frames is not None and not tasks:
            tasks.append(asyncio.create_task(host.subscribe_now(b, image["sessionId"], cursor[0])))
            await asyncio.sleep(0.05)  # the subscribe's first look runs while the turn is not ended
        await original(turn)

    worker.store.put_turn = put_turn  # type: ignore[method-assign]
    host.request(a, "message_send", imageId=image["imageId"], content="go")
    host.run_turns()
    run_sync(tasks[0])

    cursors = SessionCursors()
    before = [f for f in host.turn_frames(a) if f["seq"] <= cursor[0] and cursors.accept(f)]
    after = [f for f in host.turn_frames(b) if cursors.accept(f)]
    _check(host, before, after, WORDS)


def test_resume_costs_no_write_on_the_turn_and_the_turn_item_stays_under_a_kilobyte(aws, load_event, context):
    host = _host(aws, load_event, context, flush_s=0.25)
    a = host.connect("conn-A=")
    image = _session(host, a)
    # the standard turn's stream: ~200 tokens at ~35 tokens/s, coalesced every 250 ms
    host.model.add(" ".join(["token"] * 200))
    host.model.word_delay_s = 1 / 35
    host.request(a, "message_send", imageId=image["imageId"], content="standard")
    host.run_turns()

    frames = host.turn_frames(a)
    turn_id = frames[0]["context"]["turnId"]
    item = boto3.client("dynamodb").get_item(
        TableName=TABLE, Key={"pk": {"S": f"TURN#{turn_id}"}, "sk": {"S": "META"}}
    )["Item"]
    size = sum(len(name.encode()) + len(next(iter(v.values())).encode()) for name, v in item.items())
    assert 20 <= len(frames) <= 40  # ~6 s of text in 250 ms windows, and the turn's other frames
    assert size < 1024  # one write unit, as the status write without the frame map
    assert len(host.turn(turn_id).frames.kinds) == len(frames)
