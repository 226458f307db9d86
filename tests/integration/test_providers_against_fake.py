"""The SDK adapters, through the official SDKs, against the fake provider speaking the real wire formats."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import traceback

import httpx
import pytest

from agentvm.adapters.llm.anthropic import AnthropicModelClient
from agentvm.adapters.llm.openai import OpenAIModelClient
from agentvm.agent.retry import RetryingModelClient
from agentvm.errors import ProviderError, ProviderRateLimited, ProviderUnavailable
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer, add_arguments, reply_tokens
from agentvm.llm import ChatTurn, ModelRequest, ModelStart, ModelStop, TextDelta

API_KEY = "sk-fake-SECRET-0123456789abcdef"
REPLY_TOKENS = 30
REQUEST = ModelRequest(
    model="fake-model-1", messages=(ChatTurn("user", "hello there"),), system="be brief", max_tokens=1000
)


@pytest.fixture(scope="module")
def fake_server():
    config = FakeLLMConfig(ttft_ms=20, tokens_per_second=2000, reply_tokens=REPLY_TOKENS)
    with FakeLLMServer(config) as server:
        yield server


@pytest.fixture
def fake(fake_server):
    fake_server.reset()
    return fake_server


def anthropic_client(fake: FakeLLMServer) -> AnthropicModelClient:
    return AnthropicModelClient(API_KEY, fake.base_url, timeout_s=5.0)


def openai_client(fake: FakeLLMServer) -> OpenAIModelClient:
    return OpenAIModelClient(API_KEY, fake.openai_base_url, timeout_s=5.0)


each_provider = pytest.mark.parametrize(
    "make_client", [anthropic_client, openai_client], ids=["anthropic", "openai"]
)


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(seconds)


def retrying(inner, sleep=asyncio.sleep, max_attempts: int = 4) -> RetryingModelClient:
    return RetryingModelClient(
        inner, max_attempts=max_attempts, base_delay_s=0.01, max_delay_s=0.05, max_total_s=5.0, sleep=sleep
    )


def text_of(events: list) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def collect(client, request: ModelRequest = REQUEST) -> list:
    return [event async for event in client.stream(request)]


async def collect_until_error(client) -> tuple[list, ProviderError]:
    received: list = []
    with pytest.raises(ProviderError) as raised:
        async for event in client.stream(REQUEST):
            received.append(event)
    return received, raised.value


@each_provider
async def test_streamed_text_and_usage_match_the_fake(fake, make_client):
    events = await collect(retrying(make_client(fake)))

    assert isinstance(events[0], ModelStart)
    assert events[0].model == "fake-model-1"
    assert text_of(events) == "".join(reply_tokens(REPLY_TOKENS))
    # input: a rough word count of system + messages ("be brief" + "hello there")
    assert events[-1] == ModelStop("end_turn", input_tokens=4, output_tokens=REPLY_TOKENS)
    assert fake.stats() == {
        "requests": 1,
        "tokens_emitted": REPLY_TOKENS,
        "disconnects": 0,
        "completed": 1,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }


@each_provider
async def test_reported_input_tokens_and_max_tokens_are_honoured(fake, make_client):
    fake.configure(input_tokens=1234)
    request = ModelRequest(model="fake-model-1", messages=REQUEST.messages, max_tokens=5)

    events = await collect(make_client(fake), request)

    assert text_of(events) == "".join(reply_tokens(5))
    assert events[-1] == ModelStop("max_tokens", input_tokens=1234, output_tokens=5)


async def test_anthropic_cache_reads_and_writes_are_reported_inside_the_input_tokens(fake):
    fake.configure(input_tokens=1000, cache_read_tokens=600, cache_write_tokens=300)

    events = await collect(anthropic_client(fake))

    # The wire says input_tokens=100 beside cache_read_input_tokens=600, cache_creation_input_tokens=300
    start, stop = events[0], events[-1]
    assert (start.input_tokens, start.cache_read_tokens, start.cache_write_tokens) == (1000, 600, 300)
    assert stop == ModelStop(
        "end_turn",
        input_tokens=1000,
        output_tokens=REPLY_TOKENS,
        cache_read_tokens=600,
        cache_write_tokens=300,
    )


async def test_openai_cached_prompt_tokens_are_reported_as_cache_reads(fake):
    fake.configure(input_tokens=1000, cache_read_tokens=600, cache_write_tokens=300)

    events = await collect(openai_client(fake))

    # OpenAI reports cached_tokens inside prompt_tokens, and no cache writes
    assert events[-1] == ModelStop(
        "end_turn", input_tokens=1000, output_tokens=REPLY_TOKENS, cache_read_tokens=600, cache_write_tokens=0
    )


@each_provider
async def test_rate_limit_is_retried_after_retry_after_then_succeeds(fake, make_client):
    fake.add_faults([{"kind": "429", "retry_after": 0.05}])
    sleep = RecordingSleep()

    events = await collect(retrying(make_client(fake), sleep=sleep))

    assert text_of(events) == "".join(reply_tokens(REPLY_TOKENS))
    assert len(sleep.delays) == 1
    assert sleep.delays[0] >= 0.05  # the Retry-After header beats the tiny backoff
    assert fake.stats()["requests"] == 2


@each_provider
async def test_rate_limit_carries_retry_after(fake, make_client):
    fake.add_faults([{"kind": "429", "retry_after": 2}])

    _, error = await collect_until_error(make_client(fake))

    assert isinstance(error, ProviderRateLimited)
    assert error.retry_after == 2.0


@each_provider
async def test_persistent_500_is_unavailable_after_bounded_retries(fake, make_client):
    fake.add_faults([{"kind": "500"}] * 10)

    received, error = await collect_until_error(retrying(make_client(fake), max_attempts=3))

    assert isinstance(error, ProviderUnavailable)
    assert received == []
    assert fake.stats()["requests"] == 3


@each_provider
async def test_overloaded_is_unavailable(fake, make_client):
    fake.add_faults([{"kind": "overloaded"}])

    _, error = await collect_until_error(make_client(fake))

    assert isinstance(error, ProviderUnavailable)
    assert ("529" if make_client is anthropic_client else "503") in str(error)


@each_provider
async def test_cut_stream_is_unavailable_and_not_retried_after_output(fake, make_client):
    fake.add_faults([{"kind": "cut", "after_tokens": 5}])

    received, error = await collect_until_error(retrying(make_client(fake)))

    assert isinstance(error, ProviderUnavailable)
    assert text_of(received) == "".join(reply_tokens(5))
    assert not any(isinstance(event, ModelStop) for event in received)
    assert fake.stats()["requests"] == 1  # output had started: a retry would duplicate it


@each_provider
async def test_error_event_inside_the_stream_is_unavailable(fake, make_client):
    fake.add_faults([{"kind": "stream_error", "after_tokens": 3}])

    received, error = await collect_until_error(make_client(fake))

    assert isinstance(error, ProviderUnavailable)
    assert text_of(received) == "".join(reply_tokens(3))


@each_provider
async def test_closing_the_stream_early_disconnects_and_the_fake_stops(fake, make_client):
    fake.configure(reply_tokens=5000, tokens_per_second=500)  # 10 s of tokens if nobody stops it
    stream = retrying(make_client(fake)).stream(REQUEST)
    for _ in range(4):  # start + 3 deltas
        await anext(stream)

    await stream.aclose()

    for _ in range(100):
        if fake.stats()["disconnects"]:
            break
        await asyncio.sleep(0.02)
    stopped_at = fake.stats()["tokens_emitted"]
    await asyncio.sleep(0.1)
    stats = fake.stats()
    assert stats["disconnects"] == 1
    assert stats["tokens_emitted"] == stopped_at < 5000
    assert stats["completed"] == 0


@each_provider
async def test_api_key_never_appears_in_errors_or_logs(fake, make_client, caplog):
    client = make_client(fake)
    errors = []
    with caplog.at_level(logging.DEBUG):
        fake.add_faults([{"kind": "429", "retry_after": 0.01}, {"kind": "500"}])
        await collect(retrying(client))  # both retried (and logged), then a full reply
        fake.add_faults(
            [
                {"kind": "overloaded"},
                {"kind": "cut", "after_tokens": 2},
                {"kind": "stream_error", "after_tokens": 1},
            ]
        )
        for _ in range(3):
            errors.append((await collect_until_error(retrying(client, max_attempts=1)))[1])
    assert len(errors) == 3
    for error in errors:
        assert API_KEY not in str(error)
        assert API_KEY not in "".join(traceback.format_exception(error))
    assert caplog.records, "expected the SDK and retry logs to be captured"
    assert API_KEY not in caplog.text
    assert all(API_KEY not in record.getMessage() for record in caplog.records)


async def test_fake_serves_non_streamed_replies_the_sdks_parse(fake):
    import anthropic
    import openai

    async with anthropic.AsyncAnthropic(api_key=API_KEY, base_url=fake.base_url, max_retries=0) as client:
        message = await client.messages.create(
            model="fake-model-1", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    async with openai.AsyncOpenAI(api_key=API_KEY, base_url=fake.openai_base_url, max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="fake-model-1", messages=[{"role": "user", "content": "hi"}]
        )

    assert message.content[0].text == "".join(reply_tokens(10))
    assert (message.stop_reason, message.usage.output_tokens) == ("max_tokens", 10)
    assert completion.choices[0].message.content == "".join(reply_tokens(REPLY_TOKENS))
    assert completion.usage.completion_tokens == REPLY_TOKENS
    assert fake.stats()["completed"] == 2


async def test_non_streamed_replies_carry_their_scripted_tool_calls(fake):
    import anthropic
    import openai

    call = {"name": "check_stock", "input": {"sku": "sku-2", "store": "main"}}
    fake.state.add_script([{"text": "Looking.", "tool_calls": [call]}] * 2)
    async with anthropic.AsyncAnthropic(api_key=API_KEY, base_url=fake.base_url, max_retries=0) as client:
        message = await client.messages.create(
            model="fake-model-1", max_tokens=100, messages=[{"role": "user", "content": "stock?"}]
        )
    async with openai.AsyncOpenAI(api_key=API_KEY, base_url=fake.openai_base_url, max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="fake-model-1", messages=[{"role": "user", "content": "stock?"}]
        )

    text, use = message.content
    assert (text.text, message.stop_reason) == ("Looking.", "tool_use")
    assert (use.type, use.name, use.input) == ("tool_use", "check_stock", call["input"])
    choice = completion.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("Looking.", "tool_calls")
    function = choice.message.tool_calls[0].function
    assert (function.name, json.loads(function.arguments)) == ("check_stock", call["input"])


async def test_fake_control_endpoints_configure_inject_and_report(fake):
    async with httpx.AsyncClient(base_url=fake.base_url) as http:
        config = (await http.post("/_fake/config", json={"reply_tokens": 3, "ttft_ms": 0})).json()
        bad = await http.post("/_fake/config", json={"no_such_field": 1})
        pending = (await http.post("/_fake/faults", json=[{"kind": "500"}])).json()
        bad_fault = await http.post("/_fake/faults", json=[{"kind": "teapot"}])
        failed = await http.post("/v1/messages", json={"model": "m", "max_tokens": 10, "messages": []})
        served = await http.post("/v1/messages", json={"model": "m", "max_tokens": 10, "messages": []})
        stats = (await http.get("/_fake/stats")).json()
        await http.post("/_fake/reset")
        after_reset = (await http.get("/_fake/stats")).json()

    assert (config["reply_tokens"], config["ttft_ms"]) == (3, 0)
    assert bad.status_code == 400
    assert pending == {"pending": 1}
    assert bad_fault.status_code == 400
    assert failed.status_code == 500
    assert failed.json()["error"]["type"] == "api_error"
    assert served.json()["content"][0]["text"] == "".join(reply_tokens(3))
    no_cache = {"cache_read_tokens": 0, "cache_write_tokens": 0}
    assert stats == {"requests": 2, "tokens_emitted": 3, "disconnects": 0, "completed": 1, **no_cache}
    assert after_reset == {"requests": 0, "tokens_emitted": 0, "disconnects": 0, "completed": 0, **no_cache}
    assert fake.state.config.reply_tokens == REPLY_TOKENS


def test_fake_cli_flags_and_defaults():
    parser = argparse.ArgumentParser(prog="avm fake-llm")
    add_arguments(parser)

    defaults = parser.parse_args([])
    custom = parser.parse_args(
        ["--port", "9000", "--ttft-ms", "20", "--tokens-per-second", "2000", "--reply-tokens", "7"]
    )

    assert vars(defaults) == {
        "host": "127.0.0.1",
        "port": 8090,
        "ttft_ms": 500,
        "tokens_per_second": 35,
        "reply_tokens": 200,
        "input_tokens": None,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "no_prompt_cache": False,
        "cache_min_tokens": 1024,
        "stamp_tokens": False,
        "embeddings_api_key": None,
    }
    assert (custom.port, custom.ttft_ms, custom.tokens_per_second, custom.reply_tokens) == (9000, 20, 2000, 7)
