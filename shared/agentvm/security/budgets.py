"""Token budgets per tenant and per container, per UTC day and per UTC month.

A budget limits the tokens (input + output, as the provider reported them) a tenant, or one of its
containers, may use per day and per calendar month. It is enforced at three points:

1. ``message_send`` refuses a turn while any applicable budget is used up (``quota_exceeded``,
   with ``limit`` and ``resetAt``), before anything is stored;
2. the worker computes the turn's allowance when the turn starts (it may have waited in the queue)
   and wraps the model in ``BudgetedModelClient``, which cuts the stream once the output crosses
   the allowance; the partial reply is kept and the turn ends with ``quota_exceeded``;
3. after the turn, ``record`` adds the turn's tokens to the tenant's and the container's counters.

Usage counters are one item per (tenant or container, month): one atomic write adds to the month's
field and to that day's field (``d01``..``d31``), and expires at the end of the month. Turns
running at the same time each get the allowance left when they started, so concurrent turns can
together overshoot a budget by what they produce in flight; a turn's input tokens are counted when
the provider reports them, so a budget can also be overshot by one turn's input.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from agentvm.errors import BadRequest, QuotaExceeded
from agentvm.llm import TextDelta
from agentvm.records import BudgetRecord

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.llm import ModelEvent, ModelRequest
    from agentvm.ports import BudgetStore, Clock, Counters, ModelClient

Scope = Literal["tenant", "container"]
WindowKind = Literal["day", "month"]
_ADJECTIVE = {"day": "daily", "month": "monthly"}


@dataclass(frozen=True, slots=True)
class Windows:
    """The current UTC day and month: counter key part, field names and when each resets."""

    month: str  # "2025-01": part of the counter key
    day_field: str  # "d07"
    day_reset_ms: int
    month_reset_ms: int

    @classmethod
    def at(cls, now_ms: int) -> Windows:
        now = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
        day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        month_start = day_start.replace(day=1)
        next_month = month_start.replace(year=now.year + (now.month == 12), month=now.month % 12 + 1)
        next_day_ms = int(day_start.timestamp() * 1000) + 86_400_000
        return cls(
            month=f"{now.year:04d}-{now.month:02d}",
            day_field=f"d{now.day:02d}",
            day_reset_ms=next_day_ms,
            month_reset_ms=int(next_month.timestamp() * 1000),
        )


def usage_key(month: str, tenant_id: str, container_id: str | None = None) -> str:
    """``usage#<month>#<tenant>[#<container>]``; tenant ids never contain ``#``, so keys cannot collide."""
    key = f"usage#{month}#{tenant_id}"
    return key if container_id is None else f"{key}#{container_id}"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Limit:
    """One configured limit and how much of it the current window has used."""

    scope: Scope
    window: WindowKind
    limit: int
    used: int
    reset_at_ms: int

    @property
    def remaining(self) -> int:
        return self.limit - self.used

    def error(self) -> QuotaExceeded:
        return QuotaExceeded(
            f"the {self.scope}'s {_ADJECTIVE[self.window]} token budget of {self.limit} tokens is used up;"
            f" it resets at {_iso(self.reset_at_ms)}",
            limit=self.limit,
            reset_at_ms=self.reset_at_ms,
        )


class Budgets:
    def __init__(self, store: BudgetStore, counters: Counters, clock: Clock) -> None:
        self.store = store
        self._counters = counters
        self._clock = clock

    async def set(
        self,
        tenant_id: str,
        container_id: str | None,
        *,
        daily_tokens: int | None,
        monthly_tokens: int | None,
    ) -> BudgetRecord:
        for value in (daily_tokens, monthly_tokens):
            if value is not None and value < 0:
                raise BadRequest("token budgets must be >= 0 (or null for no limit)")
        record = BudgetRecord(
            tenantId=tenant_id,
            containerId=container_id,
            dailyTokens=daily_tokens,
            monthlyTokens=monthly_tokens,
            updatedAt=self._clock.now_ms(),
        )
        await self.store.put_budget(record)
        return record

    async def usage(self, tenant_id: str, container_id: str | None = None) -> dict[str, int]:
        """Tokens used in the current UTC day and month, and when those windows reset (epoch ms)."""
        w = Windows.at(self._clock.now_ms())
        fields = await self._counters.get(usage_key(w.month, tenant_id, container_id))
        return {
            "day": fields.get(w.day_field, 0),
            "month": fields.get("month", 0),
            "dayResetAt": w.day_reset_ms,
            "monthResetAt": w.month_reset_ms,
        }

    async def limits(self, tenant_id: str, container_id: str) -> list[Limit]:
        """Every configured limit that applies to a turn in ``container_id``, with its current usage."""
        tenant_budget, container_budget = await asyncio.gather(
            self.store.get_budget(tenant_id), self.store.get_budget(tenant_id, container_id)
        )
        scoped: list[tuple[Scope, BudgetRecord, str | None]] = [
            (scope, budget, cid)
            for scope, budget, cid in (
                ("tenant", tenant_budget, None),
                ("container", container_budget, container_id),
            )
            if budget is not None and (budget.dailyTokens is not None or budget.monthlyTokens is not None)
        ]
        if not scoped:
            return []
        w = Windows.at(self._clock.now_ms())
        counters = await asyncio.gather(
            *(self._counters.get(usage_key(w.month, tenant_id, cid)) for _, _, cid in scoped)
        )
        out: list[Limit] = []
        for (scope, budget, _), fields in zip(scoped, counters, strict=True):
            if budget.dailyTokens is not None:
                out.append(
                    Limit(scope, "day", budget.dailyTokens, fields.get(w.day_field, 0), w.day_reset_ms)
                )
            if budget.monthlyTokens is not None:
                out.append(
                    Limit(scope, "month", budget.monthlyTokens, fields.get("month", 0), w.month_reset_ms)
                )
        return out

    async def allowance(self, tenant_id: str, container_id: str) -> Limit | None:
        """The binding limit (least remaining; on a tie the one that resets last), None if unlimited."""
        limits = await self.limits(tenant_id, container_id)
        return min(limits, key=lambda lim: (lim.remaining, -lim.reset_at_ms), default=None)

    async def check(self, tenant_id: str, container_id: str) -> None:
        """Raise ``QuotaExceeded`` if a budget of the tenant or the container is used up."""
        binding = await self.allowance(tenant_id, container_id)
        if binding is not None and binding.remaining <= 0:
            raise binding.error()

    async def record(self, tenant_id: str, container_id: str, tokens: int) -> None:
        """Add a finished turn's tokens to the tenant's and the container's current day and month."""
        if tokens <= 0:
            return
        w = Windows.at(self._clock.now_ms())
        amounts = {"month": tokens, w.day_field: tokens}
        expires_at = w.month_reset_ms // 1000
        await asyncio.gather(
            self._counters.incr(usage_key(w.month, tenant_id), amounts, expires_at=expires_at),
            self._counters.incr(usage_key(w.month, tenant_id, container_id), amounts, expires_at=expires_at),
        )


class BudgetedModelClient:
    """A ``ModelClient`` that cuts the stream once the output crosses a turn's allowance.

    Output is counted as it streams, one text delta as one token (the same measure a cut or
    interrupted turn's usage falls back to). The delta that crosses the allowance is still passed
    on (it was paid for); then the provider stream is closed and ``QuotaExceeded`` raised, which
    ends the turn as an error after its partial reply. An allowance of zero or less refuses the
    turn before the provider is called.
    """

    def __init__(self, inner: ModelClient, limit: Limit) -> None:
        self.inner = inner
        self.limit = limit

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        allowance = self.limit.remaining
        if allowance <= 0:
            raise self.limit.error()
        received = 0
        stream = self.inner.stream(request)
        try:
            async for event in stream:
                yield event
                if isinstance(event, TextDelta):
                    received += 1
                    if received > allowance:
                        raise self.limit.error()
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()  # closes the provider's HTTP stream: it stops generating


__all__ = ["BudgetedModelClient", "Budgets", "Limit", "Windows", "usage_key"]
