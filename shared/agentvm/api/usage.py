"""Usage and billing over HTTP: ``/v1/usage/summary``, ``/v1/usage/export`` and ``/v1/usage/prices``
(``agentvm.observability``: ``usage`` sums, ``pricing`` prices, ``export`` writes files).

Admin keys. A tenant's admin sees its own tenant's usage; a platform admin (an admin key of the
platform tenant, or anyone in the open dev mode) names any tenant with ``tenantId``, or ``*`` for
every tenant. Another tenant's id from anyone else is ``403 forbidden``, whether it exists or not.
Money: everyone sees the ``charge`` (list-price cost x the markup); only platform admins see the
``cost`` and the markup (the platform's margin is not its customers' business).

``GET /v1/usage`` (the raw records, in ``api/budgets.py``) keeps its shape; these routes are new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID
from agentvm.configcentre.pricing import pricing_for
from agentvm.errors import BadRequest, Forbidden
from agentvm.observability import export
from agentvm.observability.pricing import CURRENCY, prices_as_of
from agentvm.observability.usage import ALL_TENANTS, cells_of, parse_query, query_wire, summarise

if TYPE_CHECKING:
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
    "savedInputTokens": 4800,
    "savedOutputTokens": 1200,
    "cost": 0.0425,
    "charge": 0.044625,
    "cacheSavings": 0.010815,
    "unpricedTokens": 0,
    "replyCacheSavings": 0.01134,
}
_AS_OF = "genai-prices 0.2.3"
_SUMMARY = {
    "tenantId": "acme",
    "from": "2026-01-01T00:00:00Z",
    "to": "2026-02-01T00:00:00Z",
    "period": "day",
    "groupBy": ["container"],
    "currency": "USD",
    "markup": 1.05,
    "pricesAsOf": _AS_OF,
    "rows": [{"period": "2026-01-07", "containerId": "user-alice", **_TOTALS}],
    "totals": _TOTALS,
    "storage": {"usedBytes": 52_428_800, "limitBytes": 1_073_741_824},
}
_CSV = (
    "period,tenantId,containerId,model,records,turns,inputTokens,outputTokens,cacheReadTokens,"
    "cacheWriteTokens,totalTokens,estimatedRecords,cost,charge,cacheSavings,unpricedTokens,currency,"
    "savedInputTokens,savedOutputTokens,replyCacheSavings\n"
    "2026-01,acme,user-alice,anthropic/claude-haiku-4-5,42,30,21000,6000,12000,2000,27000,1,"
    "0.042500,0.044625,0.010815,0,USD,4800,1200,0.011340\n"
)
_PRICES = {
    "currency": "USD",
    "markup": 1.05,
    "pricesAsOf": _AS_OF,
    "prices": {
        "anthropic/claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cacheRead": 0.1, "cacheWrite": 1.25}
    },
    "overridden": [],
}

MAX_TENANT_ID = 64  # security/apikeys.py, TENANT_RE (or *)
MAX_TIME = 64  # a UTC date or time in ISO 8601
MAX_WORD = 32  # a period or a month: anything longer is none
MAX_GROUPINGS = 128  # tenant,container,image,model,kind has 33 characters
PERIOD = Query(
    default=None,
    max_length=MAX_WORD,
    description="hour, day, month or range (default: one bucket, the range)",
)
GROUP_BY = Query(
    default=None,
    alias="groupBy",
    max_length=MAX_GROUPINGS,
    description="comma-separated: tenant, container, image, model, kind (default: totals only)",
)
FROM = Query(
    default=None,
    alias="from",
    max_length=MAX_TIME,
    description="UTC date or time, inclusive (default: this month)",
)
TO = Query(
    default=None, max_length=MAX_TIME, description="UTC date or time, exclusive (default: the end of today)"
)
MONTH = Query(default=None, max_length=MAX_WORD, description="a billing month, YYYY-MM, instead of from/to")
CONTAINER = Query(
    default=None,
    alias="containerId",
    min_length=1,
    max_length=MAX_ID,
    description="one container (end user) only",
)
TENANT = Query(
    default=None,
    alias="tenantId",
    min_length=1,
    max_length=MAX_TENANT_ID,
    description="platform admins: a tenant, or * for every tenant (default: the caller's tenant)",
)


class UsageSums(BaseModel):
    """The sums of some records (the totals); a row adds its period and grouping values."""

    model_config = ConfigDict(extra="allow")

    records: int
    turns: int = Field(
        description="records of kind turn or reply_cache (a turn's first model call, or its cached reply)"
    )
    inputTokens: int = Field(description="every input token, cache reads and writes included")
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    totalTokens: int = Field(description="input + output")
    estimatedRecords: int = Field(description="records whose tokens are estimates (a cut stream)")
    savedInputTokens: int = Field(
        description=(
            "what the reply cache saved: the input tokens of the model calls that wrote the replies"
            " its hits served (a hit, kind reply_cache, has 0 tokens; not in inputTokens)"
        )
    )
    savedOutputTokens: int = Field(description="the same, output tokens (not in outputTokens)")
    cost: float | None = Field(
        default=None, description="platform admins: the tokens at list price, USD (micro-dollars)"
    )
    charge: float = Field(description="what to charge, USD: the cost x the markup")
    cacheSavings: float = Field(
        description=(
            "what prompt caching saved, USD at the charged prices: (cache reads x (input - cacheRead)"
            " - cache writes x (cacheWrite - input)) per million, x the markup; negative when cache"
            " writes cost more than the reads saved"
        )
    )
    unpricedTokens: int = Field(description="tokens of models with no price (not in cost or charge)")
    replyCacheSavings: float = Field(
        description=(
            "what the reply cache saved, USD at the charged prices: (savedInputTokens x input +"
            " savedOutputTokens x output) per million at the hit's model's prices, x the markup"
        )
    )


class UsageRow(UsageSums):
    period: str = Field(description="2026-01-07T13 (hour), 2026-01-07 (day), 2026-01 (month), or from/to")


class StorageUse(BaseModel):
    """The tenant's storage account now (SECURITY.md, "Storage quotas")."""

    usedBytes: int = Field(description="bytes it has stored, every write path together")
    limitBytes: int = Field(description="its quota (AVM_TENANT_STORAGE_BYTES or the platform's); 0 = none")


class UsageSummary(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_SUMMARY))

    tenantId: str = Field(description="the tenant, or * (every tenant)")
    period: str
    groupBy: list[str]
    currency: str
    markup: float | None = Field(default=None, description="platform admins only")
    pricesAsOf: str = Field(
        description="the price library release that priced the models (genai-prices X.Y.Z)"
    )
    rows: list[UsageRow] = Field(description="one per period and grouping values, sorted by them")
    totals: UsageSums
    storage: StorageUse | None = Field(
        default=None, description="one tenant's storage account now (absent for * or without quotas)"
    )


class ModelPrices(BaseModel):
    input: float
    output: float
    cacheRead: float
    cacheWrite: float


class PriceList(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_PRICES))

    currency: str
    markup: float | None = Field(default=None, description="platform admins only")
    pricesAsOf: str
    prices: dict[str, ModelPrices] = Field(
        description="USD per million tokens: list prices (platform admins), or the prices charged"
    )
    overridden: list[str] | None = Field(default=None, description="models priced by billing.prices")


router = APIRouter(prefix="/usage", tags=["usage"])


def rollups(runtime: Runtime) -> UsageRollups:
    if runtime.usage is None:
        raise BadRequest("usage reports are not enabled on this server")
    return runtime.usage


def platform(runtime: Runtime, principal: Principal) -> bool:
    return runtime.auth is None or principal.tenant_id == runtime.platform_tenant


def tenant_of(runtime: Runtime, caller: Principal, asked: str | None) -> tuple[str, bool]:
    """The tenant the caller may report on (``*``: every tenant), and whether it is a platform
    admin (who sees costs)."""
    principal = admin(caller)
    if asked is None or asked == principal.tenant_id:
        return principal.tenant_id, platform(runtime, principal)
    if not platform(runtime, principal):
        raise Forbidden(
            "the usage of other tenants is for platform admins (an admin key of the platform tenant)"
        )
    return asked, True


async def tenants(runtime: Runtime, tenant: str, query: UsageQuery) -> list[str]:
    if tenant != ALL_TENANTS:
        return [tenant]
    return await rollups(runtime).tenants_with_usage(query.start_ms, query.end_ms)


@router.get(
    "/summary",
    response_model=None,
    responses={**ok(200, UsageSummary, _SUMMARY, "the sums, by period and grouping"), **error_responses(400)},
)
async def summary(
    runtime: RuntimeDep,
    caller: Caller,
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
    tenant, with_cost = tenant_of(runtime, caller, tenant_id)
    query = parse_query(
        now_ms=runtime.clock.now_ms(),
        period=period,
        group_by=group_by,
        start=start,
        end=to,
        month=month,
        container_id=container_id,
    )
    rows, totals, pricing = await report(runtime, tenant, query, with_cost=with_cost)
    money: dict[str, Any] = {"currency": CURRENCY, "pricesAsOf": prices_as_of()}
    if with_cost:
        money["markup"] = float(pricing.markup)
    out = {**query_wire(query, tenant), **money, "rows": rows, "totals": totals}
    quota = runtime.storage_quota
    if quota is not None and tenant != ALL_TENANTS:
        out["storage"] = {
            "usedBytes": await quota.used(tenant),
            "limitBytes": await quota.limit_of(tenant),
        }
    return out


async def report(
    runtime: Runtime, tenant: str, query: UsageQuery, *, with_cost: bool
) -> tuple[Any, Any, Any]:
    pricing = await pricing_for(runtime)
    cells = await cells_of(rollups(runtime), await tenants(runtime, tenant, query), query)
    rows, totals = summarise(
        query,
        cells,
        price=pricing.add,
        finish=lambda sums: pricing.finish(sums, with_cost=with_cost),
    )
    return rows, totals, pricing


@router.get(
    "/export",
    response_model=None,
    responses={
        200: {
            "description": "the priced rows, one per line",
            "content": {
                "text/csv": {"example": _CSV},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
        },
        **error_responses(400),
    },
)
async def export_usage(
    runtime: RuntimeDep,
    caller: Caller,
    format: Literal["csv", "jsonl"] = Query(default="csv", description="csv or jsonl (JSON Lines)"),  # noqa: A002
    period: str | None = PERIOD,
    group_by: str | None = Query(
        default="tenant,container,model",
        alias="groupBy",
        max_length=MAX_GROUPINGS,
        description="comma-separated groupings (default: tenant, container, model)",
    ),
    start: str | None = FROM,
    to: str | None = TO,
    month: str | None = MONTH,
    container_id: str | None = CONTAINER,
    tenant_id: str | None = TENANT,
) -> Response:
    """A billing period as a file: the summary's rows priced (the charge is the list-price
    cost x the markup; platform admins also get the cost), as CSV or JSON Lines. Same query as
    ``/v1/usage/summary``; by default one line per tenant, end user and model."""
    tenant, with_cost = tenant_of(runtime, caller, tenant_id)
    query = parse_query(
        now_ms=runtime.clock.now_ms(),
        period=period,
        group_by=group_by,
        start=start,
        end=to,
        month=month,
        container_id=container_id,
    )
    rows, _, _ = await report(runtime, tenant, query, with_cost=with_cost)
    body = export.render(rows, query.group_by, format, with_cost=with_cost)
    wire = query_wire(query, tenant)
    who = "all" if tenant == ALL_TENANTS else tenant
    name = f"usage-{who}-{wire['from'][:10]}-{wire['to'][:10]}.{format}"
    disposition = f'attachment; filename="{_safe(name)}"'
    return Response(body, media_type=export.MEDIA_TYPES[format], headers={"Content-Disposition": disposition})


@router.get("/prices", response_model=None, responses=ok(200, PriceList, _PRICES, "the price table in force"))
async def prices(runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    """The price per model (USD per million tokens) of the listed models and every overridden
    one, and the price library release that priced them.
    Platform admins: the list prices, the markup and which models ``billing.prices`` overrides;
    tenants: the prices they are charged (list price x markup)."""
    principal = admin(caller)
    return (await pricing_for(runtime)).to_wire(with_cost=platform(runtime, principal))


def _safe(name: str) -> str:
    """A file name with only harmless characters (tenant ids are the caller's own, or a platform's)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


__all__ = ["router"]
