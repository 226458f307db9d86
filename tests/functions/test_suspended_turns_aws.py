"""Suspended turns through the AWS handlers on moto: each step in its own "Lambda" (a fresh
runtime per invocation), and while a turn waits for approval or a client's result no worker
invocation is running or holding a job."""

from __future__ import annotations

import time

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources
from agentvm.hosts.aws import run_sync
from functions.wait_sweeper import app as wait_sweeper
from tests.functions.aws_host import TABLE, frame
from tests.functions.conftest import CONN, FakeLambdaContext

pytestmark = pytest.mark.aws

CALC = {"type": "builtin", "name": "calculator"}


def _image(host, config: dict) -> dict:
    host.request(CONN, "container_create", containerId="user-alice")
    record = host.request(CONN, "image_create", containerId="user-alice", config={"name": "A", **config})[
        "record"
    ]
    host.send(CONN, {"type": "subscribe", "sessionId": record["sessionId"]})
    return record


def _invoke_worker(host) -> None:
    """One worker invocation, in a runtime of its own (a separate Lambda), for what is queued."""
    host.run_turns(host.worker(host.runtime(tools=ToolSources())))


def _nothing_runs_or_waits(host) -> None:
    """No job queued, none in flight: no worker invocation is running or will be for this turn."""
    attrs = host.sqs.get_queue_attributes(QueueUrl=host.queue_url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


def _events(host, type_: str) -> list[dict]:
    return [f["data"] for f in host.session_events(CONN) if f["type"] == type_]


def test_a_denial_in_another_invocation_is_the_result_the_model_reads(host, model):
    img = _image(host, {"tools": [CALC], "approval": {"tools": ["calculator"]}})
    model.add(Calls(("calculator", {"expression": "6*7"})), "Understood.")
    host.send(CONN, frame("message_send", "req_1", imageId=img["imageId"], content="6 times 7?"))
    _invoke_worker(host)
    [requested] = _events(host, "tool_approval_requested")
    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
    assert host.request(CONN, "tool_approval", approved=False, reason="no", **ids)["status"] == "denied"
    _invoke_worker(host)
    assert model.requests[-1].messages[-1].tool_results[0].content == "Execution denied: no"
    assert [e["reason"] for e in _events(host, "conversation_end")] == ["completed"]
    _nothing_runs_or_waits(host)


def test_an_approval_turn_suspends_between_invocations_and_continues_once(host, model):
    img = _image(host, {"tools": [CALC], "approval": {"tools": ["calculator"]}})
    model.add(Calls(("calculator", {"expression": "6*7"})), "It is 42.")
    host.send(CONN, frame("message_send", "req_1", imageId=img["imageId"], content="6 times 7?"))
    _invoke_worker(host)

    [requested] = _events(host, "tool_approval_requested")
    store = DynamoDbStore(TABLE)
    assert run_sync(store.get_turn(requested["turnId"])).status == "suspended"
    _nothing_runs_or_waits(host)  # the worker returned: nothing bills while the person decides
    listed = host.request(CONN, "tool_waits", containerId="user-alice")["waits"]
    assert [w["status"] for w in listed] == ["pending"]

    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
    assert host.request(CONN, "tool_approval", approved=True, **ids)["status"] == "approved"
    again = host.request(CONN, "tool_approval", approved=False, **ids)
    assert again["code"] == "already_answered"
    queued = host.receive()
    assert len(queued) == 1  # exactly one continuation
    host.deliver(queued, host.worker(host.runtime(tools=ToolSources())))

    assert _events(host, "tool_result")[0]["result"] == "42"
    assert [e["reason"] for e in _events(host, "conversation_end")] == ["completed"]
    assert run_sync(store.get_turn(requested["turnId"])).status == "completed"
    assert host.request(CONN, "tool_waits")["waits"] == []
    assert len(model.requests) == 2
    _nothing_runs_or_waits(host)


def test_a_client_tool_result_continues_the_turn_in_a_new_invocation(host, model):
    pick = {"type": "client", "name": "pick_file", "description": "Pick a file"}
    img = _image(host, {"tools": [pick]})
    model.add(Calls(("pick_file", {})), "Got it.")
    host.send(CONN, frame("message_send", "req_1", imageId=img["imageId"], content="pick one"))
    _invoke_worker(host)
    [requested] = _events(host, "client_tool_requested")
    _nothing_runs_or_waits(host)

    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
    bad = host.request(CONN, "tool_result", output="x" * 150_000, **ids)
    assert bad["code"] == "bad_request"
    assert host.request(CONN, "tool_result", output="notes.txt", **ids)["status"] == "answered"
    _invoke_worker(host)
    assert model.requests[-1].messages[-1].tool_results[0].content == "notes.txt"
    assert [e["reason"] for e in _events(host, "conversation_end")] == ["completed"]


def test_the_sweeper_function_times_out_an_unanswered_wait(host, model):
    img = _image(host, {"tools": [CALC], "approval": {"tools": "*", "timeoutS": 0.05}})
    model.add(Calls(("calculator", {"expression": "1+1"})), "Nobody approved.")
    host.send(CONN, frame("message_send", "req_1", imageId=img["imageId"], content="add"))
    _invoke_worker(host)
    time.sleep(0.1)

    sweeper = wait_sweeper.build_handler(host.runtime())
    assert sweeper({"source": "agentvm.wait-sweeper"}, FakeLambdaContext()) == {"waits": 1, "usageHours": 0}
    assert sweeper({"source": "agentvm.wait-sweeper"}, FakeLambdaContext()) == {"waits": 0, "usageHours": 0}
    _invoke_worker(host)
    [failed] = _events(host, "tool_failed")
    assert "no approval within" in failed["error"]
    assert [e["reason"] for e in _events(host, "conversation_end")] == ["completed"]
    _nothing_runs_or_waits(host)


def test_interrupting_a_suspended_turn_ends_it_in_the_next_invocation(host, model):
    img = _image(host, {"tools": [CALC], "approval": {"tools": "*"}})
    model.add(Calls(("calculator", {"expression": "1+1"})))
    host.send(CONN, frame("message_send", "req_1", imageId=img["imageId"], content="add"))
    _invoke_worker(host)
    host.request(CONN, "agent_interrupt", imageId=img["imageId"])
    _invoke_worker(host)
    assert [e["reason"] for e in _events(host, "conversation_end")] == ["interrupted"]
    assert len(model.requests) == 1
