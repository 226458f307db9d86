"""Prompt caching through the official SDKs against the fake provider, which prices its own prompt
cache as each provider documents it (fakellm/prompt_cache.py): breakpoints written on one request
are read by the next, through the adapters and through whole turns of the runtime."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agentvm.adapters.llm.anthropic import AnthropicModelClient
from agentvm.adapters.llm.bedrock import BedrockModelClient
from agentvm.adapters.llm.openai import OpenAIModelClient
from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.fakellm.prompt_cache import CacheUse, PromptCache
from agentvm.llm import ChatTurn, ModelRequest, ModelStop, ToolCall, ToolResult
from agentvm.turns import prompt_cache_key

KEY = "sk-test-SECRET-do-not-leak-0123456789"
SYSTEM = "word " * 2000  # 2,000 of the fake's tokens (words); about 2,500 by the adapters' estimate
MODELS = {"anthropic": "anthropic/claude-sonnet-4-6", "openai": "openai/gpt-4o-mini"}


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(FakeLLMConfig(ttft_ms=1, tokens_per_second=5000, reply_tokens=5)) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(fake):
    fake.reset()


def sent(fake) -> list[dict[str, Any]]:
    return httpx.get(f"{fake.base_url}/_fake/requests").json()


def step_messages(steps: int) -> tuple[ChatTurn, ...]:
    turns = [ChatTurn("user", "hello")]
    for i in range(steps):
        turns.append(ChatTurn("assistant", "looking", tool_calls=(ToolCall(f"c{i}", "search", {"q": "x"}),)))
        turns.append(ChatTurn("user", tool_results=(ToolResult(f"c{i}", "search", "found it"),)))
    return tuple(turns)


async def stop_of(client, request: ModelRequest) -> ModelStop:
    events = [event async for event in client.stream(request)]
    assert isinstance(events[-1], ModelStop)
    return events[-1]


def _marks(body: dict[str, Any]) -> int:
    blocks = list(body.get("tools") or [])
    blocks += body["system"] if isinstance(body.get("system"), list) else []
    for message in body["messages"]:
        blocks += message["content"] if isinstance(message["content"], list) else []
    return sum("cache_control" in block for block in blocks)


async def test_anthropic_step_two_reads_what_step_one_wrote(fake):
    client = AnthropicModelClient(KEY, fake.base_url, timeout_s=5.0)
    base = {"model": "claude-sonnet-4-6", "system": SYSTEM, "prompt_caching": True}

    first = await stop_of(client, ModelRequest(messages=step_messages(1), **base))
    second = await stop_of(client, ModelRequest(messages=step_messages(2), **base))

    # step 1 writes everything up to its moving end (system 2,000 + "hello" "looking" "found it")
    assert (first.input_tokens, first.cache_read_tokens, first.cache_write_tokens) == (2004, 0, 2004)
    # step 2 reads it (its breakpoint on the previous request's end) and writes only the new step
    assert (second.input_tokens, second.cache_read_tokens, second.cache_write_tokens) == (2007, 2004, 3)
    bodies = sent(fake)
    assert [_marks(b) for b in bodies] == [3, 3]  # system, previous user message, moving end
    assert fake.stats()["cache_read_tokens"] == 2004


async def test_anthropic_caching_off_sends_no_breakpoints_and_reads_nothing(fake):
    client = AnthropicModelClient(KEY, fake.base_url, timeout_s=5.0)
    base = {"model": "claude-sonnet-4-6", "system": SYSTEM, "prompt_caching": False}

    await stop_of(client, ModelRequest(messages=step_messages(1), **base))
    second = await stop_of(client, ModelRequest(messages=step_messages(2), **base))

    assert (second.cache_read_tokens, second.cache_write_tokens) == (0, 0)
    assert [_marks(b) for b in sent(fake)] == [0, 0]


async def test_anthropic_a_prefix_below_the_minimum_is_not_cached(fake):
    fake.configure(cache_min_tokens=5000)
    client = AnthropicModelClient(KEY, fake.base_url, timeout_s=5.0)
    request = ModelRequest(
        model="claude-sonnet-4-6", system=SYSTEM, messages=step_messages(0), prompt_caching=True
    )

    await stop_of(client, request)
    again = await stop_of(client, request)

    assert (again.cache_read_tokens, again.cache_write_tokens) == (0, 0)


def bedrock_client(fake) -> BedrockModelClient:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=fake.base_url,
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    return BedrockModelClient("us-east-1", client=client)


async def test_bedrock_converse_step_two_reads_the_cache_points_step_one_wrote(fake):
    client = bedrock_client(fake)
    base = {"model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "system": SYSTEM, "prompt_caching": True}

    first = await stop_of(client, ModelRequest(messages=step_messages(1), **base))
    second = await stop_of(client, ModelRequest(messages=step_messages(2), **base))

    # boto3's event stream, priced as Converse reports it: cacheRead/WriteInputTokens beside inputTokens
    # (no tools declared: Converse gets the calls and results as text notes, so more words)
    assert (first.cache_read_tokens, first.cache_write_tokens) == (0, first.input_tokens)
    assert second.cache_read_tokens == first.input_tokens
    assert second.cache_write_tokens == second.input_tokens - first.input_tokens > 0
    points = [
        sum("cachePoint" in block for m in body["messages"] for block in m["content"])
        + sum("cachePoint" in block for block in body["system"])
        for body in sent(fake)
    ]
    assert points == [3, 3]


async def test_bedrock_models_without_cache_points_get_none(fake):
    client = bedrock_client(fake)
    request = ModelRequest(
        model="meta.llama3-70b-instruct-v1:0", system=SYSTEM, messages=step_messages(1), prompt_caching=True
    )
    await stop_of(client, request)
    again = await stop_of(client, request)
    assert (again.cache_read_tokens, again.cache_write_tokens) == (0, 0)
    assert "cachePoint" not in repr(sent(fake))


def test_the_fake_refuses_more_than_four_breakpoints_as_the_api_does(fake):
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [marked] * 5}]}
    response = httpx.post(f"{fake.base_url}/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_openai_reads_the_longest_cached_128_token_step_under_its_key(fake):
    client = OpenAIModelClient(KEY, fake.openai_base_url, timeout_s=5.0)
    base = {"model": "gpt-4o-mini", "system": SYSTEM, "prompt_caching": True, "cache_key": "k1"}

    first = await stop_of(client, ModelRequest(messages=step_messages(0), **base))
    second = await stop_of(client, ModelRequest(messages=step_messages(1), **base))
    other_key = await stop_of(client, ModelRequest(messages=step_messages(1), **{**base, "cache_key": "k2"}))

    assert first.cache_read_tokens == 0
    # 2,001 words were seen: the longest step of 1,024 + n*128 within them is 1,920
    assert (second.input_tokens, second.cache_read_tokens) == (2004, 1920)
    assert other_key.cache_read_tokens == 0
    assert [b.get("prompt_cache_key") for b in sent(fake)] == ["k1", "k1", "k2"]


def test_the_fake_cache_lives_five_minutes_from_last_use():
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    marked = {"type": "text", "text": "w " * 1100, "cache_control": {"type": "ephemeral"}}
    body = {"model": "m", "messages": [{"role": "user", "content": [marked]}]}

    assert cache.anthropic(body, 1024).write == 1100
    now[0] = 299.0
    assert cache.anthropic(body, 1024).read == 1100  # a read refreshes it...
    now[0] = 598.0
    assert cache.anthropic(body, 1024).read == 1100  # ...so it is still there 5 minutes later
    now[0] = 898.1
    assert cache.anthropic(body, 1024) == CacheUse(read=0, write=1100)  # expired: written again


def test_a_top_level_cache_control_is_a_breakpoint_on_the_last_block():
    cache = PromptCache()
    system = [{"type": "text", "text": "s " * 1100, "cache_control": {"type": "ephemeral"}}]
    first = {"model": "m", "system": system, "messages": [{"role": "user", "content": "u " * 50}]}
    automatic = {**first, "cache_control": {"type": "ephemeral"}}
    longer = {**automatic, "messages": [*first["messages"], {"role": "user", "content": "v " * 10}]}

    assert cache.anthropic(first, 1024) == CacheUse(write=1100)  # the system's breakpoint only
    assert cache.anthropic(automatic, 1024) == CacheUse(read=1100, write=50)  # and the message
    assert cache.anthropic(longer, 1024) == CacheUse(read=1150, write=10)  # read back, moved on


# Whole turns through the runtime


@pytest.fixture(params=sorted(MODELS))
def model(request, fake, harness):
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


async def _conversation(harness, model: str, turns: int, **config: Any) -> dict[str, Any]:
    c = await harness.client()
    config = {"name": "A", "model": model, "systemPrompt": SYSTEM, **config}
    img = (await c.request("image_create", containerId="u", config=config))["record"]
    for i in range(turns):
        await c.request("message_send", imageId=img["imageId"], content=f"question number {i}")
        await harness.run_turns()
    return img


async def test_turns_two_and_later_read_the_cache_and_usage_records_carry_it(harness, model, fake):
    img = await _conversation(harness, model, 3)

    usage = sorted(await harness.store.list_usage("tenant-a"), key=lambda u: u.createdAt)
    assert len(usage) == 3
    assert usage[0].cacheReadTokens == 0
    assert all(u.cacheReadTokens > 0 for u in usage[1:])
    assert all(u.cacheReadTokens <= u.inputTokens for u in usage)
    if model.startswith("anthropic"):
        assert all(u.cacheWriteTokens > 0 for u in usage)  # each turn writes its new end
        assert all(0 < _marks(b) <= 4 for b in sent(fake))
    else:
        key = prompt_cache_key("tenant-a", img["sessionId"])
        assert {b["prompt_cache_key"] for b in sent(fake)} == {key}
        assert "tenant-a" not in key and img["sessionId"] not in key
        assert key == hashlib.sha256(f"agentvm-cache:tenant-a:{img['sessionId']}".encode()).hexdigest()[:32]


async def _assert_uncached(harness, model, fake) -> None:
    """No breakpoints and no cache key were sent. Anthropic then caches nothing; OpenAI caches a
    stable prefix whatever the request says (that cannot be turned off), so it may still read."""
    bodies = sent(fake)
    assert len(bodies) == 2
    assert all(_marks(b) == 0 and "prompt_cache_key" not in b for b in bodies)
    usage = await harness.store.list_usage("tenant-a")
    if model.startswith("anthropic"):
        assert [(u.cacheReadTokens, u.cacheWriteTokens) for u in usage] == [(0, 0), (0, 0)]


async def test_an_image_can_turn_caching_off(harness, model, fake):
    await _conversation(harness, model, 2, promptCaching=False)
    await _assert_uncached(harness, model, fake)


async def test_a_tenant_setting_turns_caching_off(harness, model, fake):
    harness.rt.turns = dataclasses.replace(harness.rt.turns, prompt_caching=False)
    await _conversation(harness, model, 2)
    await _assert_uncached(harness, model, fake)


async def test_a_stepped_window_keeps_the_cached_prefix_between_its_steps_and_says_when_it_moves(
    harness, fake
):
    settings = Settings(
        _env_file=None,
        anthropic_api_key=SecretStr(KEY),
        anthropic_base_url=fake.base_url,
        provider_retry_base_ms=10,
    )
    harness.rt.models = SettingsModelResolver(settings)
    # two messages a turn; the window's start moves every 6 messages once 6 are read: turns 7 and 10
    harness.rt.turns = dataclasses.replace(
        harness.rt.turns, history_window=6, history_window_step=6, compaction_threshold_tokens=0
    )
    await _conversation(harness, MODELS["anthropic"], 10, contextDiet={"keepSteps": 2})
    usage = sorted(await harness.store.list_usage("tenant-a"), key=lambda u: u.createdAt)
    assert [u.prefixBreak for u in usage] == [None] * 6 + ["window", None, None, "window"]
    for before, after in zip(usage, usage[1:], strict=False):
        if after.prefixBreak is None:  # the whole previous request is read from the cache
            assert after.cacheReadTokens >= before.inputTokens
        else:  # the image's prompt still is; the conversation is written again
            assert 2000 <= after.cacheReadTokens < before.inputTokens
