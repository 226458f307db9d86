"""``GET /v1/metrics``: the figures of ``observability/metrics.py``, as JSON or Prometheus text.

Admin keys only. A tenant's admin sees its own tenant's figures; a platform admin (an admin key of
the platform tenant, or the open dev mode) sees every tenant's and the process-wide ones, or one
tenant's with ``?tenant=``. Any other caller naming a tenant, its own excepted, is ``403``.

Formats: ``?format=json`` (the default) or ``?format=prometheus`` (the text exposition, for a
Prometheus scrape; also chosen by an ``Accept: text/plain`` or OpenMetrics header without
``application/json``). The local host counts since its process started (Prometheus counters);
the AWS host answers JSON only, for a window (``since``/``until``, epoch ms or ISO 8601; default
the last hour), read from its EMF lines with CloudWatch Logs Insights (docs/observability.md).

Also here: ``RequestMetrics``, the middleware that counts every ``/v1`` HTTP request with its
tenant and error code.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.errors import Forbidden, UnsupportedFormat
from agentvm.logs import bind, unbind
from agentvm.observability.metrics import record_request
from agentvm.observability.query import time_range
from agentvm.ports import MetricsQuery

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

HOUR_MS = 3_600_000
MAX_TIME = 64  # epoch ms or ISO 8601 (a date, a time, an offset): anything longer is no time
_EXAMPLE: dict[str, Any] = {
    "scope": "tenant",
    "tenantId": "acme",
    "host": "local",
    "since": 1767225600000,
    "until": 1767229200000,
    "requests": {
        "total": 120,
        "errors": 3,
        "successRate": 0.975,
        "byTransport": {"http": {"total": 20, "errors": 1}, "ws": {"total": 100, "errors": 2}},
    },
    "turns": {"total": 40, "errors": 1, "byStatus": {"completed": 38, "failed": 1, "interrupted": 1}},
    "tokens": {"input": 21000, "output": 8400},
    "estimatedCostUsd": 0.063,
    "timeToFirstTokenMs": {"count": 40, "p50": 480.0, "p95": 1200.0, "p99": 2600.0},
    "turnDurationMs": {"count": 40, "p50": 5200.0, "p95": 9800.0, "p99": 14000.0},
    "errors": {"byCode": {"not_found": 2, "provider_unavailable": 1, "rate_limited": 1}},
    "tools": {"calls": 12, "failures": 1},
    "connections": {"active": 4, "opened": None, "closed": None},
    "containers": {"active": 3, "windowS": 900},
    "queue": {"depth": 0, "oldestAgeS": 0.0, "deadLetters": None},
}
_PROMETHEUS_EXAMPLE = (
    "# HELP avm_turns_total Turn attempts by how they ended\n"
    "# TYPE avm_turns_total counter\n"
    'avm_turns_total{status="completed",tenant="acme"} 38.0\n'
)


class Percentiles(BaseModel):
    count: int
    p50: float | None = Field(description="milliseconds; null with no data")
    p95: float | None
    p99: float | None


class MetricsView(BaseModel):
    """``/v1/metrics`` in JSON. Figures a host cannot know are null (docs/observability.md)."""

    model_config = ConfigDict(json_schema_extra=examples(_EXAMPLE))

    scope: Literal["tenant", "platform"]
    tenantId: str | None = Field(description="the tenant shown; null: every tenant (platform admins)")
    host: str = Field(description="local (counters since the process started) or aws (the window)")
    since: int | None = Field(description="epoch ms: the start of what is counted")
    until: int | None = Field(description="epoch ms: the end of what is counted")
    requests: dict[str, Any] = Field(description="total, errors, successRate (0-1), byTransport")
    turns: dict[str, Any] = Field(description="total, errors, byStatus")
    tokens: dict[str, int] = Field(description="input, output")
    estimatedCostUsd: float = Field(
        description="tokens at list prices; an estimate, not the bill (/v1/usage)"
    )
    timeToFirstTokenMs: Percentiles
    turnDurationMs: Percentiles
    errors: dict[str, Any] = Field(description="byCode: requests' and turns' errors by code")
    tools: dict[str, int] = Field(description="calls, failures")
    connections: dict[str, int | None] = Field(description="active (local), opened and closed (AWS)")
    containers: dict[str, int | None] = Field(description="active: containers with a turn in windowS")
    queue: dict[str, float | int | None] = Field(description="depth, oldestAgeS, deadLetters (platform)")


def _answer() -> dict[int | str, dict[str, Any]]:
    """JSON (nulls kept, ``ok``) or the Prometheus text exposition."""
    answer = ok(200, MetricsView, _EXAMPLE, "the figures, as JSON or as the Prometheus text exposition")
    answer[200]["content"]["text/plain"] = {"schema": {"type": "string"}, "example": _PROMETHEUS_EXAMPLE}
    return answer


router = APIRouter(tags=["observability"])


@router.get(
    "/metrics",
    response_model=None,
    responses={
        **_answer(),
        **error_responses(400, 503),
    },
)
async def metrics(
    request: Request,
    runtime: RuntimeDep,
    caller: Caller,
    format: Literal["json", "prometheus"] | None = Query(  # noqa: A002 (the parameter's name)
        default=None, description="json (default) or prometheus; else chosen by the Accept header"
    ),
    tenant: str | None = Query(
        default=None, min_length=1, max_length=64, description="platform admins: one tenant's figures"
    ),
    since: str | None = Query(
        default=None, max_length=MAX_TIME, description="AWS: epoch ms or ISO 8601; default an hour ago"
    ),
    until: str | None = Query(
        default=None, max_length=MAX_TIME, description="AWS: epoch ms or ISO 8601; default now"
    ),
) -> Any:
    """Requests and their success rate, turns, tokens in and out, estimated token cost, time to
    first token and turn duration (p50/p95/p99), errors by code, tool calls and failures,
    connections, active containers, queue depth and age: the caller's tenant's, or (platform
    admins) every tenant's and the process-wide ones."""
    principal = admin(caller)
    scope = scope_of(runtime, principal, tenant)
    wanted = format or _negotiated(request.headers.get("accept", ""))
    metrics = runtime.metrics
    if wanted == "prometheus":
        if since is not None or until is not None:
            raise UnsupportedFormat("since/until: the Prometheus exposition counts since the process started")
        exposition = metrics.exposition(scope)
        if exposition is None:
            raise UnsupportedFormat(
                f"format=prometheus: the {metrics.host} host answers JSON only (on AWS the same figures "
                "are CloudWatch metrics: see the AgentVM dashboard)"
            )
        body, content_type = exposition
        return Response(body, media_type=content_type)
    if metrics.host == "aws":
        window = time_range(since, until, now_ms=runtime.clock.now_ms(), default_span_ms=HOUR_MS)
        query = MetricsQuery(scope, window.since_ms, window.until_ms)
    elif since is not None or until is not None:
        raise UnsupportedFormat(
            "since/until: the local host's metrics are counters since its process started; "
            "ask without them (or scrape format=prometheus and let Prometheus keep the history)"
        )
    else:
        query = MetricsQuery(scope)
    return await metrics.view(query)


def is_platform_admin(runtime: Runtime, principal: Principal) -> bool:
    """An admin key of the platform tenant, or anyone in the open dev mode (no authenticator)."""
    return runtime.auth is None or (
        principal.allows("admin") and principal.tenant_id == runtime.platform_tenant
    )


def scope_of(runtime: Runtime, principal: Principal, tenant: str | None) -> str | None:
    """The tenant whose figures or lines the caller may see (None: all of them, platform admins)."""
    if is_platform_admin(runtime, principal):
        return tenant
    if tenant is not None and tenant != principal.tenant_id:
        raise Forbidden("only platform admins (an admin key of the platform tenant) may name a tenant")
    return principal.tenant_id


def _negotiated(accept: str) -> Literal["json", "prometheus"]:
    accept = accept.lower()
    if "application/json" not in accept and ("text/plain" in accept or "openmetrics" in accept):
        return "prometheus"
    return "json"


class RequestMetrics:
    """Counts every ``/v1`` HTTP request once it is answered: its tenant (the authenticated
    caller's; None if refused before that) and its error code (read from the error body, which
    is small; None for a success)."""

    _MAX_ERROR_BODY = 8192

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})  # where ``request.state.principal`` lands
        status = 500
        body = bytearray()
        limit = self._MAX_ERROR_BODY

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400 and len(body) < limit:
                body.extend(message.get("body", b"")[: limit - len(body)])
            await send(message)

        ids = bind()  # ``authenticate`` binds the caller's tenant: the request's log lines carry it
        try:
            await self.app(scope, receive, sending)
        finally:
            unbind(ids)
            principal = state.get("principal") if isinstance(state, dict) else None
            tenant = getattr(principal, "tenant_id", None)
            record_request(self.runtime, tenant, "http", None if status < 400 else _error_code(status, body))


def _error_code(status: int, body: bytes | bytearray) -> str:
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = None
    return code if isinstance(code, str) and code else f"http_{status}"


__all__ = ["MetricsView", "RequestMetrics", "is_platform_admin", "router", "scope_of"]
