"""Tool turns through the official Anthropic and OpenAI SDKs against ``avm fake-llm`` scripting tool
calls in each wire format: one call, parallel calls, a failing tool, a tool that times out,
invalid input, ``maxSteps``, and an interrupt during a tool call. The events and stored messages
are the ones docs/protocol.md ("A tool turn") shows."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.ports import ToolOutput
from tests.tools import FakeTool, FixedToolSources, agent_types

KEY = "sk-test-SECRET-do-not-leak-0123456789"
MODELS = {"anthropic": "anthropic/claude-haiku-4-5", "openai": "openai/gpt-4o-mini"}
DECLARED = [{"type": "builtin", "name": "calculator"}]  # any declaration: FixedToolSources decides


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(FakeLLMConfig(ttft_ms=2, tokens_per_second=5000, reply_tokens=5)) as server:
        yield server


@pytest.fixture(params=sorted(MODELS))
def model(request, fake, harness):
    fake.reset()
    settings = Settings(
        _env_file=None,
        anthropic_api_key=SecretStr(KEY),
        anthropic_base_url=fake.base_url,
        openai_api_key=SecretStr(KEY),
        openai_base_url=fake.openai_base_url,
        provider_retry_base_ms=10,
    )
    harness.rt.models = SettingsModelResolver(settings)
    return MODELS[request.param]


def script(fake, *replies: dict[str, Any]) -> None:
    response = httpx.post(f"{fake.base_url}/_fake/script", json={"replies": list(replies)})
    assert response.status_code < 300, response.text


def sent(fake) -> list[dict[str, Any]]:
    return httpx.get(f"{fake.base_url}/_fake/requests").json()


async def _turn(harness, model, *tools: FakeTool, content="Weather?", max_steps=None, run=True):
    harness.rt.tools = FixedToolSources(*tools, timeout_s=0.3)
    c = await harness.client()
    config: dict[str, Any] = {"name": "A", "model": model, "tools": DECLARED}
    if max_steps:
        config["maxSteps"] = max_steps
    img = (await c.request("image_create", containerId="u", config=config))["record"]
    await c.subscribe(img["sessionId"])
    await c.request("message_send", imageId=img["imageId"], content=content)
    if run:
        await harness.run_turns()
    return c, img


def _types(c) -> list[str]:
    return agent_types(c.session_events())


async def _stored(c, img) -> list[dict[str, Any]]:
    return (await c.request("image_messages", imageId=img["imageId"]))["messages"]


async def test_one_tool_call_runs_and_the_model_answers_with_its_result(harness, model, fake):
    tool = FakeTool("get_weather")
    script(
        fake, {"text": "Let me check.", "tool_calls": [{"name": "get_weather", "input": {"city": "Paris"}}]}
    )
    c, img = await _turn(harness, model, tool)
    assert tool.calls == [{"city": "Paris"}]
    types = _types(c)
    assert types[types.index("tool_use_start") : types.index("tool_use_start") + 6] == [
        "tool_use_start",
        "tool_planned",
        "tool_executing",
        "input_json_delta",
        "tool_use_stop",
        "tool_call_message",
    ]
    assert types[types.index("message_stop") :][:5] == [
        "message_stop",
        "assistant_message",
        "tool_result",
        "tool_result_message",
        "tool_completed",
    ]
    assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
    stop = next(f["data"] for f in c.session_events() if f["type"] == "tool_use_stop")
    assert stop["toolName"] == "get_weather" and stop["input"] == {"city": "Paris"} and stop["toolCallId"]
    assert [m["subtype"] for m in await _stored(c, img)] == [  # the step's text first, as streamed
        "user",
        "assistant",
        "tool-call",
        "tool-result",
        "assistant",
    ]
    # The provider got the tool definitions, then the exchange in its own format.
    first, second = sent(fake)[-2:]
    assert "get_weather" in str(first["tools"])
    assert "get_weather: sunny in Paris" in str(second["messages"])
    usage = await harness.store.list_usage("tenant-a")
    assert sorted(u.kind for u in usage) == ["step", "turn"] and all(u.outputTokens > 0 for u in usage)


async def test_two_parallel_calls_both_run_and_both_results_go_back(harness, model, fake):
    tool = FakeTool("get_weather")
    calls = [
        {"name": "get_weather", "input": {"city": "Paris"}},
        {"name": "get_weather", "input": {"city": "Rome"}},
    ]
    script(fake, {"tool_calls": calls})
    c, img = await _turn(harness, model, tool)
    assert sorted(a["city"] for a in tool.calls) == ["Paris", "Rome"]
    assert _types(c).count("tool_call_message") == 2 and _types(c).count("tool_completed") == 2
    ids = [f["data"]["toolCallId"] for f in c.session_events() if f["type"] == "tool_use_stop"]
    assert len(set(ids)) == 2
    second = str(sent(fake)[-1]["messages"])
    assert "sunny in Paris" in second and "sunny in Rome" in second


@pytest.mark.parametrize("failure", ["raises", "times_out"])
async def test_a_failing_or_hanging_tool_is_an_error_result_and_the_turn_completes(
    harness, model, fake, failure
):
    async def act(arguments):
        if failure == "raises":
            raise RuntimeError("service down")
        await asyncio.sleep(5)
        return ToolOutput("late")

    script(fake, {"tool_calls": [{"name": "get_weather", "input": {"city": "Paris"}}]})
    c, img = await _turn(harness, model, FakeTool("get_weather", act))
    result = next(f["data"] for f in c.session_events() if f["type"] == "tool_result")
    assert result["isError"] is True
    assert ("service down" if failure == "raises" else "timed out after 0.3 s") in result["result"]
    assert "tool_failed" in _types(c) and _types(c)[-1] == "conversation_end"
    stored = next(m for m in await _stored(c, img) if m["subtype"] == "tool-result")
    assert stored["toolResult"]["output"]["type"] == "error-text"


async def test_invalid_tool_input_goes_back_to_the_model_and_the_tool_is_not_called(harness, model, fake):
    tool = FakeTool("get_weather")
    script(fake, {"tool_calls": [{"name": "get_weather", "input": {}}], "raw_arguments": '{"city": '})
    c, img = await _turn(harness, model, tool)
    assert tool.calls == []
    result = next(f["data"] for f in c.session_events() if f["type"] == "tool_result")
    assert result["isError"] and "not valid JSON" in result["result"]
    assert _types(c)[-1] == "conversation_end"


async def test_a_model_that_keeps_calling_tools_stops_at_max_steps(harness, model, fake):
    tool = FakeTool("get_weather")
    script(fake, *[{"tool_calls": [{"name": "get_weather", "input": {"city": f"C{i}"}}]} for i in range(4)])
    c, img = await _turn(harness, model, tool, max_steps=2)
    assert len(tool.calls) == 1
    assert c.session_events()[-1]["type"] == "error_occurred"
    assert c.session_events()[-1]["data"]["code"] == "max_steps"
    assert (await _stored(c, img))[-1]["subtype"] == "error"


async def test_an_interrupt_during_a_tool_call_stops_it_and_ends_the_turn(harness, model, fake):
    started = asyncio.Event()

    async def slow(arguments):
        started.set()
        await asyncio.sleep(30)
        return ToolOutput("never")

    script(fake, {"tool_calls": [{"name": "get_weather", "input": {"city": "Paris"}}]})
    harness.rt.tools = FixedToolSources(FakeTool("get_weather", slow), timeout_s=60)
    c = await harness.client()
    config = {"name": "A", "model": model, "tools": DECLARED}
    img = (await c.request("image_create", containerId="u", config=config))["record"]
    await c.subscribe(img["sessionId"])
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    turn = asyncio.create_task(harness.run_turns())
    await asyncio.wait_for(started.wait(), 10)
    await c.request("agent_interrupt", imageId=img["imageId"])
    await asyncio.wait_for(turn, 10)
    assert _types(c)[-3:] == ["tool_failed", "interrupted", "conversation_end"]
    assert len(sent(fake)) == 1  # no model call after the interrupt
