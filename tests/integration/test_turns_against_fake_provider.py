"""Whole turns through the real Anthropic and OpenAI SDKs against the loopback fake provider."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer, reply_tokens

PROVIDER_KEY = "sk-test-SECRET-do-not-leak-0123456789"


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(
        FakeLLMConfig(ttft_ms=5, tokens_per_second=5000, reply_tokens=12, input_tokens=42)
    ) as server:
        yield server


@pytest.fixture(params=["anthropic", "openai"])
def provider(request, fake, harness):
    fake.reset()
    fake.configure(ttft_ms=5, tokens_per_second=5000, reply_tokens=12, input_tokens=42)
    settings = Settings(
        _env_file=None,
        anthropic_api_key=SecretStr(PROVIDER_KEY),
        anthropic_base_url=fake.base_url,
        openai_api_key=SecretStr(PROVIDER_KEY),
        openai_base_url=fake.openai_base_url,
        provider_retry_base_ms=10,
        provider_max_attempts=3,
    )
    harness.rt.models = SettingsModelResolver(settings)
    return {"anthropic": "anthropic/claude-haiku-4-5", "openai": "openai/gpt-4o-mini"}[request.param]


async def _image(harness, model):
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A", "model": model}))["record"]
    await c.subscribe(img["sessionId"])
    return c, img


def _types(c):
    return [f["type"] for f in c.session_events()]


async def test_turn_streams_text_and_records_provider_usage(harness, provider, fake):
    c, img = await _image(harness, provider)
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()
    assert _types(c)[-3:] == ["message_stop", "assistant_message", "conversation_end"]
    text = "".join(f["data"]["text"] for f in c.session_events() if f["type"] == "text_delta")
    assert text == "".join(reply_tokens(12))
    usage = (await harness.store.list_usage("tenant-a"))[0]
    assert (usage.inputTokens, usage.outputTokens, usage.model) == (42, 12, provider)


async def test_rate_limit_then_success_completes_the_turn(harness, provider, fake):
    c, img = await _image(harness, provider)
    fake.add_faults([{"kind": "429", "retry_after": 0.01}])
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()
    assert _types(c)[-1] == "conversation_end"
    assert fake.stats()["requests"] == 2


async def test_server_error_surfaces_as_error_events_and_session_stays_usable(
    harness, provider, fake, caplog
):
    c, img = await _image(harness, provider)
    fake.add_faults([{"kind": "500"}] * 3)
    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()
    # two retries announced (AVM_PROVIDER_MAX_ATTEMPTS: 3), then the error
    assert _types(c) == ["model_retry", "model_retry", "error_message", "error_occurred"]
    retries = [e["data"] for e in c.session_events() if e["type"] == "model_retry"]
    assert [(r["attempt"], r["reason"]) for r in retries] == [(2, "unavailable"), (3, "unavailable")]
    occurred = c.session_events()[-1]["data"]
    assert occurred["code"] == "provider_unavailable" and occurred["recoverable"] is True
    await c.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    assert _types(c)[-1] == "conversation_end"
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "error", "user", "assistant"]
    everything = repr(c.frames) + caplog.text
    assert PROVIDER_KEY not in everything
