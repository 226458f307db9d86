"""Token budgets enforced during a turn on the AWS host (moto): the real handlers, each built by
``aws_runtime`` + ``aws_security`` (budgets and counters on the DynamoDB table), budgets set through
the HTTP API. The worker computes the turn's allowance from DynamoDB when the turn starts and cuts
the model stream once the output crosses it; the partial reply is kept, the turn ends with
``quota_exceeded``, and its tokens are added to the counters of the scopes with a budget (none
without: the budget views then show the usage sums; a new budget is seeded from them).

The local twin is ``tests/unit/security/test_budgets.py`` (refusal before a turn on AWS: ``test_ws_auth.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.hosts.aws import run_sync
from tests.crashes import AppendCrashingStore
from tests.functions.aws_stack import REGION, TABLE, Stack, lambda_sqs_event, moto_resources

pytestmark = pytest.mark.aws

CONN = "conn-1"
TEN_WORDS = "one two three four five six seven eight nine ten"


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


NEXT_DAY = ms(2026, 1, 16)  # the stack's clock starts at 2026-01-15 12:00 UTC


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


@pytest.fixture
def admin(stack) -> str:
    token = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {token}"})
    return token


def _put_budget(stack, admin: str, scope: str, **limits: int | None) -> None:
    path = "/v1/budgets/tenant" if scope == "tenant" else f"/v1/budgets/containers/{scope}"
    status, body = stack.http("PUT", path, admin, {"daily_tokens": None, "monthly_tokens": None, **limits})
    assert status == 200, body


def _counters(stack, admin: str, scope: str) -> dict[str, Any]:
    path = "/v1/budgets/tenant" if scope == "tenant" else f"/v1/budgets/containers/{scope}"
    status, body = stack.http("GET", path, admin)
    assert status == 200
    return body["usage"]


def _image(stack, container: str = "c1", request_id: str = "img") -> dict[str, Any]:
    return stack.request(CONN, "image_create", request_id, containerId=container, config={"name": "A"})[
        "record"
    ]


def _send(stack, img, content: str, request_id: str) -> dict[str, Any]:
    return stack.request(CONN, "message_send", request_id, imageId=img["imageId"], content=content)


def _session_events(push) -> list[dict[str, Any]]:
    return [f for f in push.frames(CONN) if f.get("source") == "agent"]


def _history(stack, img) -> list[dict[str, Any]]:
    return stack.request(CONN, "image_messages", "history", imageId=img["imageId"])["messages"]


def _queue_is_empty(stack) -> bool:
    resources = stack.resources
    return resources.sqs.receive_message(QueueUrl=resources.queue_url).get("Messages") is None


@pytest.mark.parametrize("scope", ["c1", "tenant"], ids=["container-budget", "tenant-budget"])
def test_the_stream_is_cut_when_the_budget_is_crossed_and_the_partial_reply_is_kept(
    stack, admin, push, scope
):
    img = _image(stack)
    _put_budget(stack, admin, scope, daily_tokens=5)
    stack.model.add(TEN_WORDS)
    assert "code" not in _send(stack, img, "hi", "r1")  # nothing used yet: accepted and queued

    stack.run_turns()

    events = _session_events(push)
    types = [e["type"] for e in events]
    assert types[-3:] == ["assistant_message", "error_message", "error_occurred"]
    assert "conversation_end" not in types
    streamed = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
    assert streamed == "one two three four five six"  # the crossing delta is delivered, then the cut
    assert events[-3]["data"]["content"] == [{"type": "text", "text": streamed}]
    who = "container" if scope == "c1" else "tenant"
    assert events[-2]["data"]["errorCode"] == events[-1]["data"]["code"] == "quota_exceeded"
    message = events[-1]["data"]["message"]
    assert f"the {who}'s daily token budget of 5 tokens is used up" in message
    assert "2026-01-16T00:00:00Z" in message
    assert stack.model.closed_early == 1  # the provider stream was closed
    assert len(stack.model.requests) == 1

    history = _history(stack, img)
    assert [m["subtype"] for m in history] == ["user", "assistant", "error"]
    assert history[1]["content"] == [{"type": "text", "text": streamed}]
    assert history[2]["errorCode"] == "quota_exceeded"

    # the usage record: the tokens actually received, and the input estimated (chars/4 of "hi")
    [usage] = run_sync(DynamoDbStore(TABLE).list_usage("acme"))
    assert (usage.outputTokens, usage.inputTokens, usage.estimated, usage.status) == (6, 1, True, "failed")
    assert (usage.containerId, usage.imageId, usage.sessionId) == ("c1", img["imageId"], img["sessionId"])
    assert run_sync(DynamoDbStore(TABLE).get_turn(usage.turnId)).status == "failed"
    status, listed = stack.http("GET", "/v1/usage", admin)
    assert status == 200 and listed["totals"] == {
        "turns": 1,
        "inputTokens": 1,
        "outputTokens": 6,
        "totalTokens": 7,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
        "cacheSavings": 0.0,
        "savedInputTokens": 0,
        "savedOutputTokens": 0,
        "replyCacheSavings": 0.0,
    }
    # the counters: the turn's 7 tokens on the tenant and on its container, day and month
    for counted in ("tenant", "c1"):
        u = _counters(stack, admin, counted)
        assert (u["day"], u["month"], u["dayResetAt"]) == (7, 7, NEXT_DAY)
    assert _counters(stack, admin, "c2")["month"] == 0

    # and the next message is refused up front, with what it needs to wait for
    refused = stack.send(
        CONN,
        {
            "type": "message_send_request",
            "data": {"imageId": img["imageId"], "content": "more", "requestId": "r2"},
        },
    )
    (response,) = [f for f in refused if f["type"] == "message_send_response"]
    assert response["data"]["code"] == "quota_exceeded"
    assert (response["data"]["limit"], response["data"]["resetAt"]) == (5, NEXT_DAY)
    assert len(_history(stack, img)) == 3 and _queue_is_empty(stack)


def test_a_reply_within_the_budget_is_not_cut_and_is_counted(stack, admin, push):
    img = _image(stack)
    _put_budget(stack, admin, "c1", daily_tokens=100)
    stack.model.add("a b c")
    _send(stack, img, "four words right here", "r1")

    stack.run_turns()

    events = _session_events(push)
    assert events[-1]["type"] == "conversation_end" and events[-1]["data"] == {"reason": "completed"}
    assert stack.model.closed_early == 0
    [usage] = run_sync(DynamoDbStore(TABLE).list_usage("acme"))
    # the scripted model reports its usage at the end: input = the words of the request
    assert (usage.inputTokens, usage.outputTokens, usage.estimated, usage.status) == (
        4,
        3,
        False,
        "completed",
    )
    for counted in ("tenant", "c1"):
        assert _counters(stack, admin, counted)["day"] == 7


def test_a_container_budget_cuts_only_that_containers_turns(stack, admin, push):
    limited = _image(stack, "c1", "img1")
    other = _image(stack, "c2", "img2")
    _put_budget(stack, admin, "c1", daily_tokens=3)
    stack.model.add(TEN_WORDS, TEN_WORDS)
    _send(stack, limited, "hi", "r1")
    _send(stack, other, "hi", "r2")

    stack.run_turns()  # one batch: two sessions, run concurrently by the worker

    replies = {
        img["containerId"]: [m for m in _history(stack, img) if m["subtype"] != "user"]
        for img in (limited, other)
    }
    assert [m["subtype"] for m in replies["c1"]] == ["assistant", "error"]
    assert replies["c1"][0]["content"] == [{"type": "text", "text": "one two three four"}]
    assert [m["subtype"] for m in replies["c2"]] == ["assistant"]
    assert replies["c2"][0]["content"] == [{"type": "text", "text": TEN_WORDS}]
    assert _counters(stack, admin, "c1")["day"] == 4 + 1  # 4 output (the crossing one), 1 estimated input
    assert _counters(stack, admin, "c2")["day"] == 10 + 1  # the scripted model's own count: "hi"
    assert _counters(stack, admin, "tenant")["day"] == 5 + 11


def test_a_queued_turn_finding_the_budget_used_up_never_calls_the_model(stack, admin, push):
    img = _image(stack)
    _put_budget(stack, admin, "tenant", daily_tokens=8)
    stack.model.add(TEN_WORDS, "never sent")
    assert "code" not in _send(stack, img, "first", "r1")
    assert "code" not in _send(stack, img, "second", "r2")  # accepted: nothing used yet

    stack.run_turns()  # one batch: the session's two turns, in order

    assert len(stack.model.requests) == 1
    types = [e["type"] for e in _session_events(push)]
    assert types[-2:] == ["error_message", "error_occurred"] and types.count("assistant_message") == 1
    history = _history(stack, img)
    assert [m["subtype"] for m in history] == ["user", "user", "assistant", "error", "error"]
    assert [m.get("errorCode") for m in history[3:]] == ["quota_exceeded", "quota_exceeded"]
    assert history[2]["content"] == [{"type": "text", "text": "one two three four five six seven eight nine"}]
    usage = run_sync(DynamoDbStore(TABLE).list_usage("acme"))
    assert sorted((u.inputTokens, u.outputTokens, u.status) for u in usage) == [
        (0, 0, "failed"),  # refused before the provider was called: nothing billed
        (2, 9, "failed"),  # "first" estimated as 2 tokens, 9 deltas received
    ]
    assert _counters(stack, admin, "tenant")["day"] == 11


def test_a_redelivered_turn_adds_to_the_counters_what_its_usage_record_bills(stack, admin):
    img = _image(stack)
    stack.model.add("a b c", "a b c")
    _send(stack, img, "four words right here", "r1")
    worker_rt = stack.runtimes["turn_worker"]
    # the reply's write fails once (DynamoDB throttling that outlived botocore's retries): after the
    # usage record and the counters were written
    failing = AppendCrashingStore(worker_rt.store, key_prefix="result:")
    worker_rt.store = failing

    sqs, url = stack.resources.sqs, stack.resources.queue_url
    received = sqs.receive_message(QueueUrl=url, AttributeNames=["All"], MessageAttributeNames=["All"])[
        "Messages"
    ]
    event = lambda_sqs_event(received, stack.resources.queue_arn)
    answer = stack.worker(event, stack.context)
    assert answer == {"batchItemFailures": [{"itemIdentifier": received[0]["MessageId"]}]}
    assert failing.crashes == 1
    # the record's visibility timeout passes
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"], VisibilityTimeout=0
    )
    stack.run_turns()  # SQS redelivers the failed record; the turn runs again and completes

    assert len(stack.model.requests) == 2  # the reply was never stored: the turn ran again
    assert [m["subtype"] for m in _history(stack, img)] == ["user", "assistant"]
    [usage] = run_sync(DynamoDbStore(TABLE).list_usage("acme"))  # first write wins: one record
    billed = usage.inputTokens + usage.outputTokens
    for counted in ("tenant", "c1"):  # the counters must agree with what the usage record bills
        assert _counters(stack, admin, counted)["day"] == billed


def _budget_counter_items(stack) -> list[dict[str, Any]]:
    """The table's token-usage counter items (``COUNTER#usage#...``): one per scope and month."""
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=TABLE)["Items"]
    return [item for item in items if item["pk"]["S"].startswith("COUNTER#usage#")]


def test_turns_of_a_tenant_without_budgets_write_no_budget_counters_and_its_usage_shows_from_the_sums(
    stack, admin, push
):
    img = _image(stack)
    stack.model.add("a b c", "d e")
    _send(stack, img, "four words right here", "r1")
    stack.run_turns()
    _send(stack, img, "two words", "r2")
    stack.run_turns()

    assert _budget_counter_items(stack) == []  # no counter write for scopes without a budget
    # the budget views keep their shape: the usage comes from the usage sums, equal to the records
    records = run_sync(DynamoDbStore(TABLE).list_usage("acme"))
    used = sum(r.inputTokens + r.outputTokens for r in records)
    assert len(records) == 2 and used > 7
    for scope in ("tenant", "c1"):
        u = _counters(stack, admin, scope)
        assert (u["day"], u["month"], u["dayResetAt"]) == (used, used, NEXT_DAY)
    assert _counters(stack, admin, "c2")["month"] == 0


def test_a_budget_set_after_usage_is_seeded_from_the_sums_and_enforced(stack, admin, push):
    img = _image(stack)
    stack.model.add("a b c", TEN_WORDS)
    _send(stack, img, "four words right here", "r1")  # 7 tokens before any budget
    stack.run_turns()
    assert _budget_counter_items(stack) == []

    _put_budget(stack, admin, "tenant", daily_tokens=10)
    assert [item["pk"]["S"] for item in _budget_counter_items(stack)] == ["COUNTER#usage#2026-01#acme"]
    u = _counters(stack, admin, "tenant")
    assert (u["day"], u["month"]) == (7, 7)  # what was used already counts against the new budget

    _send(stack, img, "hi", "r2")  # 3 tokens left: the reply is cut after the crossing one
    stack.run_turns()
    replies = [m for m in _history(stack, img) if m["subtype"] != "user"]
    assert [m["subtype"] for m in replies] == ["assistant", "assistant", "error"]
    assert replies[1]["content"] == [{"type": "text", "text": "one two three four"}]
    records = run_sync(DynamoDbStore(TABLE).list_usage("acme"))
    [cut] = [r for r in records if r.outputTokens == 4]  # the first turn's reply was 3 tokens
    assert _counters(stack, admin, "tenant")["day"] == 7 + cut.inputTokens + cut.outputTokens
    # the container has no budget: still no counter of its own
    assert len(_budget_counter_items(stack)) == 1
