"""Usage reports: the stored usage records summed by tenant, container (end user), image, model,
kind (turn, step, compaction, title, reply_cache) and period (hour, day, month, or the whole range).

A report reads the sums of the ``UsageRollups`` port, never the records one by one: on AWS the
hour and day items written with each record (``adapters/aws/dynamodb_usage``), locally SQL over
the usage table. Which sums it reads follows from the query:

* by tenant, model or kind (and any period, hours included): the tenant's **hour** sums;
* by container or image, or for one container (``containerId``): the **day** sums of each
  container, so the periods are days, months or the range, and the range must be whole UTC days.

Tokens: ``inputTokens`` counts every input token, cached ones included; ``cacheReadTokens`` and
``cacheWriteTokens`` say how many of them the provider read from or wrote to its prompt cache
(they are priced differently: ``observability.pricing``). ``estimatedRecords`` counts records
whose tokens are ours, not the provider's (a cut or interrupted stream: ``UsageRecord.estimated``).
``savedInputTokens`` and ``savedOutputTokens`` are what the reply cache saved: the sums of its hits'
``UsageRecord.savedInputTokens`` / ``savedOutputTokens`` (the tokens of the model calls that wrote
the replies they served; a hit itself has 0 tokens), not counted in ``inputTokens`` or
``totalTokens``.

Bad queries raise ``InvalidUsageQuery`` errors with stable codes (``errors.py``): an unknown
period (``invalid_period``), an unknown or repeated grouping, or one the sums cannot answer
(``invalid_grouping``), an unreadable, empty or misaligned range (``invalid_range``), and a range
too long for one answer (``range_too_large``: 366 days, 31 days by the hour).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeGuard, get_args

from agentvm.errors import InvalidGrouping, InvalidPeriod, InvalidRange, RangeTooLarge
from agentvm.observability.periods import (
    DAY_MS,
    HOUR_MS,
    day_key,
    day_start,
    hour_key,
    iso,
    month_key,
    month_of,
    month_start,
    parse_instant,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from agentvm.ports import UsageCell, UsageRollups

Dimension = Literal["tenant", "container", "image", "model", "kind"]
Period = Literal["hour", "day", "month", "range"]
DIMENSIONS: tuple[str, ...] = get_args(Dimension)
PERIODS: tuple[str, ...] = get_args(Period)
MAX_RANGE_DAYS = 366
MAX_HOUR_RANGE_DAYS = 31
ALL_TENANTS = "*"
# The wire name of each grouping's column.
COLUMNS = {
    "tenant": "tenantId",
    "container": "containerId",
    "image": "imageId",
    "model": "model",
    "kind": "kind",
}
METRICS = (
    "records",
    "turns",
    "inputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
    "totalTokens",
    "estimatedRecords",
    "savedInputTokens",
    "savedOutputTokens",
)


@dataclass(frozen=True)
class UsageQuery:
    """What to sum: ``[start_ms, end_ms)``, in buckets of ``period``, by ``group_by``."""

    start_ms: int
    end_ms: int
    period: Period = "range"
    group_by: tuple[Dimension, ...] = ()
    container_id: str | None = None

    @property
    def by_day(self) -> bool:
        """Whether the day sums (per container) answer it, rather than the tenant's hour sums."""
        return self.container_id is not None or bool({"container", "image"} & set(self.group_by))


def parse_query(
    *,
    now_ms: int,
    period: str | None = None,
    group_by: str | None = None,
    start: str | None = None,
    end: str | None = None,
    month: str | None = None,
    container_id: str | None = None,
) -> UsageQuery:
    """A query from the route's parameters, or the error that says what is wrong with them.

    Default range: this UTC month up to the end of today. ``month`` (``YYYY-MM``) is a billing
    month, instead of ``start`` / ``end`` (ISO 8601 UTC instants or dates, or epoch ms; ``end``
    exclusive)."""
    chosen = (period or "range").strip()
    if not _is_period(chosen):
        raise InvalidPeriod(f"period: must be one of {', '.join(PERIODS)}, not {chosen!r}")
    dims = _dimensions(group_by)
    if month is not None:
        if start is not None or end is not None:
            raise InvalidRange("give either month or from/to, not both")
        bounds = month_of(month)
        if bounds is None:
            raise InvalidRange(f"month: must be YYYY-MM, not {month!r}")
        low, high = bounds
    else:
        low = _instant("from", start) if start is not None else month_start(now_ms)
        high = _instant("to", end) if end is not None else day_start(now_ms) + DAY_MS
    if high <= low:
        raise InvalidRange(f"the range is empty: from ({iso(low)}) must be before to ({iso(high)})")
    query = UsageQuery(low, high, chosen, dims, container_id or None)
    limit = MAX_HOUR_RANGE_DAYS if chosen == "hour" else MAX_RANGE_DAYS
    if high - low > limit * DAY_MS:
        raise RangeTooLarge(
            f"the range is longer than {limit} days{' by the hour' if chosen == 'hour' else ''}"
        )
    if query.by_day:
        what = "grouping by container or image" if set(dims) & {"container", "image"} else "one container"
        if chosen == "hour":
            raise InvalidGrouping(f"{what} is summed per day: use period day, month or range")
        if low % DAY_MS or high % DAY_MS:
            raise InvalidRange(f"{what} is summed per day: from and to must be whole UTC days")
    elif low % HOUR_MS or high % HOUR_MS:
        raise InvalidRange("from and to must be whole UTC hours")
    return query


def _dimensions(raw: str | None) -> tuple[Dimension, ...]:
    if raw is None or not raw.strip():
        return ()
    names = [n.strip() for n in raw.split(",")]
    dims: list[Dimension] = []
    for name in names:
        if not _is_dimension(name):
            raise InvalidGrouping(f"groupBy: unknown grouping {name!r}; use {', '.join(DIMENSIONS)}")
        dims.append(name)
    if len(set(names)) != len(names):
        raise InvalidGrouping("groupBy: a grouping is named twice")
    return tuple(dims)


def _is_period(name: str) -> TypeGuard[Period]:
    return name in PERIODS


def _is_dimension(name: str) -> TypeGuard[Dimension]:
    return name in DIMENSIONS


def _instant(name: str, text: str) -> int:
    value = parse_instant(text)
    if value is None:
        raise InvalidRange(
            f"{name}: not a UTC date or time (2026-01-07, 2026-01-07T13:00:00Z, or epoch ms): {text!r}"
        )
    return value


@dataclass
class Sums:
    """The metrics of one row (or of the totals) and, once priced, what it cost and is charged."""

    records: int = 0
    turns: int = 0
    inputTokens: int = 0
    outputTokens: int = 0
    cacheReadTokens: int = 0
    cacheWriteTokens: int = 0
    estimatedRecords: int = 0
    savedInputTokens: int = 0
    savedOutputTokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # pricing's sums (observability.pricing)

    def add(self, cell: UsageCell) -> None:
        self.records += cell.records
        # a turn's own record: its first model call, or its reply from the image's cache
        self.turns += cell.records if cell.kind in ("turn", "reply_cache") else 0
        self.inputTokens += cell.input_tokens
        self.outputTokens += cell.output_tokens
        self.cacheReadTokens += cell.cache_read_tokens
        self.cacheWriteTokens += cell.cache_write_tokens
        self.estimatedRecords += cell.estimated
        self.savedInputTokens += cell.saved_input_tokens
        self.savedOutputTokens += cell.saved_output_tokens

    def to_wire(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "turns": self.turns,
            "inputTokens": self.inputTokens,
            "outputTokens": self.outputTokens,
            "cacheReadTokens": self.cacheReadTokens,
            "cacheWriteTokens": self.cacheWriteTokens,
            "totalTokens": self.inputTokens + self.outputTokens,
            "estimatedRecords": self.estimatedRecords,
            "savedInputTokens": self.savedInputTokens,
            "savedOutputTokens": self.savedOutputTokens,
            **self.extra,
        }


async def cells_of(rollups: UsageRollups, tenants: Sequence[str], query: UsageQuery) -> list[UsageCell]:
    """Every sum the query needs, of every tenant in ``tenants``."""
    out: list[UsageCell] = []
    for tenant in tenants:
        if query.by_day:
            out += await rollups.day_cells(tenant, query.start_ms, query.end_ms, query.container_id)
        else:
            out += await rollups.hour_cells(tenant, query.start_ms, query.end_ms)
    return out


def bucket_of(query: UsageQuery, start_ms: int) -> str:
    """The label of the period a cell's hour or day falls in."""
    if query.period == "hour":
        return hour_key(start_ms)
    if query.period == "day":
        return day_key(start_ms)
    if query.period == "month":
        return month_key(start_ms)
    return f"{iso(query.start_ms)}/{iso(query.end_ms)}"


def summarise(
    query: UsageQuery,
    cells: Iterable[UsageCell],
    *,
    price: Callable[[Sums, UsageCell], None] | None = None,
    finish: Callable[[Sums], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows (one per period and grouping values, sorted by them) and the totals."""
    rows: dict[tuple[str, ...], Sums] = {}
    totals = Sums()
    for cell in cells:
        values = {
            "tenant": cell.tenant_id,
            "container": cell.container_id or "",
            "image": cell.image_id or "",
            "model": cell.model,
            "kind": cell.kind,
        }
        key = (bucket_of(query, cell.start_ms), *(values[d] for d in query.group_by))
        row = rows.setdefault(key, Sums())
        for sums in (row, totals):
            sums.add(cell)
            if price is not None:
                price(sums, cell)
    if finish is not None:
        for sums in (*rows.values(), totals):
            finish(sums)
    out = []
    for key in sorted(rows):
        labels = {"period": key[0], **{COLUMNS[d]: v for d, v in zip(query.group_by, key[1:], strict=True)}}
        out.append({**labels, **rows[key].to_wire()})
    return out, totals.to_wire()


def query_wire(query: UsageQuery, tenant: str) -> dict[str, Any]:
    """What a report says it answers."""
    out: dict[str, Any] = {
        "tenantId": tenant,
        "from": iso(query.start_ms),
        "to": iso(query.end_ms),
        "period": query.period,
        "groupBy": list(query.group_by),
    }
    if query.container_id is not None:
        out["containerId"] = query.container_id
    return out


__all__ = [
    "ALL_TENANTS",
    "COLUMNS",
    "DIMENSIONS",
    "METRICS",
    "PERIODS",
    "Sums",
    "UsageQuery",
    "bucket_of",
    "cells_of",
    "parse_query",
    "query_wire",
    "summarise",
]
