"""The ``Metrics`` port on CloudWatch: EMF lines out, Logs Insights (and SQS, CloudWatch) back in.

**Recording** writes one CloudWatch Embedded Metric Format line to stdout per request, turn attempt
or connection: Lambda ships stdout to the functions' log group, and CloudWatch extracts the metrics
of ``CATALOGUE`` from it (no ``PutMetricData`` calls: they cost per call). Dimensions are few and
bounded, since each distinct combination is a billed custom metric: ``service`` on every metric,
plus ``Transport`` (http, ws) on requests and ``ErrorCode`` on ``Errors``. Tenant, container,
session, turn and model are *properties* of the line (searchable, never dimensions): per-tenant
dimensions would cost $0.30 per metric per tenant per month, more than the margin on most
tenants' tokens (COST_MODEL.md).

**Carried by a log line**: a document recorded inside ``held()`` (the turn worker's record, around
``process_turn``) waits there; the handler's own line about the same event (``turn finished``)
takes it (``Held.take``) and writes it as its ``extra``: one line is then both the log line and the
EMF document, where two said the same thing (tokens, duration, model, status, ids). CloudWatch
extracts an EMF document from any JSON line with ``_aws`` at its root; the queries of
``/v1/metrics`` find it by ``avm_metric`` as before, and ``/v1/logs`` shows a line with a
``message`` even when it carries a document (``cloudwatch_logs.py``). A document no line took is
written on its own when ``held()`` ends, so none is ever lost.

The lines are written here rather than by Powertools' ``Metrics``: it writes each value as a
one-element array, which Logs Insights sees as ``Name.0``, and it holds one dimension set per
line, where a failed request needs two (its transport's, and its error code's).

**Reading** (``view``) answers ``/v1/metrics`` for a window: three Logs Insights queries over the
same lines (aggregates and percentiles, errors by code, requests by transport), scoped by a
``tenant_id`` filter stage to the caller's tenant; platform admins' queries have no tenant stage,
and they also get the turn queue's depth and dead letters (SQS ``GetQueueAttributes``) and the age
of its oldest job (CloudWatch ``GetMetricData`` on ``AWS/SQS``). Each call scans the window's log
data three times ($0.005 per GB scanned). Active connections are unknown on AWS (API Gateway
publishes no such figure): the view has the connections opened and closed in the window instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.adapters.aws.cloudwatch.logs_insights import quoted
from agentvm.observability.metrics import empty_view, success_rate

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from agentvm.adapters.aws.cloudwatch.logs_insights import LogsInsights
    from agentvm.ports import MetricsQuery, Transport, TurnFigures

SERVICE = ("service",)
# Every metric the code emits: name -> (unit, dimension names). The dashboard (template.yaml) plots
# these, and tests/functions/test_dashboard.py holds the two to each other.
CATALOGUE: dict[str, tuple[str, tuple[str, ...]]] = {
    "Requests": ("Count", ("service", "Transport")),
    "RequestErrors": ("Count", ("service", "Transport")),
    "Errors": ("Count", ("service", "ErrorCode")),
    "Turns": ("Count", SERVICE),
    "TurnErrors": ("Count", SERVICE),
    "InputTokens": ("Count", SERVICE),
    "OutputTokens": ("Count", SERVICE),
    "EstimatedCostUSD": ("None", SERVICE),
    "TimeToFirstTokenMs": ("Milliseconds", SERVICE),
    "TurnDurationMs": ("Milliseconds", SERVICE),
    "ToolCalls": ("Count", SERVICE),
    "ToolFailures": ("Count", SERVICE),
    "ConnectionsOpened": ("Count", SERVICE),
    "ConnectionsClosed": ("Count", SERVICE),
}
MARK = "avm_metric"  # the property that tells these lines apart: request, turn or connection
STATUSES = ("completed", "failed", "interrupted", "suspended")


def _stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@dataclass
class Held:
    """The EMF documents recorded inside one ``held()`` block, each with the writer it was for."""

    documents: list[tuple[dict[str, Any], Callable[[str], None]]] = field(default_factory=list)

    def take(self, kind: str) -> dict[str, Any] | None:
        """The first held document of this kind (``turn``, ``request``, ``connection``), no longer
        held: the caller writes it, as (part of) its log line. None: none was recorded."""
        for i, (document, _) in enumerate(self.documents):
            if document.get(MARK) == kind:
                del self.documents[i]
                return document
        return None

    def for_line(self, kind: str, logger: Any) -> dict[str, Any]:
        """What an INFO line of ``logger`` about this event carries: the held document of this
        kind, taken (``take``), if ``logger`` writes INFO lines; else nothing is taken, and the
        document is written on its own when ``held()`` ends. Empty: nothing to carry."""
        if logger.log_level > logging.INFO:
            return {}
        return self.take(kind) or {}


_HELD: ContextVar[Held | None] = ContextVar("emf_held", default=None)


@contextlib.contextmanager
def held() -> Iterator[Held]:
    """Hold the EMF documents this task records until a log line takes them (``Held.take``); the
    ones left are written on their own when the block ends, raised out of or not."""
    slot = Held()
    token = _HELD.set(slot)
    try:
        yield slot
    finally:
        _HELD.reset(token)
        for document, write in slot.documents:
            write(json.dumps(document, separators=(",", ":")))
        slot.documents.clear()


class CloudWatchMetrics:
    host = "aws"

    def __init__(
        self,
        *,
        namespace: str = "AgentVM",
        service: str = "agentvm",
        insights: LogsInsights | None = None,
        queue_url: str | None = None,
        dead_letter_queue_url: str | None = None,
        sqs_client: Any = None,
        cloudwatch_client: Any = None,
        write: Callable[[str], None] = _stdout,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.namespace = namespace
        self.service = service
        self.insights = insights
        self.queue_url = queue_url
        self.dead_letter_queue_url = dead_letter_queue_url
        self._sqs = sqs_client
        self._cloudwatch = cloudwatch_client
        self._write = write
        self._now_ms = now_ms

    # -- recording: one EMF line each ---------------------------------------------------------------
    def request(self, tenant_id: str | None, transport: Transport, error_code: str | None) -> None:
        values: dict[str, float] = {"Requests": 1, "RequestErrors": int(error_code is not None)}
        properties: dict[str, Any] = {MARK: "request", "Transport": transport}
        if error_code is not None:
            values["Errors"] = 1
            properties["ErrorCode"] = error_code
        self._emit(values, properties, tenant_id)

    def turn(self, figures: TurnFigures) -> None:
        values: dict[str, float] = {
            "Turns": 1,
            "TurnErrors": int(figures.status == "failed"),
            "InputTokens": figures.input_tokens,
            "OutputTokens": figures.output_tokens,
            "EstimatedCostUSD": round(figures.estimated_cost_usd, 9),
            "TurnDurationMs": round(figures.duration_s * 1000, 1),
            "ToolCalls": figures.tool_calls,
            "ToolFailures": figures.tool_failures,
        }
        if figures.ttft_s is not None:
            values["TimeToFirstTokenMs"] = round(figures.ttft_s * 1000, 1)
        properties: dict[str, Any] = {
            MARK: "turn",
            "container_id": figures.container_id,
            "session_id": figures.session_id,
            "turn_id": figures.turn_id,
            "model": figures.model,
            "status": figures.status,
            f"turn_{figures.status}": 1,  # summed by Logs Insights for turns by status
        }
        if figures.error_code is not None:
            values["Errors"] = 1
            properties["ErrorCode"] = figures.error_code
        self._emit(values, properties, figures.tenant_id)

    def connection(self, tenant_id: str | None, *, opened: bool) -> None:
        name = "ConnectionsOpened" if opened else "ConnectionsClosed"
        self._emit({name: 1}, {MARK: "connection"}, tenant_id)

    def _emit(self, values: dict[str, float], properties: dict[str, Any], tenant_id: str | None) -> None:
        line = emf_line(
            values, properties, namespace=self.namespace, service=self.service, now_ms=self._now_ms()
        )
        if tenant_id is not None:
            line["tenant_id"] = tenant_id
        slot = _HELD.get()
        if slot is not None:
            slot.documents.append((line, self._write))  # a log line of the handler's will carry it
            return
        self._write(json.dumps(line, separators=(",", ":")))

    # -- reading ----------------------------------------------------------------------------------
    def exposition(self, tenant_id: str | None) -> None:
        return None  # the same figures are CloudWatch metrics (the dashboard)

    async def view(self, query: MetricsQuery) -> dict[str, Any]:
        out = empty_view(query, host=self.host)
        if self.insights is None:
            raise RuntimeError("this function has no AVM_LOG_GROUP: add it in template.yaml")
        assert query.since_ms is not None and query.until_ms is not None
        since, until = query.since_ms, query.until_ms
        totals, by_code, by_transport = await asyncio.gather(
            self.insights.run(metrics_query(query.tenant_id, since, until, "totals"), since, until),
            self.insights.run(metrics_query(query.tenant_id, since, until, "errors"), since, until),
            self.insights.run(metrics_query(query.tenant_id, since, until, "transports"), since, until),
        )
        fill_view(out, totals, by_code, by_transport)
        if query.tenant_id is None:
            out["queue"] = await asyncio.to_thread(self._queue_figures)
        return out

    def _queue_figures(self) -> dict[str, Any]:
        figures: dict[str, Any] = {"depth": None, "oldestAgeS": None, "deadLetters": None}
        if self._sqs is None and (self.queue_url or self.dead_letter_queue_url):
            import boto3

            self._sqs = boto3.client("sqs")
        for key, url in (("depth", self.queue_url), ("deadLetters", self.dead_letter_queue_url)):
            if url:
                attributes = self._sqs.get_queue_attributes(
                    QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
                )["Attributes"]
                figures[key] = int(attributes.get("ApproximateNumberOfMessages", 0))
        if self.queue_url:
            figures["oldestAgeS"] = self._oldest_age_s(self.queue_url.rstrip("/").rsplit("/", 1)[-1])
        return figures

    def _oldest_age_s(self, queue_name: str) -> float | None:
        """SQS's ApproximateAgeOfOldestMessage (maximum over the last 5 minutes); None: no data."""
        if self._cloudwatch is None:
            import boto3

            self._cloudwatch = boto3.client("cloudwatch")
        now_s = self._now_ms() // 1000
        answer = self._cloudwatch.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": "age",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "AWS/SQS",
                            "MetricName": "ApproximateAgeOfOldestMessage",
                            "Dimensions": [{"Name": "QueueName", "Value": queue_name}],
                        },
                        "Period": 60,
                        "Stat": "Maximum",
                    },
                }
            ],
            StartTime=now_s - 300,
            EndTime=now_s,
            ScanBy="TimestampDescending",
        )
        values = [v for r in answer.get("MetricDataResults", []) for v in r.get("Values", [])]
        return float(values[0]) if values else None


def emf_line(
    values: dict[str, float], properties: dict[str, Any], *, namespace: str, service: str, now_ms: int
) -> dict[str, Any]:
    """An EMF document: ``values`` as metrics (each under its ``CATALOGUE`` dimensions, grouped by
    dimension set), the dimensions' values and ``properties`` as top-level fields."""
    directives: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for name in values:
        unit, dimensions = CATALOGUE[name]
        directives.setdefault(dimensions, []).append({"Name": name, "Unit": unit})
    return {
        "_aws": {
            "Timestamp": now_ms,
            "CloudWatchMetrics": [
                {"Namespace": namespace, "Dimensions": [list(dims)], "Metrics": metrics}
                for dims, metrics in directives.items()
            ],
        },
        "service": service,
        **properties,
        **values,
    }


_TOTALS = ", ".join(
    [
        *(f"sum({m}) as {m}" for m in ("Requests", "RequestErrors", "Turns", "TurnErrors", "InputTokens")),
        *(f"sum({m}) as {m}" for m in ("OutputTokens", "EstimatedCostUSD", "ToolCalls", "ToolFailures")),
        *(f"sum(turn_{s}) as turn_{s}" for s in STATUSES),
        *(f"sum({m}) as {m}" for m in ("ConnectionsOpened", "ConnectionsClosed")),
        *(
            f"{agg} as {name}{suffix}"
            for name in ("TimeToFirstTokenMs", "TurnDurationMs")
            for agg, suffix in (
                (f"count({name})", "Count"),
                (f"pct({name}, 50)", "P50"),
                (f"pct({name}, 95)", "P95"),
                (f"pct({name}, 99)", "P99"),
            )
        ),
        "count_distinct(container_id) as containers",
    ]
)


def metrics_query(tenant_id: str | None, since_ms: int, until_ms: int, kind: str) -> str:
    """The Logs Insights query of one part of the view: ``totals``, ``errors`` or ``transports``.
    The tenant's own stage comes first; platform admins' queries have none."""
    stages = [f"filter ispresent({MARK})"]
    if tenant_id is not None:
        stages.append(f"filter tenant_id = {quoted(tenant_id)}")
    stages.append(f"filter @timestamp >= {int(since_ms)} and @timestamp <= {int(until_ms)}")
    if kind == "totals":
        stages.append(f"stats {_TOTALS}")
    elif kind == "errors":
        stages += ["filter ispresent(ErrorCode)", "stats sum(Errors) as errors by ErrorCode"]
    elif kind == "transports":
        stages += [
            f'filter {MARK} = "request"',
            "stats sum(Requests) as requests, sum(RequestErrors) as errors by Transport",
        ]
    else:
        raise ValueError(f"unknown metrics query: {kind}")
    return "\n| ".join(stages)


def _number(row: dict[str, str], field: str) -> float:
    try:
        return float(row.get(field, "") or 0)
    except ValueError:
        return 0.0


def _optional(row: dict[str, str], field: str) -> float | None:
    value = row.get(field)
    try:
        return None if value in (None, "") else round(float(value), 1)
    except ValueError:
        return None


def fill_view(
    out: dict[str, Any],
    totals: list[dict[str, str]],
    by_code: list[dict[str, str]],
    by_transport: list[dict[str, str]],
) -> None:
    """The Insights rows (strings, as ``GetQueryResults`` returns them) into the view's shape."""
    row = totals[0] if totals else {}

    def n(field: str) -> int:
        return int(_number(row, field))

    transports = {
        r["Transport"]: {"total": int(_number(r, "requests")), "errors": int(_number(r, "errors"))}
        for r in by_transport
        if r.get("Transport")
    }
    out["requests"] = {
        "total": n("Requests"),
        "errors": n("RequestErrors"),
        "successRate": success_rate(n("Requests"), n("RequestErrors")),
        "byTransport": dict(sorted(transports.items())),
    }
    by_status = {s: n(f"turn_{s}") for s in STATUSES if n(f"turn_{s}")}
    out["turns"] = {"total": n("Turns"), "errors": n("TurnErrors"), "byStatus": by_status}
    out["tokens"] = {"input": n("InputTokens"), "output": n("OutputTokens")}
    out["estimatedCostUsd"] = round(_number(row, "EstimatedCostUSD"), 6)
    for name, key in (("TimeToFirstTokenMs", "timeToFirstTokenMs"), ("TurnDurationMs", "turnDurationMs")):
        out[key] = {
            "count": n(f"{name}Count"),
            **{f"p{q}": _optional(row, f"{name}P{q}") for q in (50, 95, 99)},
        }
    out["errors"] = {
        "byCode": dict(
            sorted((r["ErrorCode"], int(_number(r, "errors"))) for r in by_code if r.get("ErrorCode"))
        )
    }
    out["tools"] = {"calls": n("ToolCalls"), "failures": n("ToolFailures")}
    out["connections"] = {"active": None, "opened": n("ConnectionsOpened"), "closed": n("ConnectionsClosed")}
    window_s = None if out["since"] is None or out["until"] is None else (out["until"] - out["since"]) // 1000
    out["containers"] = {"active": n("containers"), "windowS": window_s}


__all__ = ["CATALOGUE", "CloudWatchMetrics", "Held", "emf_line", "fill_view", "held", "metrics_query"]
