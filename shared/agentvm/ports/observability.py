"""Observability ports: usage roll-ups, the running turns, metrics and recent log lines.

``UsageRollups`` and ``RunningTurns`` are implemented by adapters; ``Metrics`` by each host
(``observability/metrics.py`` says what is counted); ``LogStore`` by each host
(``observability/logstore.py`` says which lines a query sees); ``StreamProgress`` by
``observability.running.TurnProgress``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True, slots=True)
class UsageCell:
    """Usage records summed: one tenant's, in one UTC hour or day (``start_ms``), of one model and
    kind, and (day cells) of one container and image. Several cells with the same key add up."""

    tenant_id: str
    start_ms: int  # the hour's or the day's first millisecond (UTC)
    model: str
    kind: str  # "turn" | "step" | "compaction" | "title" | "reply_cache"
    container_id: str | None = None  # day cells only
    image_id: str | None = None  # day cells only
    records: int = 0
    input_tokens: int = 0  # cache reads and writes included
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: int = 0  # records whose tokens are estimates (the provider never reported them)
    # what reply-cache hits saved: the tokens of the model calls that wrote the replies they served
    saved_input_tokens: int = 0
    saved_output_tokens: int = 0

    @classmethod
    def from_sums(
        cls,
        tenant_id: str,
        start_ms: int,
        model: str,
        kind: str,
        sums: Sequence[Any],
        *,
        container_id: str | None = None,
        image_id: str | None = None,
    ) -> UsageCell:
        """A cell from a SQL store's aggregate row, its sums in this order: records, input, output,
        cache read, cache write, estimated records, saved input, saved output."""
        records, inputs, outputs, reads, writes, estimated, saved_in, saved_out = (int(v) for v in sums)
        return cls(
            tenant_id=tenant_id,
            start_ms=int(start_ms),
            model=model,
            kind=kind,
            container_id=container_id,
            image_id=image_id,
            records=records,
            input_tokens=inputs,
            output_tokens=outputs,
            cache_read_tokens=reads,
            cache_write_tokens=writes,
            estimated=estimated,
            saved_input_tokens=saved_in,
            saved_output_tokens=saved_out,
        )


class UsageRollups(Protocol):
    """The stored usage records, summed per hour and per day (``observability.usage`` reads these).

    Every cell equals the sum of the records it covers, whatever failed or was retried: on AWS closed
    hours are rolled up from the records and the others read from them; locally SQL sums the records.
    """

    async def hour_cells(self, tenant_id: str, start_ms: int, end_ms: int) -> list[UsageCell]:
        """The tenant's cells per UTC hour, by model and kind, of the hours starting in
        ``[start_ms, end_ms)`` (both on hour boundaries)."""
        ...

    async def day_cells(
        self, tenant_id: str, start_ms: int, end_ms: int, container_id: str | None = None
    ) -> list[UsageCell]:
        """The tenant's cells per UTC day, by container, image, model and kind, of the days starting
        in ``[start_ms, end_ms)`` (both on day boundaries); of one container if given."""
        ...

    async def tenants_with_usage(self, start_ms: int, end_ms: int) -> list[str]:
        """Tenants that may have usage in ``[start_ms, end_ms)`` (a superset is allowed), sorted."""
        ...


@dataclass(frozen=True, slots=True)
class RunningTurn:
    """A turn accepted and not yet finished (queued, running or suspended), as the gateway saw it."""

    tenant_id: str
    container_id: str
    image_id: str
    session_id: str
    turn_id: str
    queued_at: int  # epoch ms
    model: str | None = None  # the image's model when the turn was sent (None: the server default)


@dataclass(frozen=True, slots=True)
class TurnTokens:
    """The tokens of a turn's model calls that have finished (each is billed as it ends)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class RunningTurns(Protocol):
    """The turns not finished yet, per tenant and container (``observability.running``): marked by
    the gateway when it queues a turn, unmarked by the worker when the turn ends. A mark outliving
    its turn (a worker died before unmarking) is removed by the next listing that finds the turn
    finished."""

    async def mark(self, turn: RunningTurn) -> None:
        """Idempotent by ``(tenant_id, turn_id)``."""
        ...

    async def unmark(self, tenant_id: str, container_id: str, turn_id: str) -> None: ...
    async def running(
        self, tenant_id: str, container_id: str | None = None, limit: int = 500
    ) -> list[RunningTurn]:
        """The tenant's marked turns (of one container), oldest first, at most ``limit``."""
        ...

    async def tokens(self, turn_ids: Sequence[str]) -> dict[str, TurnTokens]:
        """The billed tokens so far of each turn (its usage records: the first call, then steps)."""
        ...


Transport = Literal["http", "ws"]
TurnStatus = Literal["completed", "failed", "interrupted", "suspended"]


@dataclass(frozen=True, slots=True)
class TurnFigures:
    """One attempt of a turn, as the metrics see it."""

    tenant_id: str
    container_id: str
    session_id: str
    turn_id: str
    model: str
    status: TurnStatus
    error_code: str | None
    input_tokens: int
    output_tokens: int
    ttft_s: float | None
    duration_s: float
    tool_calls: int
    tool_failures: int
    estimated_cost_usd: float


@dataclass(frozen=True, slots=True)
class MetricsQuery:
    """What ``/v1/metrics`` asks for: one tenant (None: the platform, every tenant), and the time
    range (the AWS host's window; the local host answers since the process started)."""

    tenant_id: str | None
    since_ms: int | None = None
    until_ms: int | None = None


class Metrics(Protocol):
    """Where a host keeps its figures, and how ``/v1/metrics`` reads them back
    (``observability/metrics.py``)."""

    host: str  # "local" | "aws" | "none"

    def request(self, tenant_id: str | None, transport: Transport, error_code: str | None) -> None: ...
    def turn(self, figures: TurnFigures) -> None: ...
    def connection(self, tenant_id: str | None, *, opened: bool) -> None: ...

    async def view(self, query: MetricsQuery) -> dict[str, Any]:
        """The figures as ``/v1/metrics`` answers them in JSON (``empty_view``'s shape)."""
        ...

    def exposition(self, tenant_id: str | None) -> tuple[bytes, str] | None:
        """The Prometheus text exposition and its content type; None: this host has none."""
        ...


DEFAULT_LOG_LIMIT = 100  # lines of a ``/v1/logs`` page when the query names no limit


@dataclass(frozen=True, slots=True)
class LogQuery:
    """Which lines: ``tenant_id`` None = every tenant's and the platform's (platform admins)."""

    tenant_id: str | None
    container_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    min_level: int = 0
    since_ms: int | None = None
    until_ms: int | None = None
    limit: int = DEFAULT_LOG_LIMIT
    cursor: str | None = None


@dataclass
class LogPage:
    lines: list[dict[str, Any]] = field(default_factory=list)
    next: str | None = None


class LogStore(Protocol):
    """Recent structured log lines for ``/v1/logs`` (``observability/logstore.py``)."""

    async def page(self, query: LogQuery) -> LogPage:
        """The newest lines matching ``query`` after its cursor; ``next`` for the following page."""
        ...


class StreamProgress(Protocol):
    """Output deltas of the model call each turn streams now, in this process
    (``observability.running.TurnProgress``; ``/v1/turns`` shows them)."""

    def started(self, turn_id: str) -> None: ...
    def delta(self, turn_id: str) -> None: ...
    def forget(self, turn_id: str) -> None: ...
    def streaming(self, turn_id: str) -> int | None:
        """Deltas of the call streaming now; None when no call of the turn streams here."""
        ...


__all__ = [
    "DEFAULT_LOG_LIMIT",
    "LogPage",
    "LogQuery",
    "LogStore",
    "Metrics",
    "MetricsQuery",
    "RunningTurn",
    "RunningTurns",
    "StreamProgress",
    "Transport",
    "TurnFigures",
    "TurnStatus",
    "TurnTokens",
    "UsageCell",
    "UsageRollups",
]
