"""The Anthropic and OpenAI adapters' tool and attachment shapes, through the official SDKs against
``avm fake-llm`` (which records each request body and scripts tool calls in each wire format)."""

from __future__ import annotations

import httpx
import pytest

from agentvm.adapters.llm.anthropic import AnthropicModelClient
from agentvm.adapters.llm.openai import OpenAIModelClient
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.llm import (
    Attachment,
    ChatTurn,
    ModelRequest,
    ModelStop,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    ToolSpec,
)

WEATHER = ToolSpec(
    "get_weather", "Weather of a city", {"type": "object", "properties": {"city": {"type": "string"}}}
)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(FakeLLMConfig(ttft_ms=1, tokens_per_second=10_000, reply_tokens=3)) as server:
        yield server


@pytest.fixture(params=["anthropic", "openai"])
def client(request, fake):
    fake.reset()
    if request.param == "anthropic":
        return request.param, AnthropicModelClient("sk-test", base_url=fake.base_url)
    return request.param, OpenAIModelClient("sk-test", base_url=fake.openai_base_url)


def script(fake, *replies):
    assert httpx.post(f"{fake.base_url}/_fake/script", json={"replies": list(replies)}).status_code == 200


def last_body(fake):
    return httpx.get(f"{fake.base_url}/_fake/requests").json()[-1]


async def _events(model, request):
    return [e async for e in model.stream(request)]


async def test_a_streamed_tool_call_arrives_as_start_deltas_and_end(client, fake):
    _, model = client
    script(fake, {"text": "Looking.", "tool_calls": [{"name": "get_weather", "input": {"city": "Paris"}}]})
    events = await _events(model, ModelRequest("m", (ChatTurn("user", "weather?"),), tools=(WEATHER,)))
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "ModelStart" and kinds[-1] == "ModelStop"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Looking."
    start = next(e for e in events if isinstance(e, ToolCallStart))
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert start.name == end.name == "get_weather" and start.id == end.id
    assert end.input == {"city": "Paris"} and end.input_error is None
    assert len([e for e in events if isinstance(e, ToolCallDelta)]) > 1  # the JSON came in pieces
    assert isinstance(events[-1], ModelStop) and events[-1].stop_reason == "tool_use"


async def test_two_calls_do_not_interleave_and_invalid_json_is_reported_not_raised(client, fake):
    _, model = client
    calls = [{"name": "get_weather", "input": {"city": "A"}}, {"name": "get_weather", "input": {"city": "B"}}]
    script(fake, {"tool_calls": calls, "raw_arguments": '{"city": '})
    events = await _events(model, ModelRequest("m", (ChatTurn("user", "both"),), tools=(WEATHER,)))
    calls_seen = [e for e in events if isinstance(e, (ToolCallStart, ToolCallEnd))]
    assert [type(e).__name__ for e in calls_seen] == ["ToolCallStart", "ToolCallEnd"] * 2
    first, second = calls_seen[1], calls_seen[3]
    assert first.input == {} and "not valid JSON" in first.input_error
    assert second.input == {"city": "B"} and first.id != second.id


async def test_tools_and_the_tool_exchange_reach_the_provider_in_its_format(client, fake):
    provider, model = client
    history = (
        ChatTurn("user", "weather?"),
        ChatTurn("assistant", "Looking.", tool_calls=(ToolCall("call_1", "get_weather", {"city": "Paris"}),)),
        ChatTurn("user", tool_results=(ToolResult("call_1", "get_weather", "sunny", is_error=False),)),
    )
    await _events(model, ModelRequest("m", history, tools=(WEATHER,)))
    body = last_body(fake)
    if provider == "anthropic":
        assert body["tools"] == [
            {"name": "get_weather", "description": "Weather of a city", "input_schema": WEATHER.input_schema}
        ]
        assert body["messages"][1]["content"] == [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        ]
        assert body["messages"][2]["content"] == [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny", "is_error": False}
        ]
    else:
        assert body["tools"][0]["function"]["name"] == "get_weather"
        assistant, tool = body["messages"][1], body["messages"][2]
        assert assistant["tool_calls"][0]["function"] == {
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        }
        assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


async def test_images_and_pdfs_reach_the_provider_and_other_files_are_named(client, fake):
    provider, model = client
    turn = ChatTurn(
        "user",
        "what is this?",
        attachments=(
            Attachment("image", "image/png", PNG, "dot.png"),
            Attachment("file", "application/pdf", "JVBERi0xLjQK", "doc.pdf"),
            Attachment("file", "text/csv", "YSxiCg==", "data.csv"),
        ),
    )
    await _events(model, ModelRequest("m", (turn,)))
    content = last_body(fake)["messages"][-1]["content"]
    kinds = [part["type"] for part in content]
    if provider == "anthropic":
        assert kinds == ["image", "document", "text", "text"]
        assert content[0]["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}
    else:
        assert kinds == ["text", "image_url", "file", "text"]
        assert content[1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert any("data.csv (text/csv) not sent" in part.get("text", "") for part in content)
