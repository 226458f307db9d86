"""The full AgentX v1 flow against a real ``avm serve`` process, and persistence across a restart."""

from __future__ import annotations

import httpx
import pytest

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, free_port


@pytest.fixture
def port():
    return free_port()


async def test_v1_flow_streams_reply_and_history_survives_restart(tmp_path, port):
    with avm_serve(tmp_path, port) as server:
        url = server.url
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        assert health["status"] == "ok" and health["version"]
        token = server.admin_token()  # the first start prints its admin key once
        async with AgentVMClient.connect(url, token=token) as client:
            created = await client.request("container_create", containerId="user-alice", check=True)
            assert created["containerId"] == "user-alice"
            img = (
                await client.request(
                    "image_create",
                    containerId="user-alice",
                    config={"name": "A", "systemPrompt": "Hi"},
                    check=True,
                )
            )["record"]
            ack = await client.request(
                "message_send", imageId=img["imageId"], content="hello from alice", check=True
            )
            assert ack["imageId"] == img["imageId"] and ack["agentId"]
            events = [e async for e in client.turn_events(timeout=20)]
        agent = [e for e in events if e["source"] == "agent"]
        types = [e["type"] for e in agent]
        assert types[:4] == ["message_start", "conversation_start", "text_delta", "conversation_responding"]
        assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
        for e in agent:
            assert e["context"]["imageId"] == img["imageId"] and e["context"]["sessionId"] == img["sessionId"]
            assert e["context"]["containerId"] == "user-alice" and e["context"]["agentId"] == ack["agentId"]
        reply = "".join(e["data"]["text"] for e in agent if e["type"] == "text_delta")
        assert reply == "Echo: hello from alice"

    with avm_serve(tmp_path, port) as server:
        assert server.printed_tokens() == []  # a restart keeps the key and prints nothing
        async with AgentVMClient.connect(server.url, token=token) as client:
            listed = await client.request("image_list", containerId="user-alice", check=True)
            assert [r["imageId"] for r in listed["records"]] == [img["imageId"]]
            history = await client.request("image_messages", imageId=img["imageId"], check=True)
    assert [(m["role"], m["subtype"]) for m in history["messages"]] == [
        ("user", "user"),
        ("assistant", "assistant"),
    ]
    assert history["messages"][0]["content"] == "hello from alice"
    assert history["messages"][1]["content"] == [{"type": "text", "text": "Echo: hello from alice"}]


async def test_server_answers_malformed_frames_and_keeps_serving(tmp_path, port):
    with avm_serve(tmp_path, port) as server:
        token = server.admin_token()
        async with AgentVMClient.connect(server.url, token=token) as client:
            await client._ws.send("{definitely not json")
            error = await client.events.get()
            assert error["type"] == "system_error" and error["data"]["details"]["code"] == "bad_request"
            await client._ws.send("x" * 300_000)
            error = await client.events.get()
            assert error["data"]["details"]["code"] == "frame_too_large"
            assert (await client.request("container_list"))["containerIds"] == []
