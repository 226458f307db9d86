"""An interrupt stops the spend: the provider stream is closed (the fake sees the client go and stops
producing tokens), the partial text is kept, the interrupt events are sent, and the usage record
counts only what was consumed. Local host, real SDKs, the fake provider; the AWS host's variant is
``tests/functions/test_interrupt_aws.py``.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from agentvm.adapters.llm.router import SettingsModelResolver
from agentvm.config import Settings
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer

REPLY_TOKENS = 400
SLOW = {"ttft_ms": 5, "tokens_per_second": 100, "reply_tokens": REPLY_TOKENS, "input_tokens": 42}
MODELS = {"anthropic": "anthropic/claude-haiku-4-5", "openai": "openai/gpt-4o-mini"}


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(FakeLLMConfig(**SLOW)) as server:
        yield server


def resolver_for(fake) -> SettingsModelResolver:
    return SettingsModelResolver(
        Settings(
            _env_file=None,
            anthropic_api_key=SecretStr("sk-test"),
            anthropic_base_url=fake.base_url,
            openai_api_key=SecretStr("sk-test"),
            openai_base_url=fake.openai_base_url,
            provider_retry_base_ms=10,
        )
    )


def streamed_text(events) -> str:
    return "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")


async def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def check_interrupted_turn(types: list[str], events: list[dict]) -> None:
    """What the session's subscribers saw: the stream, the interrupt, then the interrupted end."""
    assert types.count("interrupted") == 1 and types.index("interrupted") < types.index("message_stop")
    assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
    assert events[-1]["data"] == {"reason": "interrupted"}
    assert events[-2]["data"]["content"] == [{"type": "text", "text": streamed_text(events)}]


@pytest.mark.parametrize("provider", list(MODELS))
async def test_interrupt_closes_the_provider_stream_and_bills_what_was_consumed(harness, fake, provider):
    fake.reset()
    harness.rt.models = resolver_for(fake)
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A", "model": MODELS[provider]}))[
        "record"
    ]
    await c.subscribe(img["sessionId"])
    await c.request("message_send", imageId=img["imageId"], content="Tell me a long story")
    turns = asyncio.create_task(harness.run_turns())
    await wait_for(lambda: len(streamed_text(c.session_events()).split()) >= 5)

    response = await c.request("agent_interrupt", imageId=img["imageId"])
    await asyncio.wait_for(turns, 10)

    assert "error" not in response and response["imageId"] == img["imageId"]
    # the provider saw the client go (its server notices a moment later) and stopped producing
    await wait_for(lambda: fake.stats()["disconnects"] == 1, timeout=5)
    stats = fake.stats()
    assert stats["disconnects"] == 1 and stats["completed"] == 0
    await asyncio.sleep(0.2)
    assert fake.stats()["tokens_emitted"] == stats["tokens_emitted"] < REPLY_TOKENS
    # the interrupt events, then the partial reply, persisted
    types = [f["type"] for f in c.frames]
    assert "agent_interrupt_response" in types
    events = c.session_events()
    check_interrupted_turn([e["type"] for e in events], events)
    partial = streamed_text(events)
    history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == [{"type": "text", "text": partial}]
    # billed: the tokens received (each fake token is one word), and the input
    [usage] = await harness.store.list_usage("tenant-a")
    assert usage.status == "interrupted" and usage.estimated is True
    assert usage.outputTokens == len(partial.split()) <= stats["tokens_emitted"]
    if provider == "anthropic":
        assert usage.inputTokens == 42  # reported in message_start, before any text
    else:
        assert usage.inputTokens >= 1  # OpenAI reports usage only at the end: estimated (chars/4)
