"""Token budgets per tenant and per container, per UTC day and per UTC month.

A budget limits the tokens (input + output, as the provider reported them) a tenant, or one of its
containers, may use per day and per calendar month. It is enforced at three points:

1. ``message_send`` refuses a turn while any applicable budget is used up (``quota_exceeded``,
   with ``limit`` and ``resetAt``), before anything is stored;
2. the worker computes the turn's allowance when the turn starts (it may have waited in the queue)
   and wraps the model in ``BudgetedModelClient``, which cuts the stream once the output crosses
   the allowance; the partial reply is kept and the turn ends with ``quota_exceeded``;
3. after each model call, ``record`` adds its tokens to the counters of the scopes (tenant,
   container) that have a budget, as the worker's lookup for that call found them (``limits``:
   no extra read). A scope without a budget has no counter writes: on AWS that is 2 write units
   per turn saved for a tenant without budgets (docs/cost.md).

Usage counters are one item per (tenant or container, month): one atomic write adds to the month's
field and to that day's field (``d01``..``d31``), and expires at the end of the month. Turns
running at the same time each get the allowance left when they started, so concurrent turns can
together overshoot a budget by what they produce in flight; a turn's input tokens are counted when
the provider reports them, so a budget can also be overshot by one turn's input.

**A budget created mid-month** (``set`` where the scope had none, or only nulls) counts what was
used already: its counters are **seeded** for the current UTC day and month from the usage sums
(``ports.UsageRollups``, which equal the usage records exactly: the tenant's hour sums, a
container's day sums), right after the budget is stored. The one inexactness: model calls in flight
when the budget is set. A call whose budget lookup came before the budget was stored (each model
call looks the budgets up when it starts; lookups are not cached, the store's reads are eventually
consistent, so a worker's view is at most one model call plus about a second old) and whose usage
record is stored after the seed read the sums is not added to the counters; one whose record came
before the seed's read and whose counter add comes after its write (a few milliseconds apart in
the worker) is counted twice. Both are bounded by the calls in flight at that moment; the usage
records and ``/v1/usage`` stay exact. A scope's budget view without a budget shows its usage from
the same sums (``usage``), so the answer keeps its shape.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, TypeGuard

from agentvm.errors import BadRequest, QuotaExceeded
from agentvm.llm import TextDelta
from agentvm.observability.periods import DAY_MS, HOUR_MS, day_start, hour_start, month_start
from agentvm.records import BudgetRecord

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Sequence

    from agentvm.llm import ModelEvent, ModelRequest
    from agentvm.ports import BudgetStore, Clock, Counters, ModelClient, UsageRollups

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


def has_limits(budget: BudgetRecord | None) -> TypeGuard[BudgetRecord]:
    """Whether a stored budget limits anything (a budget of nulls is no budget)."""
    return budget is not None and (budget.dailyTokens is not None or budget.monthlyTokens is not None)


def binding(limits: Sequence[Limit]) -> Limit | None:
    """The binding limit (least remaining; on a tie the one that resets last), None if unlimited."""
    return min(limits, key=lambda lim: (lim.remaining, -lim.reset_at_ms), default=None)


def counted_scopes(limits: Sequence[Limit]) -> frozenset[Scope]:
    """The scopes whose counters a call looked up with ``limits`` adds its tokens to."""
    return frozenset(lim.scope for lim in limits)


class Budgets:
    def __init__(
        self,
        store: BudgetStore,
        counters: Counters,
        clock: Clock,
        sums: Callable[[], UsageRollups | None] | None = None,
    ) -> None:
        self.store = store
        self._counters = counters
        self._clock = clock
        self._sums: Callable[[], UsageRollups | None] = sums or (lambda: None)

    def read_sums_from(self, sums: Callable[[], UsageRollups | None]) -> None:
        """Where the usage sums are (seeding a new budget, the usage of a scope without one): the
        runtime's, read when needed (a host sets them after it attaches security)."""
        self._sums = sums

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
        previous = await self.store.get_budget(tenant_id, container_id)
        await self.store.put_budget(record)
        if has_limits(record) and not has_limits(previous):
            await self._seed(tenant_id, container_id)  # after the put: later calls count themselves
        return record

    async def usage(self, tenant_id: str, container_id: str | None = None) -> dict[str, int]:
        """Tokens used in the current UTC day and month, and when those windows reset (epoch ms):
        a scope with a budget from its counters, one without from the usage sums."""
        now = self._clock.now_ms()
        w = Windows.at(now)
        counted = has_limits(await self.store.get_budget(tenant_id, container_id))
        sums = None if counted else self._sums()
        if sums is None:
            fields = await self._counters.get(usage_key(w.month, tenant_id, container_id))
            day, month = fields.get(w.day_field, 0), fields.get("month", 0)
        else:
            day, month = await _used(sums, tenant_id, container_id, now)
        return {"day": day, "month": month, "dayResetAt": w.day_reset_ms, "monthResetAt": w.month_reset_ms}

    async def _seed(self, tenant_id: str, container_id: str | None) -> None:
        """Make a new budget's counters say what the usage sums say of this day and month."""
        sums = self._sums()
        if sums is None:  # a host without usage sums: the budget counts from now
            return
        now = self._clock.now_ms()
        w = Windows.at(now)
        day, month = await _used(sums, tenant_id, container_id, now)
        key = usage_key(w.month, tenant_id, container_id)
        current = await self._counters.get(key)  # stale fields of an earlier budget this month
        amounts = {"month": month - current.get("month", 0), w.day_field: day - current.get(w.day_field, 0)}
        amounts = {name: amount for name, amount in amounts.items() if amount}
        if amounts:
            await self._counters.incr(key, amounts, expires_at=w.month_reset_ms // 1000)

    async def limits(self, tenant_id: str, container_id: str) -> list[Limit]:
        """Every configured limit that applies to a turn in ``container_id``, with its current usage."""
        tenant_budget, container_budget = await asyncio.gather(
            self.store.get_budget(tenant_id), self.store.get_budget(tenant_id, container_id)
        )
        stored: tuple[tuple[Scope, BudgetRecord | None, str | None], ...] = (
            ("tenant", tenant_budget, None),
            ("container", container_budget, container_id),
        )
        scoped: list[tuple[Scope, BudgetRecord, str | None]] = [
            (scope, budget, cid) for scope, budget, cid in stored if has_limits(budget)
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
        return binding(await self.limits(tenant_id, container_id))

    async def for_call(self, tenant_id: str, container_id: str) -> tuple[Limit | None, frozenset[Scope]]:
        """What a model call needs, from one lookup: its binding limit (None if unlimited) and the
        scopes with a budget, whose counters its tokens go to (``record(..., scopes=...)``)."""
        limits = await self.limits(tenant_id, container_id)
        return binding(limits), counted_scopes(limits)

    async def check(self, tenant_id: str, container_id: str) -> None:
        """Raise ``QuotaExceeded`` if a budget of the tenant or the container is used up."""
        binding = await self.allowance(tenant_id, container_id)
        if binding is not None and binding.remaining <= 0:
            raise binding.error()

    async def record(
        self, tenant_id: str, container_id: str, tokens: int, *, scopes: Collection[Scope] | None = None
    ) -> None:
        """Add a model call's tokens to the current day and month of the scopes with a budget.

        ``scopes``: those the call's own lookup found (``counted_scopes(limits)``); None looks them
        up here. A scope without a budget is not written (its usage is in the usage sums)."""
        if tokens <= 0:
            return
        if scopes is None:
            scopes = counted_scopes(await self.limits(tenant_id, container_id))
        if not scopes:
            return
        w = Windows.at(self._clock.now_ms())
        amounts = {"month": tokens, w.day_field: tokens}
        expires_at = w.month_reset_ms // 1000
        await asyncio.gather(
            *(
                self._counters.incr(
                    usage_key(w.month, tenant_id, None if scope == "tenant" else container_id),
                    amounts,
                    expires_at=expires_at,
                )
                for scope in sorted(scopes)
            )
        )


async def _used(sums: UsageRollups, tenant_id: str, container_id: str | None, now_ms: int) -> tuple[int, int]:
    """Tokens (input + output) of the usage records of the current UTC day and month: the tenant's
    from its hour sums, a container's from its day sums (both exact: ``ports.UsageRollups``)."""
    today, first = day_start(now_ms), month_start(now_ms)
    if container_id is None:
        cells = await sums.hour_cells(tenant_id, first, hour_start(now_ms) + HOUR_MS)
    else:
        cells = await sums.day_cells(tenant_id, first, today + DAY_MS, container_id)
    month = sum(c.input_tokens + c.output_tokens for c in cells)
    day = sum(c.input_tokens + c.output_tokens for c in cells if c.start_ms >= today)
    return day, month


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


__all__ = [
    "BudgetedModelClient",
    "Budgets",
    "Limit",
    "Scope",
    "Windows",
    "binding",
    "counted_scopes",
    "has_limits",
    "usage_key",
]
