"""Metrics: what AgentVM counts for the ``Metrics`` port each host implements (``ports.observability``).

The core reports three things, each once, never per text delta (a counter increment at most):

- a **request** (``record_request``): every ``/v1`` HTTP request and every WebSocket frame the
  gateway handles (requests, ``subscribe``, ``auth``), with its tenant (None: not authenticated)
  and its error code (None: it succeeded);
- a **turn** (``record_turn``): each attempt of a turn that ran, when it ends or suspends: its
  status, tokens in and out, time to first token, duration, tool calls and failures, error code,
  and an estimated token cost (``estimated_cost_usd``);
- a **connection** opened or closed (the AWS host's ``$connect``/``$disconnect``; the local host
  reads its live connections instead).

Hosts: the local host keeps Prometheus counters and histograms in process
(``adapters/local/prometheus_metrics.py``, exposition and JSON at ``/v1/metrics``); the AWS host
writes one CloudWatch EMF line per event (``adapters/aws/cloudwatch/emf_metrics.py``): CloudWatch turns them
into the dashboard's metrics, and ``/v1/metrics`` reads a tenant's figures back from the same
lines with CloudWatch Logs Insights. Recording never raises into the request or turn it measures.

Tenancy: every tenant-scoped figure carries its tenant; ``view(tenant_id=...)`` answers one
tenant's figures only, ``view(tenant_id=None)`` (platform admins) every tenant's and the
process-wide ones (connections without a tenant, queue, dead letters). Container, session and
turn ids are never labels or dimensions (each distinct value would be a new series, and on AWS a
billed metric): they ride along as properties of the EMF line.

The estimated cost is tokens times the model's list price (``DASHBOARD_PRICES`` in
``observability/pricing.py``, input and output, kept equal to billing's price library), an
estimate for dashboards, not a bill: the bill is the usage records (``/v1/usage``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agentvm.ports.observability import MetricsQuery, TurnFigures

if TYPE_CHECKING:
    from agentvm.agent.loop import TurnOutcome
    from agentvm.ports.observability import Transport, TurnStatus
    from agentvm.records import TurnJob
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.metrics")

ACTIVE_WINDOW_S = 900  # a container is active if one of its turns ran in the last 15 minutes (local)

# USD per million tokens (input, output) of a model billing has no price for: a Haiku-class model
# (COST_MODEL.md's reference price), so that an unknown model shows on the dashboard; the test
# models (echo, scripted) cost nothing.
DEFAULT_PRICE = (1.0, 5.0)
_FREE = ("echo/", "scripted/")


def estimated_cost_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    """Tokens times the model's list price (``observability/pricing.py``'s ``DASHBOARD_PRICES``,
    kept equal to the price library's without importing it on the turn path; without the cache
    discounts): an estimate for dashboards, not the bill."""
    if model.startswith(_FREE):
        return 0.0
    from agentvm.observability.pricing import estimate_price

    price_in, price_out = estimate_price(model) or DEFAULT_PRICE
    return (input_tokens * price_in + output_tokens * price_out) / 1e6


class NoMetrics:
    """A runtime that keeps no figures (tests, tools): records nothing, shows zeros."""

    host = "none"

    def request(self, tenant_id: str | None, transport: Transport, error_code: str | None) -> None:
        pass

    def turn(self, figures: TurnFigures) -> None:
        pass

    def connection(self, tenant_id: str | None, *, opened: bool) -> None:
        pass

    async def view(self, query: MetricsQuery) -> dict[str, Any]:
        return empty_view(query, host=self.host)

    def exposition(self, tenant_id: str | None) -> tuple[bytes, str] | None:
        return None


def empty_view(query: MetricsQuery, *, host: str) -> dict[str, Any]:
    """The JSON shape of ``/v1/metrics``, every figure zero (or null where the host cannot know)."""
    return {
        "scope": "platform" if query.tenant_id is None else "tenant",
        "tenantId": query.tenant_id,
        "host": host,
        "since": query.since_ms,
        "until": query.until_ms,
        "requests": {"total": 0, "errors": 0, "successRate": None, "byTransport": {}},
        "turns": {"total": 0, "errors": 0, "byStatus": {}},
        "tokens": {"input": 0, "output": 0},
        "estimatedCostUsd": 0.0,
        "timeToFirstTokenMs": {"count": 0, "p50": None, "p95": None, "p99": None},
        "turnDurationMs": {"count": 0, "p50": None, "p95": None, "p99": None},
        "errors": {"byCode": {}},
        "tools": {"calls": 0, "failures": 0},
        "connections": {"active": None, "opened": None, "closed": None},
        "containers": {"active": None, "windowS": None},
        "queue": {"depth": None, "oldestAgeS": None, "deadLetters": None},
    }


def success_rate(total: int, errors: int) -> float | None:
    return None if total <= 0 else round((total - errors) / total, 6)


def record_request(rt: Runtime, tenant_id: str | None, transport: Transport, error_code: str | None) -> None:
    """Count one request; never raises (observability must not fail what it observes)."""
    try:
        rt.metrics.request(tenant_id, transport, error_code)
    except Exception as exc:
        log.warning("a request was not counted", extra={"error": type(exc).__name__})


def record_connection(rt: Runtime, tenant_id: str | None, *, opened: bool) -> None:
    """Count a connection opened or closed; never raises."""
    try:
        rt.metrics.connection(tenant_id, opened=opened)
    except Exception as exc:
        log.warning("a connection was not counted", extra={"error": type(exc).__name__})


def turn_status(outcome: TurnOutcome) -> TurnStatus:
    if outcome.suspended:
        return "suspended"
    if outcome.interrupted:
        return "interrupted"
    return "failed" if outcome.error is not None else "completed"


def turn_line(outcome: TurnOutcome, duration_s: float) -> dict[str, Any]:
    """What the worker's ``turn finished`` line says when no EMF document was recorded (metrics
    other than CloudWatch's), under the document's names."""
    figures: dict[str, Any] = {
        "model": outcome.model,
        "status": turn_status(outcome),
        "InputTokens": outcome.input_tokens,
        "OutputTokens": outcome.output_tokens,
        "TurnDurationMs": round(duration_s * 1000, 1),
    }
    if outcome.error is not None:
        figures["ErrorCode"] = outcome.error.code
    return figures


def record_turn(
    rt: Runtime,
    job: TurnJob,
    outcome: TurnOutcome,
    *,
    model: str,
    duration_s: float,
    tool_calls: int,
    tool_failures: int,
) -> None:
    """Count one attempt of a turn; never raises."""
    try:
        status = turn_status(outcome)
        rt.metrics.turn(
            TurnFigures(
                tenant_id=job.tenantId,
                container_id=job.containerId,
                session_id=job.sessionId,
                turn_id=job.turnId,
                model=model or outcome.model,
                status=status,
                error_code=outcome.error.code if status == "failed" and outcome.error is not None else None,
                input_tokens=outcome.input_tokens,
                output_tokens=outcome.output_tokens,
                ttft_s=outcome.ttft_s,
                duration_s=duration_s,
                tool_calls=tool_calls,
                tool_failures=tool_failures,
                estimated_cost_usd=estimated_cost_usd(
                    model or outcome.model, outcome.input_tokens, outcome.output_tokens
                ),
            )
        )
    except Exception as exc:
        log.warning("a turn was not counted", extra={"turn_id": job.turnId, "error": type(exc).__name__})


__all__ = [
    "ACTIVE_WINDOW_S",
    "DEFAULT_PRICE",
    "NoMetrics",
    "empty_view",
    "estimated_cost_usd",
    "record_connection",
    "record_request",
    "record_turn",
    "success_rate",
    "turn_line",
    "turn_status",
]
