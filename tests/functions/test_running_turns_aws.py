"""Running turns on the AWS host (moto), through the real handlers: ``message_send`` to ``ws_default``
marks the turn, ``GET /v1/turns`` on ``http_api`` lists it, ``POST /v1/turns/{turnId}/cancel`` on
``http_api`` stops it while ``turn_worker`` (its own Lambda, in a thread with its own loop: nothing
in memory is shared) streams it. The worker finds the turn's cancel mark by polling, closes the
model stream, keeps the partial reply, ends the turn interrupted and unmarks it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.hosts.aws import run_sync
from agentvm.runtime import TurnSettings
from functions.turn_worker import app as turn_worker
from tests.functions.aws_stack import TABLE, Stack, lambda_sqs_event, moto_resources

pytestmark = pytest.mark.aws

CONN = "conn-1"
LONG = " ".join(f"w{i}" for i in range(400))


@pytest.fixture
def worker_in_its_own_loop(monkeypatch):
    """The worker's handler runs its batch on a loop of its thread, as another Lambda would."""
    monkeypatch.setattr(turn_worker, "run_sync", lambda coro: asyncio.run(coro))


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        stack = Stack(resources, context, push, turns=TurnSettings(flush_s=0.01, cancel_poll_s=0.02))
        stack.model.word_delay_s = 0.01
        yield stack


@pytest.fixture
def tokens(stack) -> dict[str, str]:
    out = {t: stack.new_key(t, "admin") for t in ("acme", "globex")}
    stack.connect(CONN, headers={"Authorization": f"Bearer {out['acme']}"})
    return out


def _image(stack) -> dict[str, Any]:
    config = {"name": "A", "model": "anthropic/claude-haiku-4-5"}
    return stack.request(CONN, "image_create", "img", containerId="user-alice", config=config)["record"]


def _worker_thread(stack) -> tuple[threading.Thread, dict[str, Any]]:
    """Receive the queued jobs and run them in the worker, on a thread (another Lambda)."""
    sqs, url = stack.resources.sqs, stack.resources.queue_url
    received = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    result: dict[str, Any] = {}
    event = lambda_sqs_event(received, stack.resources.queue_arn)
    thread = threading.Thread(target=lambda: result.update(stack.worker(event, stack.context)))
    thread.start()
    return thread, result


def _streamed(push) -> str:
    return "".join(f["data"]["text"] for f in push.frames(CONN) if f.get("type") == "text_delta")


def test_a_long_turn_is_listed_and_cancelled_over_http_and_ends_interrupted_with_its_partial_reply(
    stack, tokens, push, worker_in_its_own_loop
):
    img = _image(stack)
    stack.model.add(LONG)
    assert "code" not in stack.request(
        CONN, "message_send", "send", imageId=img["imageId"], content="a story"
    )
    status, listed = stack.http("GET", "/v1/turns", tokens["acme"])
    assert status == 200
    [queued] = listed["turns"]
    assert (queued["status"], queued["model"], queued["containerId"]) == (
        "queued",
        "anthropic/claude-haiku-4-5",
        "user-alice",
    )

    thread, result = _worker_thread(stack)
    deadline = time.monotonic() + 10
    while len(_streamed(push).split()) < 5:
        assert time.monotonic() < deadline and thread.is_alive(), "the turn did not stream"
        time.sleep(0.01)
    status, running = stack.http("GET", "/v1/turns?status=running", tokens["acme"])
    assert status == 200 and [t["turnId"] for t in running["turns"]] == [queued["turnId"]]
    assert "streamingOutputTokens" not in running["turns"][0]  # the worker is another Lambda
    # another tenant can neither see nor stop it
    assert stack.http("GET", "/v1/turns", tokens["globex"]) == (200, {"turns": []})
    foreign = stack.http("POST", f"/v1/turns/{queued['turnId']}/cancel", tokens["globex"])
    assert foreign[0] == 404 and foreign[1]["error"]["code"] == "not_found"

    status, cancelled = stack.http("POST", f"/v1/turns/{queued['turnId']}/cancel", tokens["acme"])

    assert (status, cancelled) == (200, {"turnId": queued["turnId"], "status": "running"})
    thread.join(10)
    assert not thread.is_alive() and result == {"batchItemFailures": []}
    assert stack.model.closed_early == 1  # the worker closed the model stream
    store = DynamoDbStore(TABLE)
    assert run_sync(store.get_turn(queued["turnId"])).status == "interrupted"
    history = stack.request(CONN, "image_messages", "history", imageId=img["imageId"])["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant"]
    partial = history[1]["content"][0]["text"]
    assert partial == _streamed(push) and 5 <= len(partial.split()) < 400
    [usage] = run_sync(store.list_usage("acme"))
    assert usage.status == "interrupted" and usage.outputTokens == len(partial.split())
    assert stack.http("GET", "/v1/turns", tokens["acme"]) == (200, {"turns": []})  # the worker unmarked it


def test_a_queued_turn_cancelled_over_http_ends_interrupted_without_calling_the_model(stack, tokens):
    img = _image(stack)
    stack.request(CONN, "message_send", "send", imageId=img["imageId"], content="never mind")
    status, body = stack.http("POST", "/v1/turns/cancel", tokens["acme"], {"containerId": "user-alice"})
    assert status == 200 and [t["status"] for t in body["cancelled"]] == ["queued"]

    stack.run_turns()

    assert stack.model.requests == []
    turn = run_sync(DynamoDbStore(TABLE).get_turn(body["cancelled"][0]["turnId"]))
    assert turn.status == "interrupted"
    assert stack.http("GET", "/v1/turns", tokens["acme"]) == (200, {"turns": []})
