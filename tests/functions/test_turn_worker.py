"""The turn worker: SQS FIFO batches of turn jobs, partial failures, per-turn metrics and logs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentvm.adapters.aws.sqs_queue import job_from_body
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.hosts.aws import run_sync
from agentvm.messages import UserMessage
from agentvm.records import ContainerRecord, ImageRecord, SessionRecord, TurnRecord
from functions.turn_worker.app import build_handler

if TYPE_CHECKING:
    from agentvm.records import TurnJob
    from agentvm.runtime import Runtime

TURN_EVENTS = [
    "message_persisted",
    "message_start",
    "conversation_start",
    "text_delta",
    "conversation_responding",
    "text_delta",
    "message_stop",
    "assistant_message",
    "conversation_end",
]


def _jobs(event: dict[str, Any]) -> list[TurnJob]:
    return [job_from_body(r["body"]) for r in event["Records"]]


def _seed(rt: Runtime, job: TurnJob, subscriber: str) -> None:
    """What ws_default did before enqueueing ``job``: the image, its session, the user message."""
    now = rt.clock.now_ms()
    store = rt.store
    container = ContainerRecord(
        tenantId=job.tenantId, containerId=job.containerId, createdAt=now, updatedAt=now
    )
    run_sync(store.put_container(container))
    if run_sync(store.get_image(job.tenantId, job.imageId)) is None:
        ids = {"tenantId": job.tenantId, "containerId": job.containerId, "createdAt": now, "updatedAt": now}
        image = ImageRecord(
            **ids, imageId=job.imageId, sessionId=job.sessionId, name="Helper", agentId=job.agentId
        )
        run_sync(
            store.create_image(image, SessionRecord(**ids, sessionId=job.sessionId, imageId=job.imageId))
        )
    user = UserMessage(id=job.userMessageId, timestamp=now, content=f"question {job.requestId}")
    run_sync(store.append_message(job.sessionId, user, idempotency_key=f"req:{job.requestId}"))
    run_sync(
        store.put_turn(TurnRecord(turnId=job.turnId, sessionId=job.sessionId, status="queued", updatedAt=now))
    )
    run_sync(rt.connections.subscribe(subscriber, job.sessionId))


def _seed_batch(rt, connect, event) -> dict[str, str]:
    """Seed every job of ``event``; one subscriber connection per session. Returns session -> conn."""
    subscribers: dict[str, str] = {}
    for job in _jobs(event):
        conn = subscribers.setdefault(job.sessionId, connect(f"conn-{len(subscribers) + 1}"))
        _seed(rt, job, conn)
    return subscribers


def _turn_frames(push, turn_id: str) -> list[dict[str, Any]]:
    return [f for _, f in push.posts if f.get("context", {}).get("turnId") == turn_id]


def _emf(stdout: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [line for line in lines if "_aws" in line]


def test_single_job_streams_the_turn_to_the_session_subscribers(
    rt, push, model, connect, load_event, context
):
    event = load_event("sqs-turn-job.json")
    (job,) = _jobs(event)
    subscribers = _seed_batch(rt, connect, event)
    model.add("Hi there friend")

    assert build_handler(rt)(event, context) == {"batchItemFailures": []}

    frames = push.frames(subscribers[job.sessionId])
    assert [f["type"] for f in frames] == TURN_EVENTS
    assert "".join(f["data"]["text"] for f in frames if f["type"] == "text_delta") == "Hi there friend"
    assert {f["context"]["turnId"] for f in frames} == {job.turnId}
    assert run_sync(rt.store.get_turn(job.turnId)).status == "completed"
    (usage,) = run_sync(rt.store.list_usage(job.tenantId))
    assert (usage.turnId, usage.outputTokens) == (job.turnId, 3)


def test_redelivered_job_does_nothing(rt, push, model, connect, load_event, context):
    event = load_event("sqs-turn-job.json")
    _seed_batch(rt, connect, event)
    handler = build_handler(rt)
    handler(event, context)
    posts, requests = len(push.posts), len(model.requests)
    # SQS delivers at least once: the same record again (e.g. the first ack was lost).
    assert handler(event, context) == {"batchItemFailures": []}
    assert (len(push.posts), len(model.requests)) == (posts, requests)


def test_sessions_run_concurrently_and_each_session_in_queue_order(
    rt, push, model, connect, load_event, context
):
    event = load_event("sqs-turn-job-batch.json")
    a1, b1, a2 = _jobs(event)
    _seed_batch(rt, connect, event)
    model.word_delay_s = 0.02  # each turn streams for ~0.1 s, long enough to overlap
    model.add("one two three four five", "one two three four five", "one two three four five")

    assert build_handler(rt)(event, context) == {"batchItemFailures": []}

    order = [(f["context"]["turnId"], f["type"]) for _, f in push.posts if "turnId" in f.get("context", {})]
    # session B started while session A's first turn was still streaming: they share the wait
    assert order.index((b1.turnId, "message_start")) < order.index((a1.turnId, "conversation_end"))
    # session A's second turn started after its first ended, and saw the first one's reply
    assert order.index((a1.turnId, "conversation_end")) < order.index((a2.turnId, "message_start"))
    (a2_request,) = [r for r in model.requests if r.messages[-1].text == f"question {a2.requestId}"]
    assert [m.role for m in a2_request.messages] == ["user", "assistant", "user"]
    for job in (a1, b1, a2):
        assert [f["type"] for f in _turn_frames(push, job.turnId)] == TURN_EVENTS


class _FailingStore(SqliteStore):
    """A store whose reads of one turn fail, as DynamoDB might after botocore's retries."""

    fail_turn: str = ""

    async def get_turn(self, turn_id: str):
        if turn_id == self.fail_turn:
            raise RuntimeError("ProvisionedThroughputExceededException")
        return await super().get_turn(turn_id)


def _failing_rt(rt: Runtime, turn_id: str) -> Runtime:
    store = _FailingStore(":memory:")
    store.fail_turn = turn_id
    rt.store = store
    return rt


def test_failed_record_fails_its_sessions_later_records_and_nothing_else(
    rt, push, model, connect, load_event, context, capsys
):
    event = load_event("sqs-turn-job-batch.json")
    a1, b1, a2 = _jobs(event)
    rt = _failing_rt(rt, a1.turnId)
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics

    rt.metrics = CloudWatchMetrics()
    _seed_batch(rt, connect, event)
    model.add("only session b runs")

    response = build_handler(rt)(event, context)

    ids = {job.turnId: r["messageId"] for job, r in zip((a1, b1, a2), event["Records"], strict=True)}
    # A1 failed; A2 is reported too, unrun, so SQS redelivers it after A1 (FIFO order holds).
    # B1 succeeded and is not reported, so it is deleted and never runs again.
    assert response == {
        "batchItemFailures": [{"itemIdentifier": ids[a1.turnId]}, {"itemIdentifier": ids[a2.turnId]}]
    }
    assert [r.messages[-1].text for r in model.requests] == [f"question {b1.requestId}"]
    assert run_sync(rt.store.get_turn(a2.turnId)).status == "queued"
    assert run_sync(rt.store.get_turn(b1.turnId)).status == "completed"
    assert _turn_frames(push, a1.turnId) == [] and _turn_frames(push, a2.turnId) == []
    # no line took the failed attempt's document: it was written on its own, not lost
    (failed,) = [m for m in _emf(capsys.readouterr().out) if m.get("turn_id") == a1.turnId]
    assert (failed["Turns"], failed["TurnErrors"], failed["ErrorCode"]) == (1, 1, "internal_error")
    assert "message" not in failed


def test_poison_body_fails_only_its_session(rt, push, model, connect, load_event, context):
    event = load_event("sqs-turn-job-batch.json")
    a1, b1, a2 = _jobs(event)
    _seed_batch(rt, connect, event)
    event["Records"][0]["body"] = '{"not": "a turn job"}'
    model.add("b runs")

    response = build_handler(rt)(event, context)

    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {event["Records"][0]["messageId"], event["Records"][2]["messageId"]}
    assert run_sync(rt.store.get_turn(b1.turnId)).status == "completed"


def test_every_record_failing_is_reported_not_raised(rt, connect, load_event, context):
    event = load_event("sqs-turn-job.json")
    event["Records"][0]["body"] = "not json"
    response = build_handler(rt)(event, context)
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}


def test_each_turn_finished_line_is_its_one_emf_document_with_ids_as_properties(
    rt, model, connect, load_event, context, capsys, powertools_logs
):
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics

    rt.metrics = CloudWatchMetrics(namespace="AgentVMTest")  # writes to stdout, as on Lambda
    event = load_event("sqs-turn-job-batch.json")
    jobs = _jobs(event)
    _seed_batch(rt, connect, event)
    model.add("a b c", "d e", "f")

    build_handler(rt)(event, context)

    # On Lambda the Powertools lines and the printed ones both go to stdout: one document per turn
    # in all, and it is the turn's `turn finished` line (one line where there were two).
    documents = _emf(capsys.readouterr().out) + _emf(powertools_logs.getvalue())
    assert sorted(m["turn_id"] for m in documents) == sorted(job.turnId for job in jobs)
    blobs = {m["turn_id"]: m for m in documents}
    for job in jobs:
        blob = blobs[job.turnId]
        assert (blob["message"], blob["level"], blob["avm_metric"]) == ("turn finished", "INFO", "turn")
        assert blob["function_request_id"] == context.aws_request_id  # beside Lambda's REPORT line
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "AgentVMTest"
        names = {m["Name"] for m in directive["Metrics"]}
        assert names == {
            "Turns",
            "TurnErrors",
            "InputTokens",
            "OutputTokens",
            "EstimatedCostUSD",
            "TimeToFirstTokenMs",
            "TurnDurationMs",
            "ToolCalls",
            "ToolFailures",
        }
        # ids are properties, never dimensions (the service is the only one)
        assert directive["Dimensions"] == [["service"]] and blob["service"] == "agentvm"
        assert (blob["Turns"], blob["TurnErrors"], blob["status"]) == (1, 0, "completed")
        assert (blob["session_id"], blob["tenant_id"], blob["container_id"]) == (
            job.sessionId,
            job.tenantId,
            job.containerId,
        )
        assert blob["TurnDurationMs"] >= blob["TimeToFirstTokenMs"] >= 0
    assert sorted(blobs[job.turnId]["OutputTokens"] for job in jobs) == [1, 2, 3]


def test_without_info_lines_each_turn_still_writes_its_emf_document(
    rt, model, connect, load_event, context, capsys, powertools_logs
):
    from agentvm.adapters.aws.cloudwatch.emf_metrics import CloudWatchMetrics
    from functions.turn_worker.app import logger

    rt.metrics = CloudWatchMetrics()
    event = load_event("sqs-turn-job-batch.json")
    jobs = _jobs(event)
    _seed_batch(rt, connect, event)
    model.add("a", "b", "c")
    level = logger.log_level
    logger.setLevel("WARNING")  # AVM_LOG_LEVEL=WARNING: no `turn finished` line to carry it
    try:
        build_handler(rt)(event, context)
    finally:
        logger.setLevel(level)
    assert _emf(powertools_logs.getvalue()) == []
    documents = _emf(capsys.readouterr().out)
    assert sorted(m["turn_id"] for m in documents) == sorted(job.turnId for job in jobs)
    assert all(m["Turns"] == 1 and "message" not in m for m in documents)


def test_turn_logs_carry_their_own_session_and_turn_ids(
    rt, model, connect, load_event, context, powertools_logs, parse_json_lines
):
    event = load_event("sqs-turn-job-batch.json")
    jobs = _jobs(event)
    _seed_batch(rt, connect, event)
    model.word_delay_s = 0.01  # concurrent turns: task-local keys must not leak between them
    model.add("x y", "x y", "x y")

    build_handler(rt)(event, context)

    finished = [x for x in parse_json_lines(powertools_logs.getvalue()) if x["message"] == "turn finished"]
    assert {(x["session_id"], x["turn_id"]) for x in finished} == {(j.sessionId, j.turnId) for j in jobs}
    assert all((x["OutputTokens"], x["status"]) == (2, "completed") for x in finished)
