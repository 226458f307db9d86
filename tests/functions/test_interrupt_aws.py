"""An interrupt on the AWS host: ``agent_interrupt_request`` reaches ``ws_default`` (one Lambda) while
``turn_worker`` (another) streams. The two share nothing in memory: the gateway sets the cancel
mark in DynamoDB and the worker finds it by polling (``cancel_poll_ms``), closes the model stream,
keeps the partial text and bills what was consumed.

The worker runs in a thread with its own event loop (a Lambda of its own); the interrupt is sent
from the test's thread, through the ``$default`` handler, while the worker streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from moto import mock_aws

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.fakellm import FakeLLMServer
from agentvm.hosts.aws import run_sync
from agentvm.runtime import TurnSettings
from functions.turn_worker import app as turn_worker
from tests.crashes import DyingModel
from tests.functions.aws_host import TABLE, aws_host
from tests.functions.conftest import FakeLambdaContext
from tests.integration.test_interrupt_stops_spend import (
    REPLY_TOKENS,
    SLOW,
    check_interrupted_turn,
    resolver_for,
    streamed_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from agentvm.records import TurnRecord

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


# One poll per worker invocation (turns/cancel_poll.py): the turns of a batch share it.

POLL_S = 0.25


def _record_reads(calls: list[tuple[str, str]]) -> object:
    """Records each GetItem and Query on the table's botocore client (shared by the test's "Lambdas")
    as (operation, the keys it names); returns what unregisters the hook."""
    events = DynamoDbStore(TABLE)._m.base._get_connection().connection.client.meta.events

    def record(params: dict, model: object, **_: object) -> None:
        name = model.name  # type: ignore[attr-defined]
        if name == "GetItem":
            calls.append((name, params["Key"]["pk"]["S"] + "/" + params["Key"]["sk"]["S"]))
        elif name == "Query":
            values = params.get("ExpressionAttributeValues", {}).values()
            calls.append((name, " ".join(v["S"] for v in values if "S" in v)))

    events.register("before-parameter-build.dynamodb", record)
    return lambda: events.unregister("before-parameter-build.dynamodb", record)


def _ends(events: list[dict]) -> list[str]:
    return [e["data"]["reason"] for e in events if e["type"] == "conversation_end"]


def test_an_interrupt_stops_exactly_its_turn_in_a_batch_within_the_poll_interval(worker_in_its_own_loop):
    model = ScriptedModelClient([LONG_REPLY] * 3, word_delay_s=0.01)
    conns = ["conn-a", "conn-b", "conn-c"]
    victim = "conn-b"
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model), TurnSettings(flush_s=0.01, cancel_poll_s=POLL_S)))
        imgs = {}
        for conn in conns:
            host.connect(conn)
            imgs[conn] = host.image(conn)
        for conn in conns:
            host.request(conn, "message_send", imageId=imgs[conn]["imageId"], content="Tell me a long story")
        messages = host.receive()
        assert len(messages) == 3  # one worker invocation runs the three turns
        calls: list[tuple[str, str]] = []
        unregister = _record_reads(calls)
        result: dict = {}
        worker = host.worker()
        started = time.monotonic()
        thread = threading.Thread(target=lambda: result.update(host.deliver(messages, worker)))
        thread.start()
        deadline = time.monotonic() + 10
        while any(len(streamed_text(host.session_events(c)).split()) < 5 for c in conns):
            assert time.monotonic() < deadline and thread.is_alive(), "the turns did not stream"
            time.sleep(0.01)

        host.request(victim, "agent_interrupt", imageId=imgs[victim]["imageId"])
        asked = time.monotonic()
        while "interrupted" not in [e["type"] for e in host.session_events(victim)]:
            assert time.monotonic() < deadline, "the interrupt was not seen"
            time.sleep(0.005)
        stopped = time.monotonic() - asked
        thread.join(30)
        elapsed = time.monotonic() - started
        unregister()

        assert not thread.is_alive() and result == {"batchItemFailures": []}
        assert stopped < POLL_S + 0.5  # one poll interval, plus the frame's way out on a busy machine
        assert model.closed_early == 1
        for conn in conns:
            events = host.session_events(conn)
            if conn == victim:
                check_interrupted_turn([e["type"] for e in events], events)
                assert len(streamed_text(events).split()) < REPLY_TOKENS
            else:
                assert _ends(events) == ["completed"] and streamed_text(events) == LONG_REPLY
        polls = [keys for op, keys in calls if op == "Query" and keys.startswith("POLL#")]
        starts = [keys for op, keys in calls if op == "GetItem" and "/CANCEL#" in keys]
        assert len(set(polls)) == 1  # the invocation's one poller, for all its turns
        assert 1 <= len(polls) <= elapsed / POLL_S + 1  # one read per interval, not one per turn
        assert len(starts) == 3  # each turn's own mark, once, when it starts


def test_an_interrupt_before_the_turn_starts_stops_it_before_the_model_is_called():
    """The race's first half, driven deterministically: the interrupt reads the turn record while
    it is still queued (so marks no poller); the turn's check after its running write sees it."""
    model = ScriptedModelClient([LONG_REPLY])
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        host.connect(CONN)
        img = host.image(CONN)
        host.request(CONN, "message_send", imageId=img["imageId"], content="Tell me a long story")

        host.request(CONN, "agent_interrupt", imageId=img["imageId"])
        host.run_turns()

        assert model.requests == []
        assert _ends(host.session_events(CONN)) == ["interrupted"]


def test_an_interrupt_racing_the_running_write_is_seen_by_the_turns_start_check(worker_in_its_own_loop):
    """The interrupt arrives just before the worker's running write: its read of the turn record
    names no poller, and no poll would ever see it; the strongly consistent check after the write does."""
    with _interrupt_around_the_running_write(after_the_write=False) as (store, model, host):
        assert store.interrupted == 1
        assert run_sync(DynamoDbStore(TABLE).cancel_requests(store.poller)) == set()  # no poller mark
        assert model.requests == []
        assert _ends(host.session_events(CONN)) == ["interrupted"]


def test_a_redelivered_turn_sees_an_interrupt_sent_to_the_attempt_that_died():
    """The first attempt dies mid-stream (its running record names its poller, which nobody polls
    any more); the interrupt marks that poller; the redelivery (a new invocation, a new poller)
    starts cancelled."""
    model = ScriptedModelClient([LONG_REPLY, LONG_REPLY], word_delay_s=0.002)
    dying = DyingModel(model, after_deltas=3)
    with mock_aws():
        host = next(aws_host(SingleModelResolver(dying)))
        host.connect(CONN)
        img = host.image(CONN)
        host.request(CONN, "message_send", imageId=img["imageId"], content="Tell me a long story")
        worker = host.worker()
        messages = host.receive()
        with pytest.raises(asyncio.CancelledError):
            worker(host.sqs_event(messages), FakeLambdaContext())
        turn_id = json.loads(messages[0]["Body"])["turnId"]
        first = run_sync(DynamoDbStore(TABLE).get_turn(turn_id))
        assert first.status == "running" and first.poller is not None

        host.request(CONN, "agent_interrupt", imageId=img["imageId"])
        host.run_turns(worker)

        assert run_sync(DynamoDbStore(TABLE).cancel_requests(first.poller)) == {turn_id}  # read by nobody
        assert dying.deaths == 1 and len(model.requests) == 1  # the redelivery never called the model
        assert _ends(host.session_events(CONN))[-1] == "interrupted"
        assert run_sync(DynamoDbStore(TABLE).get_turn(turn_id)).status == "interrupted"


def test_an_interrupt_between_the_running_write_and_the_start_check_marks_the_poller_too(
    worker_in_its_own_loop,
):
    """The race's other order: the interrupt reads the running record (so marks the worker's
    poller); the turn's start check, after it, sees the turn's own mark: it stops either way."""
    with _interrupt_around_the_running_write(after_the_write=True) as (store, model, host):
        assert store.interrupted == 1 and store.poller is not None
        assert len(run_sync(DynamoDbStore(TABLE).cancel_requests(store.poller))) == 1  # the poller's mark
        assert model.requests == []
        assert _ends(host.session_events(CONN)) == ["interrupted"]


@contextlib.contextmanager
def _interrupt_around_the_running_write(
    *, after_the_write: bool
) -> Iterator[tuple[InterruptBeforeRunning, ScriptedModelClient, Any]]:
    """A long turn whose interrupt is sent just before (or just after) its running write; yields
    with moto still up, after the worker ran it."""
    model = ScriptedModelClient([LONG_REPLY], word_delay_s=0.01)
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        host.connect(CONN)
        img = host.image(CONN)
        host.request(CONN, "message_send", imageId=img["imageId"], content="Tell me a long story")
        interrupt = lambda: host.request(CONN, "agent_interrupt", imageId=img["imageId"])  # noqa: E731
        store = InterruptBeforeRunning(DynamoDbStore(TABLE), interrupt, after_the_write=after_the_write)
        host.run_turns(host.worker(host.runtime(store=store)))
        yield store, model, host


class InterruptBeforeRunning:
    """The worker's store; the interrupt (through ``$default``, in another thread: another Lambda)
    is sent just before the turn's running write (or just after it), and the poller id that write
    names is kept."""

    def __init__(
        self, inner: DynamoDbStore, interrupt: Callable[[], object], *, after_the_write: bool = False
    ) -> None:
        self.inner = inner
        self.interrupt = interrupt
        self.after_the_write = after_the_write
        self.interrupted = 0
        self.poller: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def put_turn(self, turn: TurnRecord) -> None:
        due = turn.status == "running" and not self.interrupted
        if due and not self.after_the_write:
            await self._interrupt(turn)
        await self.inner.put_turn(turn)
        if due and self.after_the_write:
            await self._interrupt(turn)

    async def _interrupt(self, turn: TurnRecord) -> None:
        self.interrupted += 1
        self.poller = turn.poller
        await asyncio.to_thread(self.interrupt)
