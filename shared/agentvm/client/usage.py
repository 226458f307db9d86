"""The usage and billing routes over HTTP, typed: ``UsageClient`` reads ``GET /v1/usage`` (the
records, with what prompt caching and the reply cache saved per turn, per session and in total),
``/v1/usage/summary``, ``/v1/usage/export`` and ``/v1/usage/prices`` with an admin key
(docs/usage.md). Money is US dollars rounded to micro-dollars; ``cost`` and ``markup`` are for
platform admins only (``None`` for a tenant's admin).

    async with UsageClient("http://127.0.0.1:8080", token=ADMIN_KEY) as usage:
        summary = await usage.summary(group_by="container,model", month="2026-01")
        print(summary.totals.charge, summary.totals.cacheSavings, summary.totals.replyCacheSavings)

What the reply cache saved defaults to 0 when a server older than it does not send it.

httpx is imported when a client is made, not with the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from types import TracebackType

    import httpx


class UsageSums(BaseModel):
    """The sums of some usage records (a row of the summary, or its totals); a row also carries
    its ``period`` and grouping values (``tenantId``, ``containerId``, ``imageId``, ``model``,
    ``kind``) as extra fields."""

    model_config = ConfigDict(extra="allow")

    records: int
    turns: int
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    totalTokens: int
    estimatedRecords: int
    cost: float | None = None
    charge: float
    cacheSavings: float  # what prompt caching saved, at the charged prices
    unpricedTokens: int
    # what the reply cache saved: the tokens of the calls that wrote the replies its hits served
    # (not in inputTokens / outputTokens), and those tokens at the charged prices
    savedInputTokens: int = 0
    savedOutputTokens: int = 0
    replyCacheSavings: float = 0.0


class UsageSummary(BaseModel):
    """``GET /v1/usage/summary``."""

    model_config = ConfigDict(extra="allow")

    tenantId: str
    period: str
    groupBy: list[str]
    currency: str
    markup: float | None = None
    pricesAsOf: str
    rows: list[UsageSums]
    totals: UsageSums


class UsageRecord(BaseModel):
    """One model call's tokens (``GET /v1/usage``), and what caching saved on it (``None``: the
    model has no price)."""

    model_config = ConfigDict(extra="allow")

    turnId: str
    sessionId: str
    containerId: str
    model: str
    kind: str
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int = 0
    cacheWriteTokens: int = 0
    createdAt: int
    cacheSavings: float | None
    routedBy: str | None = None  # the image's routing rule that chose ``model`` (docs/protocol.md)
    prefixBreak: str | None = (
        None  # why the prompt prefix changed: compaction | window | diet (docs/protocol.md)
    )
    # a reply-cache hit (kind "reply_cache", 0 tokens): the tokens it saved, and their charge
    savedInputTokens: int = 0
    savedOutputTokens: int = 0
    replyCacheSavings: float | None = 0.0


class SessionCacheSavings(BaseModel):
    sessionId: str
    cacheReadTokens: int
    cacheWriteTokens: int
    cacheSavings: float
    savedInputTokens: int = 0
    savedOutputTokens: int = 0
    replyCacheSavings: float = 0.0


class UsageTotals(BaseModel):
    turns: int
    inputTokens: int
    outputTokens: int
    totalTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    cacheSavings: float
    savedInputTokens: int = 0
    savedOutputTokens: int = 0
    replyCacheSavings: float = 0.0


class UsageRecords(BaseModel):
    """``GET /v1/usage``: the records, per session what caching saved, and the totals."""

    records: list[UsageRecord]
    sessions: list[SessionCacheSavings]
    totals: UsageTotals


class ModelPrices(BaseModel):
    input: float
    output: float
    cacheRead: float
    cacheWrite: float


class PriceList(BaseModel):
    """``GET /v1/usage/prices``: USD per million tokens."""

    currency: str
    markup: float | None = None
    pricesAsOf: str
    prices: dict[str, ModelPrices]
    overridden: list[str] | None = None


class UsageClient:
    """An admin key's view of usage and billing (``http://HOST:PORT`` for ``avm serve``, a stack's
    ``HttpApiUrl`` on AWS). ``transport``: an httpx transport (tests, proxies)."""

    def __init__(
        self, base_url: str, *, token: str | None = None, timeout: float = 30.0, transport: Any = None
    ) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> UsageClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _get(self, path: str, params: dict[str, Any]) -> httpx.Response:
        from agentvm.client.errors import RequestFailed

        answer = await self._http.get(path, params={k: v for k, v in params.items() if v is not None})
        if answer.status_code != 200:
            error = answer.json().get("error", {}) if answer.content else {}
            code = error.get("code", f"http_{answer.status_code}")
            raise RequestFailed(path, {"code": code, "error": error.get("message", answer.text)})
        return answer

    async def records(self, *, container_id: str | None = None) -> UsageRecords:
        """The tenant's usage records with what caching saved per record, session and in total."""
        answer = await self._get("/v1/usage", {"containerId": container_id})
        return UsageRecords.model_validate(answer.json())

    async def summary(
        self,
        *,
        period: str | None = None,
        group_by: str | None = None,
        start: str | None = None,
        end: str | None = None,
        month: str | None = None,
        container_id: str | None = None,
        tenant_id: str | None = None,
    ) -> UsageSummary:
        """The records summed by period and grouping, priced (docs/usage.md)."""
        params = {
            "period": period,
            "groupBy": group_by,
            "from": start,
            "to": end,
            "month": month,
            "containerId": container_id,
            "tenantId": tenant_id,
        }
        return UsageSummary.model_validate((await self._get("/v1/usage/summary", params)).json())

    async def export(
        self,
        *,
        format: Literal["csv", "jsonl"] = "csv",  # noqa: A002
        group_by: str | None = None,
        period: str | None = None,
        start: str | None = None,
        end: str | None = None,
        month: str | None = None,
        container_id: str | None = None,
        tenant_id: str | None = None,
    ) -> str:
        """A billing period as CSV or JSON Lines text (with ``cacheSavings`` per line)."""
        params = {
            "format": format,
            "groupBy": group_by,
            "period": period,
            "from": start,
            "to": end,
            "month": month,
            "containerId": container_id,
            "tenantId": tenant_id,
        }
        return (await self._get("/v1/usage/export", params)).text

    async def prices(self) -> PriceList:
        """The prices in force (tenants: the prices they are charged)."""
        return PriceList.model_validate((await self._get("/v1/usage/prices", {})).json())


__all__ = [
    "ModelPrices",
    "PriceList",
    "SessionCacheSavings",
    "UsageClient",
    "UsageRecord",
    "UsageRecords",
    "UsageSummary",
    "UsageSums",
    "UsageTotals",
]
