"""Gone clients on the AWS host (moto): API Gateway answers ``GoneException`` (410) for a closed
connection; the worker prunes it from DynamoDB and keeps streaming to the others, and a turn with no
subscriber left still completes and persists. (Local host: ``tests/unit/streaming/test_fanout.py``.)
"""

from __future__ import annotations

import pytest
from moto import mock_aws

from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.hosts.aws import run_sync
from tests.functions.aws_host import TABLE, aws_host

pytestmark = pytest.mark.aws

REPLY = "one two three four five six"
TURN = ["message_start", "conversation_start", "text_delta", "conversation_responding"]
END = ["message_stop", "assistant_message", "conversation_end"]


@pytest.fixture
def model():
    return ScriptedModelClient([REPLY])


@pytest.fixture
def host(model):
    with mock_aws():
        yield next(aws_host(SingleModelResolver(model)))


def _two_subscribers(host) -> dict:
    host.connect("conn-phone")
    host.connect("conn-laptop")
    img = host.image("conn-phone")
    host.send("conn-laptop", {"type": "subscribe", "sessionId": img["sessionId"]})
    host.request("conn-phone", "message_send", imageId=img["imageId"], content="hi")
    return img


def _subscribers(session_id: str) -> list[str]:
    return list(run_sync(DynamoDbConnections(TABLE).subscribers(session_id)))


def test_a_gone_connection_is_pruned_and_the_turn_streams_on_to_the_others(host, model):
    img = _two_subscribers(host)
    assert sorted(_subscribers(img["sessionId"])) == ["conn-laptop", "conn-phone"]
    host.gone_client.gone.add("conn-laptop")  # the laptop closed without a $disconnect

    host.run_turns()

    types = [f["type"] for f in host.session_events("conn-phone")]
    assert types[:4] == TURN and types[-3:] == END
    text = "".join(f["data"]["text"] for f in host.session_events("conn-phone") if f["type"] == "text_delta")
    assert text == REPLY
    assert host.session_events("conn-laptop") == []
    assert run_sync(DynamoDbConnections(TABLE).get("conn-laptop")) is None  # pruned on its first 410
    assert _subscribers(img["sessionId"]) == ["conn-phone"]


def test_a_turn_with_no_subscriber_left_completes_and_persists(host, model):
    img = _two_subscribers(host)
    host.gone_client.gone.update({"conn-phone", "conn-laptop"})

    host.run_turns()  # acknowledged: no record failed

    store = DynamoDbStore(TABLE)
    history = run_sync(store.list_messages(img["sessionId"]))
    assert [m.subtype for m in history] == ["user", "assistant"]
    assert history[1].content[0].text == REPLY
    [usage] = run_sync(store.list_usage("default"))
    assert usage.status == "completed"
    assert run_sync(store.get_turn(usage.turnId)).status == "completed"
    assert _subscribers(img["sessionId"]) == []
    assert run_sync(DynamoDbConnections(TABLE).get("conn-phone")) is None
