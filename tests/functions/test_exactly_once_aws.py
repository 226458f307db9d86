"""Exactly-once turns on the AWS host (moto): a retried request, a redelivered SQS record, and a
worker dying at each step of a turn. The failure is injected once (``tests/crashes.py``); SQS then
delivers the record again (the test receives it again: the queue's visibility timeout is 0) and
the session must end with the user message once, one reply, the turn terminal, one usage record.
"""

from __future__ import annotations

import asyncio

import pytest
from moto import mock_aws

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.hosts.aws import run_sync
from tests.crashes import AppendCrashingStore, CrashingStore, DyingModel, PollFailingStore
from tests.functions.aws_host import TABLE, aws_host, frame
from tests.functions.conftest import FakeLambdaContext

pytestmark = pytest.mark.aws

CONN = "conn-alice"
REPLY = "one two three four five six seven eight"
LOST_REPLY = "a reply that dies with its worker"  # 7 words: 7 output tokens


@pytest.fixture
def model():
    return ScriptedModelClient(word_delay_s=0.002)


@pytest.fixture
def host(model):
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        host.connect(CONN)
        yield host


def _send(host, img, request_id: str = "req_hi") -> None:
    host.send(CONN, frame("message_send", request_id, imageId=img["imageId"], content="hi"))


def _assert_answered_once(host, img) -> None:
    store = DynamoDbStore(TABLE)
    history = run_sync(store.list_messages(img["sessionId"]))
    assert [m.subtype for m in history] == ["user", "assistant"]
    assert history[1].content[0].text == REPLY
    [usage] = run_sync(store.list_usage("default"))
    assert usage.status == "completed"
    assert run_sync(store.get_turn(usage.turnId)).status == "completed"
    types = [f["type"] for f in host.session_events(CONN)]
    assert types[-1] == "conversation_end"
    # one completed end; an attempt that died before it was closed as interrupted (no splice)
    assert _ends(host.session_events(CONN))[-1:] == ["completed"] and set(
        _ends(host.session_events(CONN))[:-1]
    ) <= {"interrupted"}
    assert host.receive() == []  # nothing left in the queue


def test_a_retried_message_send_stores_one_message_and_runs_one_turn(host, model):
    img = host.image(CONN)
    _send(host, img, "req_same")
    _send(host, img, "req_same")  # the client retried: same requestId
    model.add(REPLY, "a second reply must never be made")

    messages = host.receive()
    assert len(messages) == 1  # one job (the FIFO queue also dedups by turn id)
    assert host.deliver(messages) == {"batchItemFailures": []}

    assert len(model.requests) == 1
    acks = [f for f in host.frames(CONN) if f["type"] == "message_send_response"]
    assert len(acks) == 2 and acks[0]["data"] == acks[1]["data"]  # both answered alike
    _assert_answered_once(host, img)


def test_an_sqs_redelivery_of_a_finished_turn_adds_nothing(host, model):
    img = host.image(CONN)
    _send(host, img)
    model.add(REPLY, "a second reply must never be made")
    worker = host.worker()
    first = host.receive()
    # the worker finished the turn but its acknowledgement was lost: the record is not deleted
    assert worker(host.sqs_event(first), FakeLambdaContext()) == {"batchItemFailures": []}

    again = host.receive()  # SQS delivers the same message again
    assert [m["MessageId"] for m in again] == [m["MessageId"] for m in first]
    assert host.deliver(again, worker) == {"batchItemFailures": []}

    assert len(model.requests) == 1
    _assert_answered_once(host, img)


@pytest.mark.parametrize(
    ("status", "model_calls"),
    [
        pytest.param("running", 1, id="before-the-model-call"),
        pytest.param("completed", 1, id="after-persisting-the-reply-before-the-status-write"),
    ],
)
def test_a_worker_failing_at_a_step_reports_the_record_and_the_redelivery_completes(
    host, model, status, model_calls
):
    img = host.image(CONN)
    _send(host, img)
    model.add(REPLY, "a second reply must never be made")
    store = CrashingStore(DynamoDbStore(TABLE), status=status)
    worker = host.worker(host.runtime(store=store))

    _fails_once_then_is_redelivered(host, worker, store)
    assert len(model.requests) == model_calls
    _assert_answered_once(host, img)


def test_a_worker_dying_after_its_model_call_keeps_that_calls_usage_once_on_redelivery(host, model):
    """The worker dies after the model call (its usage record written at the call's end) and before
    the reply is stored: the redelivery calls the model again, and the first call's record is the
    turn's only one, whole (cache tokens included), the second call adding none. A usage record
    carried by the final turn record instead would lose the first call here (docs/cost.md,
    "Considered, not done")."""
    img = host.image(CONN)
    _send(host, img)
    model.cache_read_tokens = 5
    model.add(LOST_REPLY, REPLY)
    store = AppendCrashingStore(DynamoDbStore(TABLE), key_prefix="result:")
    worker = host.worker(host.runtime(store=store))

    _fails_once_then_is_redelivered(host, worker, store)
    assert len(model.requests) == 2
    _assert_answered_once(host, img)
    [usage] = run_sync(DynamoDbStore(TABLE).list_usage("default"))
    assert (usage.outputTokens, usage.cacheReadTokens) == (7, 5)


def test_a_worker_dying_mid_stream_is_redelivered_and_the_turn_runs_again(host, model):
    """Lambda ends the invocation mid-stream (timeout, out of memory): no batch response at all, so
    SQS redelivers the whole batch once its visibility timeout passes."""
    img = host.image(CONN)
    _send(host, img)
    model.add(REPLY, REPLY)
    dying = DyingModel(model, after_deltas=3)
    worker = host.worker(host.runtime(models=SingleModelResolver(dying)))

    messages = host.receive()
    with pytest.raises(asyncio.CancelledError):
        worker(host.sqs_event(messages), FakeLambdaContext())
    assert [m.subtype for m in run_sync(DynamoDbStore(TABLE).list_messages(img["sessionId"]))] == ["user"]

    host.run_turns(worker)

    assert dying.deaths == 1 and len(model.requests) == 2
    _assert_answered_once(host, img)


def test_a_failing_cancel_poll_does_not_fail_the_turn(host, model):
    img = host.image(CONN)
    _send(host, img)
    model.word_delay_s = 0.01
    model.add(REPLY)
    store = PollFailingStore(DynamoDbStore(TABLE), failures=2)
    worker = host.worker(host.runtime(store=store))  # polls every 20 ms (aws_host.TURNS)

    host.run_turns(worker)

    assert store.remaining == 0 and len(model.requests) == 1
    _assert_answered_once(host, img)


def _ends(events: list[dict]) -> list[str]:
    """The reasons of the turn's ``conversation_end`` frames, in order."""
    return [e["data"]["reason"] for e in events if e["type"] == "conversation_end"]


def _fails_once_then_is_redelivered(host, worker, store) -> None:
    """The worker's first delivery crashes once (reported as the batch's one failure, as the
    event source mapping expects); SQS redelivers the record, which then completes."""
    messages = host.receive()
    response = host.deliver(messages, worker)

    assert response == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    assert store.crashes == 1
    host.run_turns(worker)  # SQS redelivers the failed record
