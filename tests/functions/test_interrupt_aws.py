"""An interrupt on the AWS host: ``agent_interrupt_request`` reaches ``ws_default`` (one Lambda) while
``turn_worker`` (another) streams. The two share nothing in memory: the gateway sets the cancel
mark in DynamoDB and the worker finds it by polling (``cancel_poll_ms``), closes the model stream,
keeps the partial text and bills what was consumed.

The worker runs in a thread with its own event loop (a Lambda of its own); the interrupt is sent
from the test's thread, through the ``$default`` handler, while the worker streams.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from moto import mock_aws

from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.fakellm import FakeLLMServer
from agentvm.hosts.aws import run_sync
from functions.turn_worker import app as turn_worker
from tests.functions.aws_host import aws_host
from tests.integration.test_interrupt_stops_spend import (
    REPLY_TOKENS,
    SLOW,
    check_interrupted_turn,
    resolver_for,
    streamed_text,
)

pytestmark = pytest.mark.aws

CONN = "conn-alice"
LONG_REPLY = " ".join(f"w{i}" for i in range(REPLY_TOKENS))


@pytest.fixture
def worker_in_its_own_loop(monkeypatch):
    """The worker's handler runs its batch on a loop of its thread, as another Lambda would."""
    monkeypatch.setattr(turn_worker, "run_sync", lambda coro: asyncio.run(coro))


def _interrupt_mid_stream(host, img) -> dict:
    """Deliver the turn to a worker thread; interrupt once some text arrived. Returns the response."""
    host.request(CONN, "message_send", imageId=img["imageId"], content="Tell me a long story")
    messages = host.receive()
    worker = host.worker()
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(host.deliver(messages, worker)))
    thread.start()
    deadline = time.monotonic() + 10
    while len(streamed_text(host.session_events(CONN)).split()) < 5:
        assert time.monotonic() < deadline and thread.is_alive(), "the turn did not stream"
        time.sleep(0.01)
    response = host.request(CONN, "agent_interrupt", imageId=img["imageId"])
    thread.join(10)
    assert not thread.is_alive()
    assert result == {"batchItemFailures": []}
    return response


def _check_persisted_and_billed(host, img) -> tuple[str, object]:
    events = host.session_events(CONN)
    check_interrupted_turn([e["type"] for e in events], events)
    partial = streamed_text(events)
    history = host.request(CONN, "image_messages", imageId=img["imageId"])["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == [{"type": "text", "text": partial}]
    [usage] = run_sync(host.runtime().store.list_usage("default"))
    assert usage.status == "interrupted" and usage.estimated is True
    assert usage.outputTokens == len(partial.split())
    return partial, usage


def test_interrupt_reaches_the_worker_through_the_cancel_mark(worker_in_its_own_loop):
    model = ScriptedModelClient([LONG_REPLY], word_delay_s=0.01)
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        host.connect(CONN)
        img = host.image(CONN)

        response = _interrupt_mid_stream(host, img)

        assert "error" not in response and response["imageId"] == img["imageId"]
        assert model.closed_early == 1  # the worker closed the model stream
        partial, usage = _check_persisted_and_billed(host, img)
        assert len(partial.split()) < REPLY_TOKENS
        assert usage.inputTokens >= 1  # the scripted model reports no usage up front: estimated


def test_interrupt_on_aws_stops_the_provider_producing(worker_in_its_own_loop):
    with FakeLLMServer() as fake, mock_aws():
        fake.configure(**SLOW)
        # A resolver of its own: its SDK clients live on the worker thread's loop.
        resolver = resolver_for(fake)
        host = next(aws_host(resolver))
        host.connect(CONN)
        img = host.image(CONN, "anthropic/claude-haiku-4-5")

        _interrupt_mid_stream(host, img)

        deadline = time.monotonic() + 5
        while fake.stats()["disconnects"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # the fake's server notices the disconnect a moment later
        stats = fake.stats()
        assert stats["disconnects"] == 1 and stats["completed"] == 0
        time.sleep(0.2)
        assert fake.stats()["tokens_emitted"] == stats["tokens_emitted"] < REPLY_TOKENS
        _, usage = _check_persisted_and_billed(host, img)
        assert usage.inputTokens == 42 and usage.outputTokens <= stats["tokens_emitted"]
