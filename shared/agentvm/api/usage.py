"""Usage reports over HTTP: ``/v1/usage/summary`` (``agentvm.observability.usage``).

Admin keys. A tenant's admin sees its own tenant's usage; a platform admin (an admin key of the
platform tenant, or anyone in the open dev mode) names any tenant with ``tenantId``, or ``*`` for
every tenant. Another tenant's id from anyone else is ``403 forbidden``, whether it exists or not.

``GET /v1/usage`` (the raw records, in ``api/app.py``) keeps its shape; these routes are new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from agentvm.errors import BadRequest, Forbidden
from agentvm.observability.usage import ALL_TENANTS, cells_of, parse_query, query_wire, summarise

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.observability.usage import UsageQuery
    from agentvm.ports import UsageRollups
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

_TOTALS = {
    "records": 42,
    "turns": 30,
    "inputTokens": 21000,
    "outputTokens": 6000,
    "cacheReadTokens": 12000,
    "cacheWriteTokens": 2000,
    "totalTokens": 27000,
    "estimatedRecords": 1,
}
_SUMMARY = {
    "tenantId": "acme",
    "from": "2026-01-01T00:00:00Z",
    "to": "2026-02-01T00:00:00Z",
    "period": "day",
    "groupBy": ["container"],
    "rows": [{"period": "2026-01-07", "containerId": "user-alice", **_TOTALS}],
    "totals": _TOTALS,
}

PERIOD = Query(default=None, description="hour, day, month or range (default: one bucket, the range)")
GROUP_BY = Query(
    default=None,
    alias="groupBy",
    description="comma-separated: tenant, container, image, model, kind (default: totals only)",
)
FROM = Query(default=None, alias="from", description="UTC date or time, inclusive (default: this month)")
TO = Query(default=None, description="UTC date or time, exclusive (default: the end of today)")
MONTH = Query(default=None, description="a billing month, YYYY-MM, instead of from/to")
CONTAINER = Query(default=None, alias="containerId", description="one container (end user) only")
TENANT = Query(
    default=None,
    alias="tenantId",
    description="platform admins: a tenant, or * for every tenant (default: the caller's tenant)",
)


class UsageRow(BaseModel):
    model_config = ConfigDict(extra="allow")

    period: str = Field(description="2026-01-07T13 (hour), 2026-01-07 (day), 2026-01 (month), or from/to")
    records: int
    turns: int = Field(description="records of kind turn (a turn's first model call)")
    inputTokens: int = Field(description="every input token, cache reads and writes included")
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    totalTokens: int = Field(description="input + output")
    estimatedRecords: int = Field(description="records whose tokens are estimates (a cut stream)")


class UsageSummary(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_SUMMARY]})

    tenantId: str = Field(description="the tenant, or * (every tenant)")
    period: str
    groupBy: list[str]
    rows: list[UsageRow] = Field(description="one per period and grouping values, sorted by them")
    totals: UsageRow


def _ok(model: Any, example: Any, text: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model, "description": text, "content": {"application/json": {"example": example}}}}


def usage_routes(
    runtime: Runtime,
    errors: Callable[..., dict[int | str, dict[str, Any]]],
    admin: Callable[[Request], Principal],
) -> APIRouter:
    router = APIRouter(prefix="/usage", tags=["usage"])

    def rollups() -> UsageRollups:
        if runtime.usage is None:
            raise BadRequest("usage reports are not enabled on this server")
        return runtime.usage

    def tenant_of(request: Request, asked: str | None) -> str:
        """The tenant the caller may report on (``*``: every tenant)."""
        principal = admin(request)
        if asked is None or asked == principal.tenant_id:
            return principal.tenant_id
        if runtime.auth is not None and principal.tenant_id != runtime.platform_tenant:
            raise Forbidden(
                "the usage of other tenants is for platform admins (an admin key of the platform tenant)"
            )
        return asked

    async def tenants(tenant: str, query: UsageQuery) -> list[str]:
        if tenant != ALL_TENANTS:
            return [tenant]
        return await rollups().tenants_with_usage(query.start_ms, query.end_ms)

    @router.get(
        "/summary",
        response_model=None,
        responses={**_ok(UsageSummary, _SUMMARY, "the sums, by period and grouping"), **errors(400)},
    )
    async def summary(
        request: Request,
        period: str | None = PERIOD,
        group_by: str | None = GROUP_BY,
        start: str | None = FROM,
        to: str | None = TO,
        month: str | None = MONTH,
        container_id: str | None = CONTAINER,
        tenant_id: str | None = TENANT,
    ) -> dict[str, Any]:
        """The usage records summed by period (hour, day, month or the range) and by tenant,
        container (end user), image, model and kind. By container or image the periods are days
        or longer. Bad periods, groupings or ranges: ``400`` with ``invalid_period``,
        ``invalid_grouping``, ``invalid_range`` or ``range_too_large``."""
        tenant = tenant_of(request, tenant_id)
        query = parse_query(
            now_ms=runtime.clock.now_ms(),
            period=period,
            group_by=group_by,
            start=start,
            end=to,
            month=month,
            container_id=container_id,
        )
        cells = await cells_of(rollups(), await tenants(tenant, query), query)
        rows, totals = summarise(query, cells)
        return {**query_wire(query, tenant), "rows": rows, "totals": totals}

    return router


__all__ = ["usage_routes"]
