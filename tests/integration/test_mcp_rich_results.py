"""Rich results of a real third-party MCP server (``@modelcontextprotocol/server-everything`` from
npm, over stdio): its ``get-tiny-image`` PNG reaches each provider as that provider's image block
in its tool result (Anthropic ``tool_result`` content, OpenAI a user message after the ``tool``
messages, Bedrock Converse ``toolResult`` content), through the official SDKs against ``avm
fake-llm``, which refuses the shapes the real APIs refuse; and a whole turn stores the blocks, sends
them to clients beside the text, and replays them from history on the next turn."""

from __future__ import annotations

import base64
import os

import httpx
import pytest

from agentvm.adapters.llm.anthropic import AnthropicModelClient
from agentvm.adapters.llm.bedrock import BedrockModelClient
from agentvm.adapters.llm.openai import OpenAIModelClient
from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.mcp.client import SdkMcpConnector
from agentvm.agent.tools.sources import ToolSources
from agentvm.agent.tools.toolbox import Toolbox
from agentvm.client.events import ToolResultEvent
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.llm import Attachment, ChatTurn, ModelRequest, ModelStop, ToolCall, ToolSpec
from tests.npm_tools import SERVER_EVERYTHING, have_npm, installed

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def everything() -> dict:
    if not have_npm():
        if os.environ.get("CI") == "true":
            pytest.fail("node and npm are required under CI (server-everything)")
        pytest.skip("node and npm are not installed")
    return {"command": str(installed(*SERVER_EVERYTHING)), "args": ["stdio"]}


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(FakeLLMConfig(ttft_ms=1, tokens_per_second=10_000, reply_tokens=3)) as server:
        yield server


async def _tiny_image_result(everything):
    """The server's own answer to ``get-tiny-image``, as the toolbox makes it a result."""
    session = SdkMcpConnector(connect_timeout_s=30).session("everything", everything)
    try:
        specs = {s.name: s for s in await session.list_tools()}
        assert "get-tiny-image" in specs

        class _Tool:
            spec = ToolSpec("get-tiny-image", specs["get-tiny-image"].description, {"type": "object"})
            timeout_s = 30.0
            idempotent = True

            async def call(self, arguments):
                return await session.call_tool("get-tiny-image", arguments)

        run = await Toolbox([_Tool()]).run(ToolCall("call_img_1", "get-tiny-image", {}))
    finally:
        await session.aclose()
    return run.result


async def test_the_servers_png_becomes_an_image_block_of_the_result(everything):
    result = await _tiny_image_result(everything)
    assert not result.is_error
    images = [b for b in result.blocks if isinstance(b, Attachment)]
    assert len(images) == 1 and images[0].kind == "image" and images[0].media_type == "image/png"
    assert base64.b64decode(images[0].data).startswith(PNG_MAGIC)
    assert "[image (image/png," in result.content  # what a text-only model reads
    assert images[0].data not in result.content


def _request(result) -> ModelRequest:
    return ModelRequest(
        "m",
        (
            ChatTurn("user", "show me the image"),
            ChatTurn("assistant", tool_calls=(ToolCall(result.call_id, result.name, {}),)),
            ChatTurn("user", tool_results=(result,)),
        ),
        tools=(ToolSpec(result.name, "a tiny image", {"type": "object", "properties": {}}),),
    )


def _bedrock_client(fake) -> BedrockModelClient:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=fake.base_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    return BedrockModelClient("us-east-1", client=client)


async def _send(model, request):
    events = [e async for e in model.stream(request)]
    assert isinstance(events[-1], ModelStop)  # the fake accepted the shapes (it refuses as the APIs do)


def _last_body(fake):
    return httpx.get(f"{fake.base_url}/_fake/requests").json()[-1]


async def test_anthropic_receives_the_png_inside_the_tool_result(everything, fake):
    result = await _tiny_image_result(everything)
    fake.reset()
    await _send(AnthropicModelClient("sk-test", base_url=fake.base_url), _request(result))
    block = _last_body(fake)["messages"][-1]["content"][0]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "call_img_1"
    images = [b for b in block["content"] if b["type"] == "image"]
    assert len(images) == 1 and images[0]["source"]["type"] == "base64"
    assert images[0]["source"]["media_type"] == "image/png"
    assert base64.b64decode(images[0]["source"]["data"]).startswith(PNG_MAGIC)
    assert all(b["text"] for b in block["content"] if b["type"] == "text")


async def test_openai_receives_the_png_in_a_user_message_after_the_tool_message(everything, fake):
    result = await _tiny_image_result(everything)
    fake.reset()
    await _send(OpenAIModelClient("sk-test", base_url=fake.openai_base_url), _request(result))
    messages = _last_body(fake)["messages"]
    tool, after = messages[-2], messages[-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_img_1"
    assert "[image (image/png," in tool["content"]
    assert after["role"] == "user"
    urls = [p["image_url"]["url"] for p in after["content"] if p["type"] == "image_url"]
    assert len(urls) == 1 and urls[0].startswith("data:image/png;base64,")
    assert base64.b64decode(urls[0].partition(",")[2]).startswith(PNG_MAGIC)


async def test_bedrock_receives_the_png_inside_the_tool_result(everything, fake):
    result = await _tiny_image_result(everything)
    fake.reset()
    await _send(_bedrock_client(fake), _request(result))
    content = _last_body(fake)["messages"][-1]["content"][0]["toolResult"]["content"]
    images = [b["image"] for b in content if "image" in b]
    assert len(images) == 1 and images[0]["format"] == "png"
    assert base64.b64decode(images[0]["source"]["bytes"]).startswith(PNG_MAGIC)


async def test_the_fake_refuses_an_image_in_an_openai_tool_message_as_openai_does(fake):
    fake.reset()
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
            },
        ],
    }
    answer = httpx.post(f"{fake.openai_base_url}/chat/completions", json=body)
    assert answer.status_code == 400 and "type 'text'" in answer.json()["error"]["message"]


async def test_a_turn_stores_the_image_sends_it_to_clients_and_replays_it(harness, everything):
    harness.rt.tools = ToolSources(mcp=SdkMcpConnector(connect_timeout_s=30), allow_private_networks=True)
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    config = {"mcpServers": {"everything": {**everything, "timeoutS": 30}}}
    img = (await c.request("image_create", containerId="u1", config=config))["record"]
    harness.model.add(Calls(("get-tiny-image", {})), "A tiny image.")
    await c.request("message_send", imageId=img["imageId"], content="show me")
    await harness.run_turns()

    sent = harness.model.requests[1].messages[-1].tool_results[0]
    assert [b.media_type for b in sent.media] == ["image/png"]
    frames = {f["type"]: f["data"] for f in c.session_events()}
    assert "[image (image/png," in frames["tool_result"]["result"]  # text stays the result
    media = [p for p in frames["tool_result"]["content"] if p["type"] == "media"]
    assert media[0]["mediaType"] == "image/png" and media[0]["data"] == sent.media[0].data
    output = frames["tool_result_message"]["toolResult"]["output"]
    assert output["type"] == "content" and output["value"] == frames["tool_result"]["content"]
    assert "content" not in frames["tool_completed"]
    typed = ToolResultEvent.model_validate(
        next(f for f in c.session_events() if f["type"] == "tool_result")
    )  # the SDK's typed event
    assert [t for t, data in typed.data.images] == ["image/png"]
    assert typed.data.images[0][1].startswith(PNG_MAGIC)

    harness.model.add("Still the same image.")  # the next turn rebuilds the exchange from the store
    await c.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    replayed = next(t for t in harness.model.requests[2].messages if t.tool_results).tool_results[0]
    assert replayed.blocks == sent.blocks and replayed.content == sent.content
