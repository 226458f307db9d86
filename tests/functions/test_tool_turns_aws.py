"""Tool turns through the AWS handlers on moto: a worker that dies after a tool ran (the Lambda
invocation ends before the next model call) is redelivered by SQS, and the redelivery finishes the
turn without running the tool again."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import Calls
from agentvm.hosts.aws import run_sync
from tests.functions.aws_host import TABLE, frame
from tests.functions.conftest import CONN, FakeLambdaContext
from tests.tools import FakeTool, FixedToolSources

pytestmark = pytest.mark.aws


def _image(host) -> dict:
    host.request(CONN, "container_create", containerId="user-alice")
    config = {"name": "Weather", "tools": [{"type": "builtin", "name": "calculator"}]}
    record = host.request(CONN, "image_create", containerId="user-alice", config=config)["record"]
    host.send(CONN, {"type": "subscribe", "sessionId": record["sessionId"]})
    return record


def test_a_worker_dying_after_a_tool_ran_is_redelivered_and_the_tool_is_not_run_twice(host, model):
    tool = FakeTool("get_weather")
    worker = host.worker(host.runtime(tools=FixedToolSources(tool)))
    img = _image(host)
    # The second model call ends the invocation (as a Lambda timeout would), after the tool ran.
    model.add(Calls(("get_weather", {"city": "Paris"})), asyncio.CancelledError(), "Sunny in Paris.")
    host.send(CONN, frame("message_send", "req_1", imageId=img["imageId"], content="Weather?"))

    messages = host.receive()
    with pytest.raises(asyncio.CancelledError):
        worker(host.sqs_event(messages), FakeLambdaContext())
    assert len(tool.calls) == 1

    host.run_turns(worker)  # SQS hands the unacknowledged record to a worker again

    assert len(tool.calls) == 1 and len(model.requests) == 3
    store = DynamoDbStore(TABLE)
    history = run_sync(store.list_messages(img["sessionId"]))
    assert [m.subtype for m in history] == ["user", "tool-call", "tool-result", "assistant"]
    assert history[-1].content[0].text == "Sunny in Paris."
    usage = run_sync(store.list_usage("default"))
    assert sorted(u.kind for u in usage) == ["step", "turn"]  # each model call billed once
    turn = run_sync(store.get_turn(usage[0].turnId.split(":")[0]))
    assert turn.status == "completed"
    types = [f["type"] for f in host.session_events(CONN)]
    assert types[-1] == "conversation_end"
    assert _ends(host.session_events(CONN))[-1:] == ["completed"] and set(
        _ends(host.session_events(CONN))[:-1]
    ) <= {"interrupted"}
    assert host.receive() == []


def _ends(events: list[dict]) -> list[str]:
    """The reasons of the turn's ``conversation_end`` frames, in order."""
    return [e["data"]["reason"] for e in events if e["type"] == "conversation_end"]
