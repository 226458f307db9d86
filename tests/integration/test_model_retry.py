"""A provider that answers 429 or 529 first: the waiting client is told (``model_retry``) before the
reply, through a real ``avm serve`` whose Anthropic provider is ``avm fake-llm`` (the official SDK
speaks to it unchanged), read with the typed SDK and shown by ``avm chat`` in a pseudo-terminal."""

from __future__ import annotations

import contextlib

import pytest

from agentvm.client import AgentVMClient, ModelRetryEvent, TextDeltaEvent, parse_frame
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer, reply_tokens
from tests.integration.avm_process import avm_serve, base_env, free_port
from tests.integration.test_chat import Terminal

PROVIDER_KEY = "sk-ant-test-retry-key-0123456789"
MODEL = "anthropic/claude-haiku-4-5"


@pytest.fixture(scope="module")
def fake():
    with FakeLLMServer(FakeLLMConfig(ttft_ms=5, tokens_per_second=2000, reply_tokens=6)) as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory, fake):
    env = base_env(
        ANTHROPIC_API_KEY=PROVIDER_KEY,
        ANTHROPIC_BASE_URL=fake.base_url,
        AVM_PROVIDER_RETRY_BASE_MS="10",
        AVM_FLUSH_MS="10",
    )
    with avm_serve(tmp_path_factory.mktemp("server"), free_port(), env=env) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_faults_left(fake):
    fake.reset()


async def test_a_rate_limited_call_is_announced_before_the_reply(server, fake):
    fake.add_faults([{"kind": "429", "retry_after": 0.3}])
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("u", model=MODEL)
        events = [event async for event in client.send(image.imageId, "Hi")]

    [retry] = [e for e in events if isinstance(e, ModelRetryEvent)]
    assert (retry.data.attempt, retry.data.reason) == (2, "rate_limited")
    assert retry.data.delayMs >= 300  # the provider's Retry-After, never less
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDeltaEvent))
    assert events.index(retry) < first_text
    assert "".join(e.data.text for e in events if isinstance(e, TextDeltaEvent)) == "".join(reply_tokens(6))
    assert fake.stats()["requests"] == 2
    assert PROVIDER_KEY not in retry.model_dump_json() and "exceeded" not in retry.model_dump_json()


async def test_a_resumed_client_is_sent_the_finished_turns_retry_with_its_seq(server, fake):
    """Like ``tool_progress``, a retry is a numbered frame of the turn: a client that reconnects
    after the turn gets it again from the frame map, in its place."""
    fake.add_faults([{"kind": "overloaded"}, {"kind": "overloaded"}])
    async with AgentVMClient.connect(server.url, token=server.admin_token()) as client:
        image = await client.create_image("u", model=MODEL)
        live = [event async for event in client.send(image.imageId, "Hi")]
    live_retries = [(e.seq, e.data.attempt, e.data.reason) for e in live if isinstance(e, ModelRetryEvent)]
    assert [(a, r) for _, a, r in live_retries] == [(2, "overloaded"), (3, "overloaded")]

    async with AgentVMClient.connect(server.url, token=server.admin_token()) as other:
        await other.subscribe(image.sessionId, after_seq=0)
        replayed = [parse_frame(frame) async for frame in other.turn_events(timeout=10)]
    again = [(e.seq, e.data.attempt, e.data.reason) for e in replayed if isinstance(e, ModelRetryEvent)]
    assert again == live_retries


@contextlib.contextmanager
def chat(*args: str):
    term = Terminal(["chat", *args], base_env(NO_COLOR="1"))
    try:
        yield term
    finally:
        term.close()


def test_chat_shows_a_dim_retry_line_then_the_reply(server, fake):
    with chat("--url", server.url, "--key", server.admin_token(), "--container", "c1", "--model", MODEL) as t:
        t.expect("you> ")
        fake.add_faults([{"kind": "429", "retry_after": 1}])
        t.line("Hello")
        t.expect(r"\[retry\] provider busy \(rate limited\), retrying in 1s \(attempt 2\)\n")
        t.expect(r"\[waiting for the model…\]\r\x1b\[K" + "".join(reply_tokens(6)) + r"\n")
        t.expect("you> ")
