"""The AWS host's metrics: the EMF lines each event writes, the Logs Insights queries that read a
tenant's figures back (scoped by a tenant stage of their own), and the mapping of their rows.

moto runs ``StartQuery`` but does not evaluate Insights commands (``filter``, ``stats``): it returns
raw rows. So the queries are checked as strings here, and their result mapping against rows shaped
as ``GetQueryResults`` returns them; ``tests/functions/test_observability_aws.py`` runs the route
through the real HTTP handler on moto."""

from __future__ import annotations

import json
import time

import boto3
import pytest
from moto import mock_aws

from agentvm.adapters.aws.cloudwatch.emf_metrics import (
    CATALOGUE,
    CloudWatchMetrics,
    fill_view,
    held,
    metrics_query,
)
from agentvm.adapters.aws.cloudwatch.logs_insights import LogsInsights, quoted
from agentvm.errors import QueryTimedOut
from agentvm.observability.metrics import empty_view
from agentvm.ports import MetricsQuery, TurnFigures


def figures(**changes) -> TurnFigures:
    base = dict(
        tenant_id="acme",
        container_id="user-alice",
        session_id="sess_1",
        turn_id="turn_1",
        model="anthropic/claude-haiku-4-5",
        status="completed",
        error_code=None,
        input_tokens=500,
        output_tokens=200,
        ttft_s=0.5,
        duration_s=6.0,
        tool_calls=2,
        tool_failures=1,
        estimated_cost_usd=0.0015,
    )
    return TurnFigures(**{**base, **changes})


def lines_of(record) -> list[dict]:
    out: list[str] = []
    metrics = CloudWatchMetrics(namespace="AgentVM", write=out.append, now_ms=lambda: 1_700_000_000_000)
    record(metrics)
    return [json.loads(line) for line in out]


def declared(line: dict) -> dict[str, list[str]]:
    """metric name -> its dimensions, as CloudWatch reads them from the EMF directives."""
    return {
        m["Name"]: dims
        for directive in line["_aws"]["CloudWatchMetrics"]
        for dims in directive["Dimensions"]
        for m in directive["Metrics"]
    }


def test_a_held_document_is_taken_by_a_log_line_or_written_alone_when_none_took_it():
    out: list[str] = []
    metrics = CloudWatchMetrics(write=out.append, now_ms=lambda: 1_700_000_000_000)
    with held() as documents:
        metrics.turn(figures())
        metrics.connection("acme", opened=True)
        assert out == []  # held: a log line may carry them
        taken = documents.take("turn")
        assert documents.take("turn") is None  # taken once
    assert taken is not None and taken["avm_metric"] == "turn" and taken["OutputTokens"] == 200
    (alone,) = [json.loads(line) for line in out]  # the one no line took: written, not lost
    assert alone["ConnectionsOpened"] == 1 and alone["tenant_id"] == "acme"


def test_held_documents_are_written_when_the_work_raises():
    out: list[str] = []
    metrics = CloudWatchMetrics(write=out.append)
    with pytest.raises(RuntimeError), held():
        metrics.turn(figures(status="failed", error_code="internal_error"))
        raise RuntimeError("the attempt failed")
    (line,) = [json.loads(x) for x in out]
    assert (line["TurnErrors"], line["ErrorCode"]) == (1, "internal_error")
    metrics.request("acme", "ws", None)  # outside held(): written at once
    assert len(out) == 2


def test_a_turn_is_one_emf_line_with_ids_as_properties_never_dimensions():
    (line,) = lines_of(lambda m: m.turn(figures()))
    assert line["_aws"]["Timestamp"] == 1_700_000_000_000
    assert set(declared(line)) == {
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
    assert all(dims == ["service"] for dims in declared(line).values())
    # EMF: every metric and dimension is a top-level field with a scalar value
    assert (line["Turns"], line["InputTokens"], line["TimeToFirstTokenMs"], line["TurnDurationMs"]) == (
        1,
        500,
        500.0,
        6000.0,
    )
    assert (line["service"], line["tenant_id"], line["container_id"], line["turn_id"]) == (
        "agentvm",
        "acme",
        "user-alice",
        "turn_1",
    )
    assert line["turn_completed"] == 1 and line["avm_metric"] == "turn"


def test_a_failed_request_adds_its_error_code_dimension_set_in_the_same_line():
    (ok,) = lines_of(lambda m: m.request("acme", "ws", None))
    assert declared(ok) == {"Requests": ["service", "Transport"], "RequestErrors": ["service", "Transport"]}
    assert (ok["Requests"], ok["RequestErrors"], ok["Transport"]) == (1, 0, "ws")
    (failed,) = lines_of(lambda m: m.request(None, "http", "unauthorized"))
    assert declared(failed)["Errors"] == ["service", "ErrorCode"]
    assert (failed["ErrorCode"], failed["RequestErrors"]) == ("unauthorized", 1)
    assert "tenant_id" not in failed  # no tenant: a platform line, never in a tenant's figures
    (turn,) = lines_of(
        lambda m: m.turn(figures(status="failed", error_code="provider_rejected", ttft_s=None))
    )
    assert (turn["TurnErrors"], turn["ErrorCode"], turn["turn_failed"]) == (1, "provider_rejected", 1)
    assert "TimeToFirstTokenMs" not in turn


def test_every_line_declares_only_catalogued_metrics_under_their_catalogued_dimensions():
    lines = lines_of(
        lambda m: (
            m.request("acme", "ws", "not_found"),
            m.turn(figures(status="failed", error_code="turn_timeout")),
            m.connection("acme", opened=True),
            m.connection(None, opened=False),
        )
    )
    seen = {}
    for line in lines:
        for name, dims in declared(line).items():
            assert tuple(dims) == CATALOGUE[name][1], name
            assert isinstance(line[name], int | float)
            assert all(isinstance(line[d], str) for d in dims)
            seen[name] = dims
    assert set(seen) == set(CATALOGUE)


def test_a_tenants_queries_carry_its_own_filter_stage_and_platform_queries_none():
    for kind in ("totals", "errors", "transports"):
        query = metrics_query("acme", 1000, 2000, kind)
        stages = query.split("\n| ")
        assert stages[0] == "filter ispresent(avm_metric)"
        assert stages[1] == 'filter tenant_id = "acme"'
        assert "filter @timestamp >= 1000 and @timestamp <= 2000" in stages
        assert "tenant_id" not in metrics_query(None, 1000, 2000, kind)
    # a value cannot close its string literal, nor start a new stage
    hostile = 'x" or tenant_id != "\n| filter 1 = 1'
    stage = metrics_query(hostile, 0, 1, "totals").split("\n| ")[1]
    assert stage == 'filter tenant_id = "x\\" or tenant_id != \\"| filter 1 = 1"'
    assert quoted('a\\"b') == '"a\\\\\\"b"'


def test_insights_rows_map_onto_the_view():
    query = MetricsQuery("acme", 0, 3_600_000)
    view = empty_view(query, host="aws")
    totals = [
        {
            "Requests": "10",
            "RequestErrors": "2",
            "Turns": "4",
            "TurnErrors": "1",
            "turn_completed": "3",
            "turn_failed": "1",
            "InputTokens": "2000",
            "OutputTokens": "800",
            "EstimatedCostUSD": "0.006",
            "ToolCalls": "5",
            "ToolFailures": "1",
            "TimeToFirstTokenMsCount": "4",
            "TimeToFirstTokenMsP50": "480.5",
            "TimeToFirstTokenMsP95": "900",
            "TimeToFirstTokenMsP99": "990",
            "TurnDurationMsCount": "4",
            "TurnDurationMsP50": "5000",
            "ConnectionsOpened": "2",
            "containers": "3",
        }
    ]
    errors = [{"ErrorCode": "not_found", "errors": "2"}, {"ErrorCode": "provider_rejected", "errors": "1"}]
    transports = [{"Transport": "ws", "requests": "7", "errors": "1"}, {"Transport": "http", "requests": "3"}]
    fill_view(view, totals, errors, transports)
    assert view["requests"] == {
        "total": 10,
        "errors": 2,
        "successRate": 0.8,
        "byTransport": {"http": {"total": 3, "errors": 0}, "ws": {"total": 7, "errors": 1}},
    }
    assert view["turns"] == {"total": 4, "errors": 1, "byStatus": {"completed": 3, "failed": 1}}
    assert view["tokens"] == {"input": 2000, "output": 800} and view["estimatedCostUsd"] == 0.006
    assert view["timeToFirstTokenMs"] == {"count": 4, "p50": 480.5, "p95": 900.0, "p99": 990.0}
    assert view["turnDurationMs"] == {"count": 4, "p50": 5000.0, "p95": None, "p99": None}
    assert view["errors"]["byCode"] == {"not_found": 2, "provider_rejected": 1}
    assert view["connections"] == {"active": None, "opened": 2, "closed": 0}
    assert view["containers"] == {"active": 3, "windowS": 3600}
    empty = empty_view(query, host="aws")
    fill_view(empty, [], [], [])  # no line in the window
    assert empty["requests"]["successRate"] is None and empty["turns"]["total"] == 0


async def test_the_view_runs_three_scoped_queries_and_reads_the_queues_for_platform_admins():
    with mock_aws():
        await _view_on_moto()


async def _view_on_moto() -> None:
    logs = boto3.client("logs", region_name="us-east-1")
    logs.create_log_group(logGroupName="/aws/lambda/agentvm")
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="turns.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq = sqs.create_queue(QueueName="turns-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.send_message(QueueUrl=dlq, MessageBody="{}", MessageGroupId="s", MessageDeduplicationId="1")
    insights = LogsInsights("/aws/lambda/agentvm", poll_s=0.0)
    metrics = CloudWatchMetrics(insights=insights, queue_url=queue, dead_letter_queue_url=dlq)

    tenant = await metrics.view(MetricsQuery("acme", 0, 60_000))
    assert len(insights.queries) == 3 and all('tenant_id = "acme"' in q for q in insights.queries)
    assert tenant["queue"] == {"depth": None, "oldestAgeS": None, "deadLetters": None}  # platform figures
    platform = await metrics.view(MetricsQuery(None, 0, 60_000))
    assert not any("tenant_id" in q for q in insights.queries[3:])
    assert platform["queue"] == {"depth": 0, "oldestAgeS": None, "deadLetters": 1}
    assert metrics.exposition(None) is None


async def test_a_query_that_does_not_finish_in_time_is_stopped_and_answered_503():
    class SlowLogs:
        stopped: list[str] = []

        def start_query(self, **kw):
            return {"queryId": "q1"}

        def get_query_results(self, queryId):  # noqa: N803 (boto3's name)
            return {"status": "Running", "results": []}

        def stop_query(self, queryId):  # noqa: N803
            self.stopped.append(queryId)

    clock = iter(range(0, 1000, 5))
    client = SlowLogs()
    insights = LogsInsights("g", client=client, timeout_s=10, poll_s=0.0, monotonic=lambda: next(clock))
    with pytest.raises(QueryTimedOut) as caught:
        await insights.run("fields @message", 0, 1000)
    assert caught.value.code == "query_timeout" and client.stopped == ["q1"]


async def test_v1_logs_shows_a_line_that_carries_a_document_and_never_a_document_alone():
    with mock_aws():
        from agentvm.adapters.aws.cloudwatch.logs import CloudWatchLogStore
        from agentvm.ports import LogQuery
        from tests.moto_logs import MotoLogShipper

        now = time.time_ns() // 1_000_000  # CloudWatch Logs (and moto) refuse events over 14 days old
        out: list[str] = []
        metrics = CloudWatchMetrics(write=out.append, now_ms=lambda: now)
        with held() as documents:
            metrics.turn(figures())
            carried = documents.take("turn")
        metrics.request("acme", "ws", None)  # a document alone (no log line per frame)
        line = {"level": "INFO", "message": "turn finished", "function_request_id": "r-1", **(carried or {})}
        shipper = MotoLogShipper("/aws/lambda/agentvm-carried")
        shipper.ship(json.dumps(line), now)
        shipper.ship(out[0], now)
        store = CloudWatchLogStore(
            LogsInsights("/aws/lambda/agentvm-carried", poll_s=0.0), now_ms=lambda: now + 1_000
        )

        page = await store.page(LogQuery(tenant_id="acme", since_ms=now - 1_000, until_ms=now + 1_000))

    (shown,) = page.lines
    assert (shown["msg"], shown["turnId"], shown["containerId"]) == ("turn finished", "turn_1", "user-alice")
    assert shown["fields"]["OutputTokens"] == 200 and shown["fields"]["status"] == "completed"
    # the metrics' machinery is not the line's; the tenant's view leaves the platform's keys out
    assert not {"_aws", "avm_metric", "service", "function_request_id"} & set(shown["fields"])
