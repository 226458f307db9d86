"""A newcomer with no provider key sees a tool turn through `avm serve`, with the raw `request()` API
(the README's typed examples run in test_readme_examples.py)."""

from __future__ import annotations

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, free_port


async def test_the_echo_model_runs_a_builtin_tool_through_avm_serve(tmp_path):
    with avm_serve(tmp_path, free_port()) as server:
        async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
            await client.request("container_create", check=True, containerId="user-alice")
            created = await client.request(
                "image_create",
                check=True,
                containerId="user-alice",
                config={"name": "Calc", "tools": [{"type": "builtin", "name": "calculator"}]},
            )
            image_id = created["record"]["imageId"]
            await client.request(
                "message_send", check=True, imageId=image_id, content='/tool calculator {"expression": "6*7"}'
            )
            events = [e async for e in client.turn_events(timeout=20)]
            history = await client.request("image_messages", check=True, imageId=image_id)

    types = [e["type"] for e in events if e["source"] == "agent"]
    for expected in ("tool_use_start", "tool_use_stop", "tool_call_message", "tool_result", "tool_completed"):
        assert expected in types
    assert types[-1] == "conversation_end"
    result = next(e["data"] for e in events if e["type"] == "tool_result")
    assert result["result"] == "42" and result["isError"] is False
    text = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
    assert text == "Echo: calculator returned: 42"
    assert [m["subtype"] for m in history["messages"]] == ["user", "tool-call", "tool-result", "assistant"]
