"""AgentX v2 (JSON-RPC 2.0) on the AWS host (moto): the real ``ws_default`` and ``turn_worker``
handlers over DynamoDB connections, the SQS FIFO queue and API Gateway posts. Each frame goes to a
freshly built ``$default`` handler and the worker is another one, so nothing is shared in memory:
a connection's protocol, and each subscriber's, come from DynamoDB (the connection's record and
its subscriptions), and ``message.send`` is answered by the worker when the turn ends."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from typing import Any

import pytest
from moto import mock_aws

from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.hosts.aws import run_sync
from agentvm.ports import PROTOCOL_V2
from functions.turn_worker import app as turn_worker
from tests.functions.aws_host import TABLE, AwsHost, aws_host
from tests.v2_client import rpc

pytestmark = pytest.mark.aws

A, B, V1 = "conn-v2-alice", "conn-v2-bob", "conn-v1-carol"
_ids = itertools.count(1)


@pytest.fixture
def model() -> ScriptedModelClient:
    return ScriptedModelClient()


@pytest.fixture
def host(model):
    with mock_aws():
        yield next(aws_host(SingleModelResolver(model)))


def _messages(host: AwsHost, conn: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c, payload in host.posts:
        if c == conn:
            out += payload if isinstance(payload, list) else [payload]
    return out


def _answers(host: AwsHost, conn: str, rpc_id: Any) -> list[dict[str, Any]]:
    return [m for m in _messages(host, conn) if "method" not in m and m.get("id") == rpc_id]


def _events(host: AwsHost, conn: str) -> list[dict[str, Any]]:
    return [m["params"]["event"] for m in _messages(host, conn) if m.get("method") == "stream.event"]


def _turn(host: AwsHost, conn: str) -> list[dict[str, Any]]:
    return [e for e in _events(host, conn) if "seq" in e]


def call_raw(host: AwsHost, conn: str, method: str, **params: Any) -> dict[str, Any]:
    msg = rpc(method, params, id=f"aws{next(_ids)}")
    host.send(conn, msg)
    (answer,) = _answers(host, conn, msg["id"])
    return answer


def call(host: AwsHost, conn: str, method: str, **params: Any) -> dict[str, Any]:
    answer = call_raw(host, conn, method, **params)
    assert "error" not in answer, answer
    return answer["result"]


def test_a_v2_turn_streams_2x_events_and_the_worker_answers_message_send(host, model):
    host.connect(A)
    record = (call(host, A, "runtime.image.create", name="Helper"))["record"]
    assert record["containerId"] == "default"
    # a v1 client follows the same session: each subscriber gets the turn in its own protocol
    host.connect(V1)
    host.send(V1, {"type": "subscribe", "sessionId": record["sessionId"]})
    model.add("Hello from the cloud")
    send = rpc("runtime.message.send", {"imageId": record["imageId"], "content": "Hi"}, id="send-1")
    host.send(A, send)
    assert _answers(host, A, "send-1") == []  # ws_default does not wait for the turn
    host.run_turns()
    turn = _turn(host, A)
    types = [e["type"] for e in turn]
    assert types[0] == "turn_request" and types[-2:] == ["conversation_end", "turn_response"]
    assert "message_persisted" not in types
    assert "".join(e["data"]["text"] for e in turn if e["type"] == "text_delta") == "Hello from the cloud"
    (answer,) = _answers(host, A, "send-1")
    assert answer["result"]["status"] == "completed" and answer["result"]["imageId"] == record["imageId"]
    assert _messages(host, A).index(answer) > _messages(host, A).index(
        next(
            m
            for m in _messages(host, A)
            if m.get("params", {}).get("event", {}).get("type") == "turn_response"
        )
    )
    v1_types = [f["type"] for f in host.frames(V1) if "seq" in f]
    assert v1_types[0] == "message_persisted" and v1_types[-1] == "conversation_end"
    assert [f["seq"] for f in host.frames(V1) if "seq" in f] == sorted({e["seq"] for e in turn})
    history = call(host, A, "image.messages", imageId=record["imageId"])["messages"]
    assert [m["role"] for m in history] == ["user", "assistant"]


def test_the_protocol_of_a_connection_is_remembered_across_invocations(host):
    host.connect(A)
    call(host, A, "container.list")  # its first frame: JSON-RPC
    info = run_sync(DynamoDbConnections(TABLE).get(A))
    assert info is not None and info.protocol == PROTOCOL_V2
    host.send(A, {"type": "container_list_request", "data": {"requestId": "r1"}, "source": "command"})
    (refused,) = [m for m in _messages(host, A) if "error" in m]
    assert refused["id"] is None and refused["error"]["code"] == -32600
    # a v1 connection that subscribed (what v1 clients do) stays v1: its JSON-RPC frame is refused in v1
    host.connect(V1)
    record = host.image(V1)  # container_create, image_create, subscribe
    host.send(V1, rpc("image.get", {"imageId": record["imageId"]}))
    last = host.frames(V1)[-1]
    assert last["type"] == "system_error" and last["data"]["details"]["code"] == "bad_request"
    assert run_sync(DynamoDbConnections(TABLE).get(V1)).protocol is None  # v1 is never written


def test_a_v2_client_interrupts_a_turn_the_worker_streams(host, model, monkeypatch):
    monkeypatch.setattr(turn_worker, "run_sync", lambda coro: asyncio.run(coro))  # a Lambda of its own
    model.word_delay_s = 0.01
    model.add(" ".join(f"w{i}" for i in range(400)))
    host.connect(A)
    record = call(host, A, "image.create", name="Talker")["record"]
    host.send(A, rpc("message.send", {"imageId": record["imageId"], "content": "talk"}, id="long"))
    messages = host.receive()
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(host.deliver(messages, host.worker())))
    thread.start()
    deadline = time.monotonic() + 10
    while sum(1 for e in _events(host, A) if e["type"] == "text_delta") < 3:
        assert time.monotonic() < deadline and thread.is_alive(), "the turn did not stream"
        time.sleep(0.01)
    stopped = call(host, A, "instance.interrupt", imageId=record["imageId"])
    assert stopped["imageId"] == record["imageId"]
    thread.join(10)
    assert result == {"batchItemFailures": []}
    types = [e["type"] for e in _turn(host, A)]
    assert "interrupted" in types and types[-2:] == ["conversation_end", "turn_response"]
    assert _answers(host, A, "long")[0]["result"]["status"] == "interrupted"


def test_resume_on_a_new_connection_replays_the_turn_as_2x_events(host, model):
    host.connect(A)
    record = call(host, A, "image.create", name="Helper")["record"]
    model.add("alpha beta gamma")
    host.send(A, rpc("message.send", {"imageId": record["imageId"], "content": "Hi"}, id="s"))
    host.run_turns()
    live = _turn(host, A)
    host.connect(B, tenant="default")  # the same client, reconnected
    assert call(host, B, "agentvm.subscribe", sessionId=record["sessionId"], lastSeq=live[2]["seq"]) == {
        "sessionId": record["sessionId"]
    }
    replayed = _turn(host, B)
    assert replayed[0]["seq"] == live[2]["seq"]
    assert [e["type"] for e in replayed if e["type"] != "text_delta"] == [
        e["type"] for e in live if e["seq"] >= live[2]["seq"] and e["type"] != "text_delta"
    ]


def _without_id(answer: dict[str, Any], target: str) -> Any:
    """An answer with its JSON-RPC id dropped and the id it was about written ``<ID>``."""
    return json.loads(json.dumps({k: v for k, v in answer.items() if k != "id"}).replace(target, "<ID>"))


def test_tenant_b_gets_over_v2_what_it_gets_for_ids_that_do_not_exist(host, model):
    host.connect(A, tenant="tenant-a")
    record = call(host, A, "image.create", name="Private")["record"]
    host.connect(B, tenant="tenant-b")
    for method, param, own, missing in [
        ("image.get", "imageId", record["imageId"], "img_missing"),
        ("image.messages", "imageId", record["imageId"], "img_missing"),
        ("message.send", "imageId", record["imageId"], "img_missing"),
        ("agentvm.subscribe", "sessionId", record["sessionId"], "sess_missing"),
        ("image.delete", "imageId", record["imageId"], "img_missing"),
    ]:
        extra = {"content": "hijack"} if method == "message.send" else {}
        foreign = call_raw(host, B, method, **extra, **{param: own})
        absent = call_raw(host, B, method, **extra, **{param: missing})
        assert _without_id(foreign, own) == _without_id(absent, missing), method
    assert call(host, B, "image.list") == {"records": []}
    model.add("for A only")
    host.send(A, rpc("message.send", {"imageId": record["imageId"], "content": "Hi"}, id="s"))
    host.run_turns()
    assert _events(host, B) == []
    assert call(host, A, "image.get", imageId=record["imageId"])["record"]["name"] == "Private"


def test_bad_frames_get_json_rpc_errors_through_the_handler(host):
    host.connect(A)
    call(host, A, "container.list")
    host.send(A, "{not json")
    host.send(A, json.dumps(rpc("nope.nothing", {}, id=1)))
    host.send(A, json.dumps(rpc("image.get", {"imageId": 3}, id=2)))
    host.send(A, json.dumps([rpc("container.list", {}, id=3), rpc("container.list", {}, id=None)]))
    host.send(A, json.dumps(rpc("image.create", {"name": "x" * 300_000}, id=4)))
    errors = {m["id"]: m["error"] for m in _messages(host, A) if "error" in m}
    assert errors[None]["code"] == -32700
    assert errors[1]["code"] == -32601 and errors[2]["code"] == -32602
    assert errors[4]["code"] == -32600 and errors[4]["data"]["code"] == "frame_too_large"
    batch = next(p for c, p in host.posts if c == A and isinstance(p, list))
    assert [m["id"] for m in batch] == [3]
