"""The SDK and ``avm chat`` against the AWS host: the real ``ws_default`` and ``turn_worker``
handlers on moto behind a loopback WebSocket (``ws_bridge``), with the echo model. The same
client code as against ``avm serve``: only the URL differs."""

from __future__ import annotations

import asyncio
import json

import pytest
from moto import mock_aws

from agentvm.adapters.llm.echo import EchoModelClient
from agentvm.adapters.llm.scripted import SingleModelResolver
from agentvm.client import (
    AgentVMClient,
    AssistantMessage,
    TextDeltaEvent,
    ToolApprovalRequestedEvent,
    ToolCompletedEvent,
    UserMessage,
)
from tests.functions.aws_host import aws_host
from tests.functions.ws_bridge import ws_bridge
from tests.integration.avm_process import base_env
from tests.integration.test_chat import Terminal

pytestmark = pytest.mark.aws

CALC = {"type": "builtin", "name": "calculator"}
LONG = " ".join(f"word{i}" for i in range(60))


@pytest.fixture
def bridge(monkeypatch):
    with mock_aws():
        host = next(aws_host(SingleModelResolver(EchoModelClient(delay_ms=25))))
        with ws_bridge(host, monkeypatch) as bridge:
            yield bridge


async def test_a_typed_turn_with_an_approval_and_an_interrupt_on_the_aws_host(bridge):
    async with AgentVMClient.connect(bridge.url) as client:
        image = await client.create_image("user-alice", tools=[CALC], approval={"tools": ["calculator"]})
        hello = await client.send(image.imageId, "Hello!")
        turn = client.send(image.imageId, '/tool calculator {"expression": "6*7"}')
        async for event in turn:
            if isinstance(event, ToolApprovalRequestedEvent):
                await turn.approve(event)
        long = client.send(image.imageId, LONG)
        async for event in long:
            if isinstance(event, TextDeltaEvent) and len(long.text) > 20:
                await long.interrupt()
        history = await client.history(image.imageId)

    assert (hello.text, hello.end_reason) == ("Echo: Hello!", "completed")
    assert any(isinstance(e, ToolCompletedEvent) for e in turn.events)
    assert turn.text == "Echo: calculator returned: 42"
    assert long.end_reason == "interrupted" and 20 < len(long.text) < len("Echo: " + LONG)
    assert [type(m) for m in history[:2]] == [UserMessage, AssistantMessage]
    assert history[-1].content[0].text == long.text


async def test_sockets_closed_by_the_gateway_mid_turn_are_reopened_and_resumed(bridge):
    async with AgentVMClient.connect(bridge.url) as client:
        image = await client.create_image("user-alice")
        turn = client.send(image.imageId, LONG)
        closed = False
        async for event in turn:
            if isinstance(event, TextDeltaEvent) and not closed and len(turn.text) > 40:
                closed = True
                for ws in list(bridge.sockets.values()):  # what API Gateway does at its idle timeout
                    asyncio.run_coroutine_threadsafe(ws.close(1001, "Going away"), bridge.loop)
        reconnects = client.reconnects

    assert reconnects == 1
    assert turn.text == "Echo: " + LONG and turn.end_reason == "completed"
    seqs = [e.seq for e in turn.events]
    assert seqs == sorted(set(seqs))


async def test_a_batched_client_gets_the_same_turn_in_fewer_posts_on_the_aws_host(bridge):
    seen: dict[bool, tuple[list[str], int]] = {}
    for batch in (True, False):
        async with AgentVMClient.connect(bridge.url, batch=batch) as client:
            image = await client.create_image(f"user-{batch}")
            (conn,) = bridge.sockets  # the bridge's id of this client's connection
            before = sum(1 for c, _ in bridge.host.posts if c == conn)
            turn = await client.send(image.imageId, LONG)
            posts = [p for c, p in bridge.host.posts if c == conn][before:]
            seen[batch] = ([type(e).__name__ for e in turn.events], len(posts))
            assert turn.text == "Echo: " + LONG
            if batch:
                assert any(isinstance(p, list) for p in posts)  # arrays of frames (one post each)
            else:
                assert all(isinstance(p, dict) for p in posts)

    kinds = {batch: [t for t in types if t != "TextDeltaEvent"] for batch, (types, _) in seen.items()}
    assert kinds[True] == kinds[False]
    assert seen[True][1] * 2 < seen[False][1]


def test_avm_chat_against_the_aws_host(bridge):
    config = json.dumps({"tools": [CALC]})
    term = Terminal(["chat", "--url", bridge.url, "--config", config], base_env(NO_COLOR="1"))
    try:
        term.expect(r"\[chat\] container chat, image img_\S+ \(Chat\)")
        term.expect("you> ")  # typed before the prompt, the line's echo lands ahead of it
        term.line("Hello AWS")
        term.expect(
            r"\n\[waiting for the model…\]\r\x1b\[KEcho: Hello AWS\nyou> "
        )  # the waiting line, erased
        term.line('/tool calculator {"expression": "2+3"}')
        term.expect(r"\[tool\] calculator -> 5\n")
        term.expect(r"Echo: calculator returned: 5\nyou> ")
        term.line(LONG)
        term.expect(r"Echo: word0 word1 ")
        term.send("\x03")
        term.expect(r"\[interrupted\]\n")
        term.line("/history")
        term.expect(r"user: Hello AWS\nassistant: Echo: Hello AWS\n")
        term.line("/usage")
        term.expect(r"container usage: give --http-url")
        term.line("/quit")
        assert term.wait() == 0
    finally:
        term.close()


async def _subscribers(session_id: str) -> list[str]:
    from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
    from tests.functions.aws_host import TABLE

    return list(await DynamoDbConnections(TABLE).subscribers(session_id))


async def test_the_sdk_is_subscribed_by_the_aws_gateway_to_what_it_lists_and_gets_the_stream(bridge):
    async with AgentVMClient.connect(bridge.url) as owner:
        image = await owner.create_image("user-alice")
    async with AgentVMClient.connect(bridge.url) as client:
        sent: list[dict] = []
        ws_send = client._ws.send

        async def send(message):
            sent.append(json.loads(message))
            await ws_send(message)

        client._ws.send = send
        listed = await client.request("image_list", containerId="user-alice")
        (conn,) = bridge.sockets  # the bridge's id of this client's connection
        subscribers = await _subscribers(image.sessionId)
        async with AgentVMClient.connect(bridge.url) as sender:
            await sender.send(image.imageId, "from elsewhere")
        text = "".join(
            [f["data"]["text"] async for f in client.turn_events(timeout=30) if f["type"] == "text_delta"]
        )

    assert listed["__subscriptions"] == [image.sessionId] and listed["__subscribed"] is True
    assert subscribers == [conn]  # the DynamoDB subscription item the gateway wrote
    assert [f["type"] for f in sent] == ["image_list_request"]  # no `subscribe` frame
    assert text == "Echo: from elsewhere"


async def test_a_plain_v1_client_on_the_aws_host_gets_subscriptions_listed_and_no_subscription(bridge):
    from websockets.asyncio.client import connect

    async with AgentVMClient.connect(bridge.url) as owner:
        image = await owner.create_image("user-alice")
    request = {
        "type": "image_list_request",
        "data": {"requestId": "r1", "containerId": "user-alice"},
        "timestamp": 0,
    }
    async with connect(bridge.url) as ws:  # no ?frames=batch, no __subscribe: an AgentX client
        await ws.send(json.dumps(request))
        response = json.loads(await ws.recv())

    assert response["type"] == "image_list_response"
    assert set(response["data"]) == {"requestId", "records", "__subscriptions"}
    assert response["data"]["__subscriptions"] == [image.sessionId]
    assert await _subscribers(image.sessionId) == []
