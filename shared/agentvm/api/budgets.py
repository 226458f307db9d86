"""Token budgets and the raw usage records over HTTP: ``/v1/budgets/tenant``,
``/v1/budgets/containers/{containerId}`` and ``GET /v1/usage`` (``agentvm.security.budgets``).

Admin keys only, the caller's tenant only. A budget limits input + output tokens per UTC day and
per calendar month, for the whole tenant or one container (end user); ``null`` is no limit. The
summed reports (``/v1/usage/summary``, ``export``, ``prices``) are in ``api/usage.py``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from agentvm.api import examples as doc
from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import CONTAINER_ID, MAX_ID
from agentvm.configcentre.pricing import pricing_for
from agentvm.errors import BadRequest
from agentvm.observability.pricing import micro

if TYPE_CHECKING:
    from agentvm.ports import TokenBudgets
    from agentvm.runtime import Runtime

MAX_BUDGET_TOKENS = 10**15  # far above any real budget; below 2**53, so every JSON reader keeps it exact

router = APIRouter()


class BudgetLimits(BaseModel):
    # camelCase like every other field of the API; the snake_case names of earlier versions are
    # still accepted (validate_by_name), never answered.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,  # booleans are not numbers: `false` is refused, never taken for 0
        validate_by_name=True,
        json_schema_extra=examples(
            {"dailyTokens": 1000000, "monthlyTokens": 20000000}, {"dailyTokens": None}
        ),
    )

    daily_tokens: StrictInt | None = Field(
        default=None, ge=0, le=MAX_BUDGET_TOKENS, alias="dailyTokens"
    )  # per UTC day; null: none
    monthly_tokens: StrictInt | None = Field(
        default=None, ge=0, le=MAX_BUDGET_TOKENS, alias="monthlyTokens"
    )  # per calendar month


def budgets(runtime: Runtime) -> TokenBudgets:
    if runtime.budgets is None:
        raise BadRequest("budgets are not enabled on this server")
    return runtime.budgets


async def budget_view(runtime: Runtime, tenant_id: str, container_id: str | None) -> dict[str, Any]:
    b = budgets(runtime)
    record = await b.store.get_budget(tenant_id, container_id)
    return {
        "dailyTokens": None if record is None else record.dailyTokens,
        "monthlyTokens": None if record is None else record.monthlyTokens,
        "usage": await b.usage(tenant_id, container_id),
    }


# 400 also when budgets are not enabled on this server
_TENANT_BUDGET = {
    **ok(200, "Budget", doc.BUDGET, "the limits and this day's and month's usage"),
    **error_responses(400),
}
_CONTAINER_BUDGET = {
    **ok(200, "Budget", doc.CONTAINER_BUDGET, "the container's limits and usage"),
    **error_responses(400),
}


@router.put("/budgets/tenant", tags=["budgets"], response_model=None, responses=_TENANT_BUDGET)
async def put_tenant_budget(body: BudgetLimits, runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    """Token limits (input + output) for the whole tenant; null = no limit."""
    principal = admin(caller)
    await budgets(runtime).set(
        principal.tenant_id, None, daily_tokens=body.daily_tokens, monthly_tokens=body.monthly_tokens
    )
    return await budget_view(runtime, principal.tenant_id, None)


@router.get("/budgets/tenant", tags=["budgets"], response_model=None, responses=_TENANT_BUDGET)
async def get_tenant_budget(runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    return await budget_view(runtime, admin(caller).tenant_id, None)


@router.put(
    "/budgets/containers/{container_id}",
    tags=["budgets"],
    response_model=None,
    responses=_CONTAINER_BUDGET,
)
async def put_container_budget(
    body: BudgetLimits, runtime: RuntimeDep, caller: Caller, container_id: str = CONTAINER_ID
) -> dict[str, Any]:
    """Token limits for one container of the caller's tenant (it need not exist yet)."""
    principal = admin(caller)
    await budgets(runtime).set(
        principal.tenant_id,
        container_id,
        daily_tokens=body.daily_tokens,
        monthly_tokens=body.monthly_tokens,
    )
    return await budget_view(runtime, principal.tenant_id, container_id)


@router.get(
    "/budgets/containers/{container_id}",
    tags=["budgets"],
    response_model=None,
    responses=_CONTAINER_BUDGET,
)
async def get_container_budget(
    runtime: RuntimeDep, caller: Caller, container_id: str = CONTAINER_ID
) -> dict[str, Any]:
    return await budget_view(runtime, admin(caller).tenant_id, container_id)


@router.get(
    "/usage",
    tags=["budgets"],
    response_model=None,
    responses={**ok(200, "Usage", doc.USAGE, "the usage records and their totals"), **error_responses(400)},
)
async def usage(
    runtime: RuntimeDep,
    caller: Caller,
    containerId: str | None = Query(default=None, min_length=1, max_length=MAX_ID),  # noqa: N803
) -> dict[str, Any]:
    """The tenant's usage records (one per turn, and one per compaction of a session's history:
    ``kind``), oldest first, each with what prompt caching saved (``cacheSavings``, USD at the
    charged prices; null for a model with no price) and what the reply cache saved
    (``replyCacheSavings``: a hit's ``savedInputTokens`` / ``savedOutputTokens`` at the model's
    prices, charged), the same per session, and their totals (tokens of both: both are billed).
    Reads every record: for sums by period, end user, model and kind use ``/v1/usage/summary``."""
    principal = admin(caller)
    records = await runtime.store.list_usage(principal.tenant_id, containerId)
    pricing = await pricing_for(runtime)
    savings = [pricing.charged_cache_savings(r.model, r.cacheReadTokens, r.cacheWriteTokens) for r in records]
    replies = [
        pricing.charged_reply_cache_savings(r.model, r.savedInputTokens, r.savedOutputTokens) for r in records
    ]
    sessions: dict[str, dict[str, Any]] = {}
    for record, saved, replied in zip(records, savings, replies, strict=True):
        session = sessions.setdefault(
            record.sessionId,
            {
                "sessionId": record.sessionId,
                "cacheReadTokens": 0,
                "cacheWriteTokens": 0,
                "cacheSavings": Decimal(0),
                "savedInputTokens": 0,
                "savedOutputTokens": 0,
                "replyCacheSavings": Decimal(0),
            },
        )
        session["cacheReadTokens"] += record.cacheReadTokens
        session["cacheWriteTokens"] += record.cacheWriteTokens
        session["cacheSavings"] += saved or Decimal(0)
        session["savedInputTokens"] += record.savedInputTokens
        session["savedOutputTokens"] += record.savedOutputTokens
        session["replyCacheSavings"] += replied or Decimal(0)
    input_tokens = sum(r.inputTokens for r in records)
    output_tokens = sum(r.outputTokens for r in records)
    return {
        "records": [
            {
                **r.model_dump(),
                "cacheSavings": None if saved is None else micro(saved),
                "replyCacheSavings": None if replied is None else micro(replied),
            }
            for r, saved, replied in zip(records, savings, replies, strict=True)
        ],
        "sessions": [
            {
                **s,
                "cacheSavings": micro(s["cacheSavings"]),
                "replyCacheSavings": micro(s["replyCacheSavings"]),
            }
            for s in sessions.values()
        ],
        "totals": {
            # a turn's own record: its first model call, or its reply from the image's cache
            "turns": sum(r.kind in ("turn", "reply_cache") for r in records),
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
            # additive: of inputTokens, read from and written to the provider's prompt cache
            "cacheReadTokens": sum(r.cacheReadTokens for r in records),
            "cacheWriteTokens": sum(r.cacheWriteTokens for r in records),
            "cacheSavings": micro(sum((s or Decimal(0) for s in savings), Decimal(0))),
            # what the reply cache saved (not in the tokens above: a hit has 0)
            "savedInputTokens": sum(r.savedInputTokens for r in records),
            "savedOutputTokens": sum(r.savedOutputTokens for r in records),
            "replyCacheSavings": micro(sum((s or Decimal(0) for s in replies), Decimal(0))),
        },
    }


__all__ = ["BudgetLimits", "router"]
