"""Resume against a real ``avm serve``: the SDK loses its WebSocket mid-turn, reconnects, resumes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, base_env, free_port

MESSAGE = " ".join(f"word{i}" for i in range(50))
REPLY = "Echo: " + MESSAGE  # the echo model's reply, one word every AVM_ECHO_DELAY_MS
ENV = {"AVM_ECHO_DELAY_MS": "20", "AVM_FLUSH_MS": "10", "AVM_BATCH_FLUSH_MS": "10"}  # ~1 s, many frames


@pytest.fixture
def port():
    return free_port()


async def _start_turn(client: AgentVMClient) -> dict[str, Any]:
    img = (await client.request("image_create", containerId="u", config={"name": "R"}, check=True))["record"]
    await client.request("message_send", imageId=img["imageId"], content=MESSAGE, check=True)
    return img


async def _until_deltas(client: AgentVMClient, k: int) -> list[dict[str, Any]]:
    """Read events until ``k`` text deltas arrived (what the app saw before the connection broke)."""
    seen: list[dict[str, Any]] = []
    while sum(e["type"] == "text_delta" for e in seen) < k:
        seen.append(await asyncio.wait_for(client.events.get(), 10))
    return seen


def _check_turn(events: list[dict[str, Any]]) -> None:
    turn = [e for e in events if "seq" in e]
    seqs = [e["seq"] for e in turn]
    assert seqs == sorted(set(seqs))  # every frame once, in order
    assert "".join(e["data"]["text"] for e in turn if e["type"] == "text_delta") == REPLY
    assert [e["type"] for e in turn[-3:]] == ["message_stop", "assistant_message", "conversation_end"]
    assert turn[-2]["data"]["content"] == [{"type": "text", "text": REPLY}]


async def test_sdk_resumes_mid_turn_after_its_connection_drops(tmp_path, port):
    with avm_serve(tmp_path, port, env=base_env(**ENV)) as server:
        token = server.admin_token()
        async with AgentVMClient.connect(server.url, token=token) as first:
            img = await _start_turn(first)
            before = await _until_deltas(first, 3)
        # the socket is closed: the turn goes on without this client
        async with AgentVMClient.connect(server.url, token=token, resume_from=first) as second:
            await second.resume()
            after = [e async for e in second.turn_events(timeout=20)]
            history = await second.request("image_messages", imageId=img["imageId"], check=True)
    assert history["messages"][-1]["content"] == [{"type": "text", "text": REPLY}]
    _check_turn(before + after)
    assert sum(e["type"] == "text_delta" for e in after) > 1  # resumed while it streamed: live deltas
    first_frame = next(e for e in before if "seq" in e)
    assert (first_frame["type"], first_frame["seq"]) == ("message_persisted", 100_001)


async def test_sdk_resumes_after_the_turn_ended_while_it_was_away(tmp_path, port):
    with avm_serve(tmp_path, port, env=base_env(**ENV)) as server:
        token = server.admin_token()
        async with AgentVMClient.connect(server.url, token=token) as first:
            img = await _start_turn(first)
            before = await _until_deltas(first, 2)
        async with AgentVMClient.connect(server.url, token=token) as watcher:
            for _ in range(200):  # until the reply is stored: the turn is over
                history = await watcher.request("image_messages", imageId=img["imageId"], check=True)
                if len(history["messages"]) == 2:
                    break
                await asyncio.sleep(0.05)
        async with AgentVMClient.connect(server.url, token=token, resume_from=first) as second:
            await second.resume()
            after = [e async for e in second.turn_events(timeout=20)]
    _check_turn(before + after)
    replayed = [e for e in after if "seq" in e and e["seq"] > before[-1]["seq"]]
    assert [e["type"] for e in replayed] == [
        "text_delta",
        "message_stop",
        "assistant_message",
        "conversation_end",
    ]
