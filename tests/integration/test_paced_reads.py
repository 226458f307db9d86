"""Model streams read once per flush window on the local host (agent/pacing.py), through the real
Anthropic and OpenAI SDKs on the lean transport, against the fake provider.

Pacing must change nothing a client sees but when the frames after the first are read: the whole
reply arrives, the first delta goes out at once, and the provider's socket is read about once per
window instead of once per token.
"""

from __future__ import annotations

import dataclasses

import pytest

from agentvm.adapters.llm.anthropic import AnthropicModelClient
from agentvm.adapters.llm.openai import OpenAIModelClient
from agentvm.adapters.llm.scripted import SingleModelResolver
from agentvm.adapters.llm.transport import ProviderTransport
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer, reply_tokens

TOKENS = 100
TOKENS_PER_SECOND = 200  # a 0.5 s reply
FLUSH_S = 0.1


@pytest.fixture(scope="module")
def fake():
    config = FakeLLMConfig(ttft_ms=5, tokens_per_second=TOKENS_PER_SECOND, reply_tokens=TOKENS)
    with FakeLLMServer(config) as server:
        yield server


def _client(provider: str, fake: FakeLLMServer, transport: ProviderTransport):
    import httpx2

    http_client = httpx2.AsyncClient(transport=transport, timeout=10)
    if provider == "anthropic":
        return AnthropicModelClient("sk-test", fake.base_url, 10, http_client=http_client)
    return OpenAIModelClient("sk-test", fake.openai_base_url, 10, http_client=http_client)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("paced", [True, False], ids=["paced", "unpaced"])
async def test_a_paced_turn_reads_once_per_window_and_loses_nothing(harness, fake, provider, paced):
    transport = ProviderTransport()
    harness.rt.models = SingleModelResolver(_client(provider, fake, transport))
    harness.rt.turns = dataclasses.replace(harness.rt.turns, flush_s=FLUSH_S, pace_reads=paced)
    c = await harness.client()
    img = (await c.request("image_create", containerId="u", config={"name": "A"}))["record"]
    await c.subscribe(img["sessionId"])

    await c.request("message_send", imageId=img["imageId"], content="Hi")
    await harness.run_turns()

    events = c.session_events()
    texts = [f["data"]["text"] for f in events if f["type"] == "text_delta"]
    assert "".join(texts) == "".join(reply_tokens(TOKENS))
    assert [f["type"] for f in events][-3:] == ["message_stop", "assistant_message", "conversation_end"]
    assert len(texts[0].split()) == 1  # the first token went out alone, at once
    if paced:
        # about two reads per window (the token that starts it, then the rest just before it ends),
        # a few more when a busy loop makes a read land late: far fewer than the tokens
        assert transport.body_reads < TOKENS / 3
    else:
        assert transport.body_reads > TOKENS / 2  # a read per token (or two)
