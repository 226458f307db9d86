"""Suspended turns across ``avm serve`` restarts: an approval and a client-side tool answered by a
new server process, and a wait whose deadline passed while the server was down timed out at start.
The echo model calls a tool when asked ``/tool <name> <JSON input>``."""

from __future__ import annotations

import time
from typing import Any

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, free_port

CALC = {"type": "builtin", "name": "calculator"}
PICK = {"type": "client", "name": "pick_file", "description": "Ask the user to pick a file"}


async def _until(client: AgentVMClient, kind: str, timeout: float = 20) -> list[dict[str, Any]]:
    """Pushed events up to and including the first of type ``kind``."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not out or out[-1]["type"] != kind:
        async for event in client.turn_events(timeout=max(deadline - time.monotonic(), 0.1)):
            out.append(event)
            if event["type"] == kind:
                break
    return out


async def _suspend(server, config: dict[str, Any], content: str) -> tuple[str, dict[str, Any], str]:
    """Start a turn that suspends; returns (image id, the request event's data, the admin token)."""
    token = server.admin_token()
    async with AgentVMClient.connect(server.url, token=token) as client:
        await client.request("container_create", check=True, containerId="user-alice")
        image = (await client.request("image_create", check=True, containerId="user-alice", config=config))[
            "record"
        ]
        await client.request("message_send", check=True, imageId=image["imageId"], content=content)
        events = await _until(client, "turn_suspended")
    requested = next(e["data"] for e in events if e["type"].endswith("_requested"))
    return image, requested, token


async def _resume(server, token: str, image: dict[str, Any], request: str, **answer: Any) -> list[dict]:
    async with AgentVMClient.connect(server.url, token=token) as client:
        waits = (await client.request("tool_waits", check=True, containerId="user-alice"))["waits"]
        assert [w["status"] for w in waits] == ["pending"]
        await client.subscribe(image["sessionId"])
        reply = await client.request(request, **answer)
        assert "error" not in reply, reply
        again = await client.request(request, **answer)
        assert again["code"] == "already_answered"
        events = await _until(client, "conversation_end")
        assert (await client.request("tool_waits", check=True))["waits"] == []
        return events


async def test_an_approval_given_after_a_restart_continues_the_turn(tmp_path):
    config = {"name": "Calc", "tools": [CALC], "approval": {"tools": ["calculator"]}}
    with avm_serve(tmp_path, free_port()) as server:
        image, requested, token = await _suspend(server, config, '/tool calculator {"expression": "6*7"}')
    with avm_serve(tmp_path, free_port()) as server:
        ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
        events = await _resume(server, token, image, "tool_approval", approved=True, **ids)
    result = next(e["data"] for e in events if e["type"] == "tool_result")
    assert result == {
        "toolCallId": requested["toolCallId"],
        "toolName": "calculator",
        "result": "42",
        "isError": False,
    }
    assert events[-1]["data"]["reason"] == "completed"


async def test_a_client_tool_result_sent_after_a_restart_continues_the_turn(tmp_path):
    config = {"name": "Files", "tools": [PICK]}
    with avm_serve(tmp_path, free_port()) as server:
        image, requested, token = await _suspend(server, config, "/tool pick_file {}")
    with avm_serve(tmp_path, free_port()) as server:
        ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
        events = await _resume(server, token, image, "tool_result", output="report.pdf", **ids)
    text = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
    assert "report.pdf" in text
    assert events[-1]["data"]["reason"] == "completed"


async def test_a_wait_that_expired_while_the_server_was_down_times_out_at_start(tmp_path):
    config = {"name": "Calc", "tools": [CALC], "approval": {"tools": "*", "timeoutS": 1}}
    with avm_serve(tmp_path, free_port()) as server:
        image, requested, token = await _suspend(server, config, '/tool calculator {"expression": "1+1"}')
    time.sleep(1.2)
    with avm_serve(tmp_path, free_port()) as server:
        async with AgentVMClient.connect(server.url, token=token) as client:
            await client.subscribe(image["sessionId"], after_seq=0)
            events = await _until(client, "conversation_end")
            history = await client.request("image_messages", check=True, imageId=image["imageId"])
    failed = next(e["data"] for e in events if e["type"] == "tool_failed")
    assert "no approval within 1 s" in failed["error"]
    assert [m["subtype"] for m in history["messages"]] == ["user", "tool-call", "tool-result", "assistant"]
