"""Concurrent messages on one session on the AWS host (moto): queue (default), reject, interrupt, per
image or per request. The local twin is ``tests/unit/turns/test_concurrency_policy.py``.

``ws_default`` (one Lambda) decides the policy from what DynamoDB says about the session's turns;
``turn_worker`` (another) runs the turns SQS delivers, one session's in queue order. For the
running cases the worker runs in a thread with its own event loop, as another Lambda would, while
the test sends through ``$default`` from its own thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.hosts.aws import run_sync
from functions.turn_worker import app as turn_worker
from tests.functions.aws_host import TABLE
from tests.functions.conftest import CONN

pytestmark = pytest.mark.aws

LONG_REPLY = " ".join(f"w{i}" for i in range(200))  # 2 s at 10 ms a word: interrupted long before


@pytest.fixture
def worker_in_its_own_loop(monkeypatch):
    """The worker's handler runs its batch on a loop of its thread, as another Lambda would."""
    monkeypatch.setattr(turn_worker, "run_sync", lambda coro: asyncio.run(coro))


def _image(host, **config: Any) -> dict[str, Any]:
    host.request(CONN, "container_create", containerId="user-alice")
    record = host.request(CONN, "image_create", containerId="user-alice", config={"name": "A", **config})[
        "record"
    ]
    host.send(CONN, {"type": "subscribe", "sessionId": record["sessionId"]})
    return record


def _send(host, img, content: str, **options: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"imageId": img["imageId"], "content": content}
    if options:
        data["options"] = options
    return host.request(CONN, "message_send", **data)


def _history(host, img) -> list[dict[str, Any]]:
    return host.request(CONN, "image_messages", imageId=img["imageId"])["messages"]


def _replies(history) -> list[str]:
    return [m["content"][0]["text"] for m in history if m["subtype"] == "assistant"]


def _ends(host) -> list[str]:
    return [f["data"]["reason"] for f in host.session_events(CONN) if f["type"] == "conversation_end"]


def _streamed_words(host) -> int:
    text = "".join(f["data"]["text"] for f in host.session_events(CONN) if f["type"] == "text_delta")
    return len(text.split())


class _WorkerThread:
    """One worker invocation for ``messages``, on a thread of its own; ``join`` returns its response."""

    def __init__(self, host, messages: list[dict[str, Any]]) -> None:
        self.result: dict[str, Any] = {}
        worker = host.worker()
        self.thread = threading.Thread(target=lambda: self.result.update(host.deliver(messages, worker)))
        self.thread.start()

    def wait_until(self, predicate, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline and self.thread.is_alive(), "the turn did not stream"
            time.sleep(0.01)

    def join(self) -> dict[str, Any]:
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.result


# -- queue ----------------------------------------------------------------------------------------


def test_queue_policy_runs_both_turns_in_order_when_sqs_delivers_them(host, model):
    img = _image(host)  # the image's policy: queue (the default)
    model.add("first", "second")
    assert "error" not in _send(host, img, "one")
    second = _send(host, img, "two")  # the first turn has not run yet
    assert "error" not in second and second["imageId"] == img["imageId"]

    messages = host.receive()  # one batch, as the event source mapping hands it to the worker
    assert len(messages) == 2  # two jobs, one message group: the session
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {img["sessionId"]}
    assert host.deliver(messages) == {"batchItemFailures": []}

    assert [r.messages[-1].text for r in model.requests] == ["one", "two"]
    assert _replies(_history(host, img)) == ["first", "second"]
    assert _ends(host) == ["completed", "completed"]
    texts = [
        f["data"]["content"][0]["text"] for f in host.session_events(CONN) if f["type"] == "assistant_message"
    ]
    assert texts == ["first", "second"]  # the subscriber saw the replies in order
    usage = run_sync(DynamoDbStore(TABLE).list_usage("default"))
    assert [u.status for u in usage] == ["completed", "completed"]
    assert host.receive() == []


# -- reject ---------------------------------------------------------------------------------------


def test_reject_policy_answers_session_busy_while_the_turn_is_queued_and_stores_nothing(host, model):
    img = _image(host, concurrency="reject")
    assert "error" not in _send(host, img, "one")

    busy = _send(host, img, "two")
    assert busy["code"] == "session_busy" and busy["error"]
    errors = [f for f in host.frames(CONN) if f["type"] == "system_error"]
    assert errors[-1]["data"]["details"]["code"] == "session_busy"
    assert [m["subtype"] for m in _history(host, img)] == ["user"]  # "two" was not stored

    model.add("first")
    messages = host.receive()
    assert len(messages) == 1  # nor queued
    host.deliver(messages)
    assert [m["subtype"] for m in _history(host, img)] == ["user", "assistant"]
    assert [r.messages[-1].text for r in model.requests] == ["one"]

    # once the turn ended, the session accepts messages again
    model.add("third")
    assert "error" not in _send(host, img, "three")
    host.run_turns()
    assert _replies(_history(host, img)) == ["first", "third"]


def test_reject_policy_answers_session_busy_while_the_turn_is_running(host, model, worker_in_its_own_loop):
    img = _image(host, concurrency="reject")
    model.word_delay_s = 0.01
    model.add(LONG_REPLY)
    _send(host, img, "one")
    running = _WorkerThread(host, host.receive())
    running.wait_until(lambda: _streamed_words(host) >= 3)

    busy = _send(host, img, "two")
    assert busy["code"] == "session_busy"
    assert running.join() == {"batchItemFailures": []}
    assert _ends(host) == ["completed"] and model.closed_early == 0  # the running turn was not touched
    history = _history(host, img)
    assert [m["subtype"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == [{"type": "text", "text": LONG_REPLY}]
    assert host.receive() == []

    model.word_delay_s = 0
    model.add("done")
    assert "error" not in _send(host, img, "three")
    host.run_turns()
    assert _replies(_history(host, img)) == [LONG_REPLY, "done"]


# -- a request's option beats the image's policy --------------------------------------------------


def test_a_reject_option_overrides_an_image_queue_policy(host, model):
    img = _image(host)  # image policy: queue
    _send(host, img, "one")
    busy = _send(host, img, "two", concurrency="reject")
    assert busy["code"] == "session_busy"
    model.add("first")
    host.run_turns()
    assert [m["subtype"] for m in _history(host, img)] == ["user", "assistant"]


def test_a_queue_option_overrides_an_image_reject_policy(host, model):
    img = _image(host, concurrency="reject")
    _send(host, img, "one")
    queued = _send(host, img, "two", concurrency="queue")
    assert "error" not in queued
    model.add("first", "second")
    host.run_turns()
    assert [r.messages[-1].text for r in model.requests] == ["one", "two"]
    assert _replies(_history(host, img)) == ["first", "second"]


def test_an_unknown_policy_is_a_bad_request_and_stores_nothing(host):
    img = _image(host)
    bad = _send(host, img, "x", concurrency="yolo")
    assert bad["code"] == "bad_request"
    assert _history(host, img) == [] and host.receive() == []


# -- interrupt ------------------------------------------------------------------------------------


def test_interrupt_policy_cancels_the_running_turn_then_runs_the_new_one(host, model, worker_in_its_own_loop):
    img = _image(host, concurrency="interrupt")
    model.word_delay_s = 0.01
    model.add(LONG_REPLY, "fresh answer")
    _send(host, img, "one")
    running = _WorkerThread(host, host.receive())
    running.wait_until(lambda: _streamed_words(host) >= 3)

    second = _send(host, img, "two")  # ws_default sets the cancel mark; the worker polls it

    assert "error" not in second
    assert running.join() == {"batchItemFailures": []}
    assert _ends(host) == ["interrupted"]
    assert model.closed_early == 1  # the worker closed the model stream
    events = host.session_events(CONN)
    partial = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
    assert 3 <= len(partial.split()) < 200 and LONG_REPLY.startswith(partial)
    assert events[-2]["type"] == "assistant_message"
    assert events[-2]["data"]["content"] == [{"type": "text", "text": partial}]

    host.run_turns()  # SQS now delivers the second turn

    assert _ends(host) == ["interrupted", "completed"]
    assert [r.messages[-1].text for r in model.requests] == ["one", "two"]
    assert _replies(_history(host, img)) == [partial, "fresh answer"]
    usage = run_sync(DynamoDbStore(TABLE).list_usage("default"))
    assert [u.status for u in usage] == ["interrupted", "completed"]
    assert usage[0].outputTokens == len(partial.split())
    assert host.receive() == []


def test_interrupt_policy_with_no_turn_running_just_queues_the_message(host, model):
    img = _image(host, concurrency="interrupt")
    model.add("only")
    assert "error" not in _send(host, img, "one")
    host.run_turns()
    assert _ends(host) == ["completed"] and model.closed_early == 0
    assert _replies(_history(host, img)) == ["only"]
