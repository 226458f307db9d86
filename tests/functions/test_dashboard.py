"""The CloudWatch dashboard in template.yaml plots what the code emits: every AgentVM metric on it
is one of ``emf_metrics.CATALOGUE`` with exactly its dimensions (and values the code writes), every
catalogued metric is on it, and the AWS metrics it adds (queues, Lambda) name the stack's own
resources. ``tests/unit/adapters/test_emf_metrics.py`` holds the catalogue to the lines actually written."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agentvm.adapters.aws.cloudwatch.emf_metrics import CATALOGUE, MARK, CloudWatchMetrics
from agentvm.ports import TurnFigures

SUBSTITUTION = re.compile(r"\$\{([A-Za-z0-9:.]+)\}")


@pytest.fixture(scope="module")
def dashboard(template) -> dict[str, Any]:
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    refs: set[str] = set()

    def placeholder(match: re.Match[str]) -> str:
        refs.add(match.group(1))
        return f"<{match.group(1)}>"

    parsed = json.loads(SUBSTITUTION.sub(placeholder, body))
    parsed["refs"] = refs
    return parsed


def plotted(dashboard: dict[str, Any]) -> list[tuple[str, str, dict[str, str], dict[str, Any]]]:
    """(namespace, metric, dimensions, options) of every metric line of every metric widget."""
    out = []
    for widget in dashboard["widgets"]:
        for line in widget["properties"].get("metrics", []):
            if isinstance(line[0], dict):
                continue  # a metric math expression
            options = line[-1] if isinstance(line[-1], dict) else {}
            fields = [f for f in line if not isinstance(f, dict)]
            namespace, metric, *pairs = fields
            assert len(pairs) % 2 == 0, line
            out.append((namespace, metric, dict(zip(pairs[::2], pairs[1::2], strict=True)), options))
    return out


def expressions(dashboard: dict[str, Any]) -> list[str]:
    return [
        line[0]["expression"]
        for widget in dashboard["widgets"]
        for line in widget["properties"].get("metrics", [])
        if isinstance(line[0], dict)
    ]


def test_every_agentvm_metric_on_the_dashboard_is_emitted_with_its_dimensions(dashboard, template):
    namespace = template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"]
    service = template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    ours = [p for p in plotted(dashboard) if p[0] == namespace]
    assert ours
    for _, metric, dimensions, _ in ours:
        assert metric in CATALOGUE, metric
        assert tuple(sorted(dimensions)) == tuple(sorted(CATALOGUE[metric][1])), metric
        assert dimensions["service"] == service == CloudWatchMetrics().service
        if "Transport" in dimensions:
            assert dimensions["Transport"] in ("ws", "http")
    # the errors-by-code graph searches the Errors metric under its own dimension set
    (search,) = [e for e in expressions(dashboard) if e.startswith("SEARCH(")]
    keys = re.search(r"\{([^}]*)\}", search).group(1).split(",")
    assert keys[0] == namespace and tuple(keys[1:]) == CATALOGUE["Errors"][1]
    assert 'MetricName="Errors"' in search


def test_every_metric_the_code_emits_is_on_the_dashboard(dashboard):
    shown = {metric for namespace, metric, _, _ in plotted(dashboard) if namespace == "AgentVM"}
    shown |= {"Errors"} if any('MetricName="Errors"' in e for e in expressions(dashboard)) else set()
    assert set(CATALOGUE) <= shown
    # and what a run writes is catalogued (names and dimensions) in the first place
    lines: list[str] = []
    metrics = CloudWatchMetrics(write=lines.append)
    metrics.request("acme", "ws", "not_found")
    metrics.turn(TurnFigures("acme", "c", "s", "t", "m", "failed", "turn_timeout", 1, 2, 0.1, 1.0, 1, 1, 0.0))
    metrics.connection("acme", opened=True)
    metrics.connection("acme", opened=False)
    written = {
        m["Name"]: tuple(dims)
        for line in map(json.loads, lines)
        for d in line["_aws"]["CloudWatchMetrics"]
        for dims in d["Dimensions"]
        for m in d["Metrics"]
    }
    assert written == {name: dims for name, (_, dims) in CATALOGUE.items()}


def test_the_dashboard_shows_the_stacks_queues_lambdas_cost_and_active_containers(
    dashboard, template, functions
):
    by_namespace: dict[str, set[tuple[str, str]]] = {}
    for namespace, metric, dimensions, options in plotted(dashboard):
        for value in dimensions.values():
            by_namespace.setdefault(namespace, set()).add((metric, value))
        if metric in ("TimeToFirstTokenMs", "TurnDurationMs"):
            assert options["stat"] in ("p50", "p95", "p99")
    sqs = by_namespace["AWS/SQS"]
    assert ("ApproximateNumberOfMessagesVisible", "<TurnDeadLetterQueue.QueueName>") in sqs  # DLQ depth
    assert ("ApproximateNumberOfMessagesVisible", "<TurnQueue.QueueName>") in sqs
    assert ("ApproximateAgeOfOldestMessage", "<TurnQueue.QueueName>") in sqs
    logical_ids = {
        name: logical
        for logical, r in template["Resources"].items()
        if r["Type"] == "AWS::Serverless::Function"
        for name in [r["Properties"]["CodeUri"].rstrip("/").rsplit("/", 1)[-1]]
    }
    assert set(logical_ids) == set(functions)
    for metric in ("Errors", "Throttles", "Duration"):
        assert {v for m, v in by_namespace["AWS/Lambda"] if m == metric} == {
            f"<{logical}>" for logical in logical_ids.values()
        }, metric
    percentiles = {
        (metric, options["stat"])
        for _, metric, _, options in plotted(dashboard)
        if metric in ("TimeToFirstTokenMs", "TurnDurationMs")
    }
    assert percentiles == {
        (m, f"p{q}") for m in ("TimeToFirstTokenMs", "TurnDurationMs") for q in (50, 95, 99)
    }
    assert ("EstimatedCostUSD", "agentvm") in by_namespace["AgentVM"]
    # active containers: a Logs Insights widget over the functions' group, on the turn lines' fields
    (log_widget,) = [w for w in dashboard["widgets"] if w["type"] == "log"]
    query = log_widget["properties"]["query"]
    assert query.startswith("SOURCE '<LogGroup>'") and f'{MARK} = "turn"' in query
    assert "count_distinct(container_id)" in query
    for ref in dashboard["refs"]:
        name = ref.split(".")[0]
        assert name.startswith("AWS::") or name in template["Resources"], ref
