"""Subscriptions on the AWS host (moto), through the real ``$default`` and worker handlers: the
sender's ``message_send`` writes nothing over the subscription its client's ``subscribe`` made, and
a worker whose index lookup misses that subscription at first still sends the sender its turn from
the first frame (what the cursor 0 that ``message_send`` used to write did)."""

from __future__ import annotations

from typing import Any

import pytest
from moto import mock_aws

from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from tests.functions.aws_host import TABLE, aws_host

pytestmark = pytest.mark.aws

CONN = "conn-alice"
REPLY = "one two three four five six seven eight"


class LaggingIndex:
    """The worker's connections; the subscriber lookup's first answers miss every subscriber (the
    index has not caught up with a subscription made a moment ago)."""

    def __init__(self, inner: DynamoDbConnections, misses: int) -> None:
        self.inner = inner
        self.misses = misses

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def subscriptions(self, session_id: str) -> list[Any]:
        if self.misses > 0:
            self.misses -= 1
            return []
        return list(await self.inner.subscriptions(session_id))


def _subscription_writes(calls: list[str]) -> object:
    events = DynamoDbStore(TABLE)._m.base._get_connection().connection.client.meta.events

    def record(params: dict, model: Any, **_: Any) -> None:
        if model.name in ("UpdateItem", "PutItem") and params.get("Key", params.get("Item", {})).get(
            "sk", {}
        ).get("S", "").startswith("SUB#"):
            calls.append(model.name)

    events.register("before-parameter-build.dynamodb", record)
    return lambda: events.unregister("before-parameter-build.dynamodb", record)


def test_message_send_writes_nothing_over_the_clients_subscription_and_a_late_found_sender_gets_its_turn():
    model = ScriptedModelClient([REPLY, REPLY], word_delay_s=0.01)
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        host.connect(CONN)
        calls: list[str] = []
        unregister = _subscription_writes(calls)
        img = host.image(CONN)  # the client's subscribe: the one subscription write
        for _ in range(2):
            host.request(CONN, "message_send", imageId=img["imageId"], content="hi")
            # the worker's first subscriber lookups find nobody (the index lags); it looks again
            worker = host.worker(host.runtime(connections=LaggingIndex(DynamoDbConnections(TABLE), misses=1)))
            host.run_turns(worker)
        unregister()

        assert calls == ["UpdateItem"]
        events = host.session_events(CONN)
        types = [e["type"] for e in events]
        assert types.count("message_start") == 2 and types[0] == "message_start"
        assert [e["data"]["reason"] for e in events if e["type"] == "conversation_end"] == ["completed"] * 2
        text = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
        assert text == REPLY + REPLY  # each turn from its first frame
