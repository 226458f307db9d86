"""The ``Metrics`` port on prometheus-client: the local host's counters, histograms and gauges.

One ``CollectorRegistry`` per runtime (never the library's global one, so two runtimes in one
process, as in tests, never mix). Recording is one counter increment or histogram observation
per event, under the library's own lock: nothing per text delta.

Series (docs/observability.md has the table): tenant-scoped ones carry a ``tenant`` label;
process-wide ones carry none (connections not yet authenticated, requests refused before a
tenant was known, dead-letter jobs, the Python process's own ``process_*``). The gauges
(connections, active containers, queue depth and age) are read when scraped, from the live
connection registry and the queue's table.

``exposition(tenant)`` is the text format of ``prometheus_client.generate_latest`` restricted to
one tenant's series (None: everything, for platform admins); ``view`` is the same figures as
``/v1/metrics`` JSON, with p50/p95/p99 estimated from the histogram buckets as Prometheus'
``histogram_quantile`` does (linear within a bucket). Counters count since the process started.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agentvm.observability.metrics import ACTIVE_WINDOW_S, empty_view, success_rate

if TYPE_CHECKING:
    from collections import Counter as Tally
    from collections.abc import Callable, Iterable, Iterator

    from agentvm.ports import MetricsQuery, Transport, TurnFigures

TTFT_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 60.0)
DURATION_BUCKETS = (
    0.25,
    0.5,
    1.0,
    2.0,
    3.0,
    5.0,
    8.0,
    13.0,
    21.0,
    34.0,
    55.0,
    89.0,
    144.0,
    233.0,
    377.0,
    610.0,
)
TENANT = "tenant"


class QueueGauges(Protocol):
    """The queue as its gauges read it, synchronously (SqliteTurnQueue; on PostgreSQL a snapshot
    refreshed in the background: adapters/postgres/queue_gauges.py)."""

    def depth_by_tenant(self) -> dict[str, tuple[int, int]]:
        """Jobs waiting to start, by tenant: (how many, the oldest one's ``enqueuedAt``)."""
        ...

    def dead_count(self) -> int: ...


class _Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


class _LiveConnections(Protocol):
    """The host's connections as the live gauge reads them (InMemoryConnections, SqliteConnections)."""

    def by_tenant(self) -> Tally[str | None]:
        """Live connections by tenant (None: not authenticated yet)."""
        ...


class PrometheusMetrics:
    host = "local"

    def __init__(
        self,
        *,
        connections: _LiveConnections | None = None,
        queue: QueueGauges | None = None,
        mcp_figures: Callable[[], dict[str, int] | None] | None = None,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        process_metrics: bool = True,
    ) -> None:
        self.registry = CollectorRegistry()
        # What /v1/metrics reads: this registry, or a collector that adds other nodes' figures
        # (the cluster host's ``adapters/postgres/node_metrics.py``).
        self.source: _Collector = self.registry
        self._connections = connections
        self._queue = queue
        self._mcp_figures = mcp_figures  # the MCP session pool's (hosts/tools.py), read when scraped
        self._now_ms = now_ms
        self.started_ms = now_ms()
        r = self.registry
        self.requests = Counter(
            "avm_requests",
            "Requests handled (HTTP /v1 and WebSocket frames)",
            [TENANT, "transport", "outcome"],
            registry=r,
        )
        self.anonymous = Counter(
            "avm_unauthenticated_requests",
            "Requests refused before a tenant was known",
            ["transport", "code"],
            registry=r,
        )
        self.errors = Counter(
            "avm_errors", "Errors by code, of requests and turns", [TENANT, "source", "code"], registry=r
        )
        self.turns = Counter("avm_turns", "Turn attempts by how they ended", [TENANT, "status"], registry=r)
        self.tokens = Counter("avm_tokens", "Model tokens by direction", [TENANT, "direction"], registry=r)
        self.cost = Counter(
            "avm_estimated_cost_usd", "Estimated token cost in USD (list prices)", [TENANT], registry=r
        )
        self.ttft = Histogram(
            "avm_time_to_first_token_seconds", "Time to the first token of a turn", [TENANT],
            buckets=TTFT_BUCKETS, registry=r,
        )  # fmt: skip
        self.duration = Histogram(
            "avm_turn_duration_seconds", "Duration of a turn attempt", [TENANT],
            buckets=DURATION_BUCKETS, registry=r,
        )  # fmt: skip
        self.tools = Counter("avm_tool_calls", "Tool calls by outcome", [TENANT, "outcome"], registry=r)
        self._active: dict[tuple[str, str], int] = {}  # (tenant, container) -> its last turn (epoch ms)
        self._active_lock = threading.Lock()
        r.register(_LiveGauges(self))
        if process_metrics:
            ProcessCollector(registry=r)  # process_cpu_seconds_total, process_resident_memory_bytes, ...

    # -- recording ---------------------------------------------------------------------------------
    def request(self, tenant_id: str | None, transport: Transport, error_code: str | None) -> None:
        if tenant_id is None:
            self.anonymous.labels(transport, error_code or "ok").inc()
            return
        self.requests.labels(tenant_id, transport, "ok" if error_code is None else "error").inc()
        if error_code is not None:
            self.errors.labels(tenant_id, "request", error_code).inc()

    def turn(self, figures: TurnFigures) -> None:
        tenant = figures.tenant_id
        self.turns.labels(tenant, figures.status).inc()
        if figures.error_code is not None:
            self.errors.labels(tenant, "turn", figures.error_code).inc()
        self.tokens.labels(tenant, "input").inc(figures.input_tokens)
        self.tokens.labels(tenant, "output").inc(figures.output_tokens)
        self.cost.labels(tenant).inc(figures.estimated_cost_usd)
        if figures.ttft_s is not None:
            self.ttft.labels(tenant).observe(figures.ttft_s)
        self.duration.labels(tenant).observe(figures.duration_s)
        if figures.tool_calls:
            self.tools.labels(tenant, "ok").inc(figures.tool_calls - figures.tool_failures)
            self.tools.labels(tenant, "error").inc(figures.tool_failures)
        with self._active_lock:
            self._active[(tenant, figures.container_id)] = self._now_ms()

    def connection(self, tenant_id: str | None, *, opened: bool) -> None:
        pass  # the live registry is read when scraped (avm_active_connections)

    # -- reading -----------------------------------------------------------------------------------
    def exposition(self, tenant_id: str | None) -> tuple[bytes, str]:
        source = self.source if tenant_id is None else _TenantOnly(self.source, tenant_id)
        return generate_latest(source), CONTENT_TYPE_LATEST

    async def view(self, query: MetricsQuery) -> dict[str, Any]:
        out = empty_view(query, host=self.host)
        out["since"], out["until"] = self.started_ms, self._now_ms()
        families = _families(self.source, query.tenant_id)
        total: dict[str, int] = {}
        errors: dict[str, int] = {}
        for s in families.get("avm_requests", ()):
            transport = s.labels["transport"]
            total[transport] = total.get(transport, 0) + int(s.value)
            if s.labels["outcome"] == "error":
                errors[transport] = errors.get(transport, 0) + int(s.value)
        if query.tenant_id is None:
            for s in families.get("avm_unauthenticated_requests", ()):
                transport = s.labels["transport"]
                total[transport] = total.get(transport, 0) + int(s.value)
                if s.labels["code"] != "ok":
                    errors[transport] = errors.get(transport, 0) + int(s.value)
        requests = out["requests"]
        requests["byTransport"] = {
            t: {"total": n, "errors": errors.get(t, 0)} for t, n in sorted(total.items())
        }
        requests["total"], requests["errors"] = sum(total.values()), sum(errors.values())
        requests["successRate"] = success_rate(requests["total"], requests["errors"])
        by_status: dict[str, int] = {}
        for s in families.get("avm_turns", ()):
            by_status[s.labels["status"]] = by_status.get(s.labels["status"], 0) + int(s.value)
        out["turns"] = {
            "total": sum(by_status.values()),
            "errors": by_status.get("failed", 0),
            "byStatus": dict(sorted(by_status.items())),
        }
        for s in families.get("avm_tokens", ()):
            out["tokens"][s.labels["direction"]] += int(s.value)
        out["estimatedCostUsd"] = round(sum(s.value for s in families.get("avm_estimated_cost_usd", ())), 6)
        out["timeToFirstTokenMs"] = _percentiles(families.get("avm_time_to_first_token_seconds", ()))
        out["turnDurationMs"] = _percentiles(families.get("avm_turn_duration_seconds", ()))
        by_code: dict[str, int] = {}
        for s in families.get("avm_errors", ()):
            by_code[s.labels["code"]] = by_code.get(s.labels["code"], 0) + int(s.value)
        if query.tenant_id is None:
            for s in families.get("avm_unauthenticated_requests", ()):
                if s.labels["code"] != "ok":
                    by_code[s.labels["code"]] = by_code.get(s.labels["code"], 0) + int(s.value)
        out["errors"]["byCode"] = dict(sorted(by_code.items()))
        for s in families.get("avm_tool_calls", ()):
            out["tools"]["calls"] += int(s.value)
            if s.labels["outcome"] == "error":
                out["tools"]["failures"] += int(s.value)
        gauge = {name: sum(s.value for s in families.get(name, ())) for name in _LiveGauges.NAMES}
        connected = gauge["avm_active_connections"]
        if query.tenant_id is None:
            connected += gauge["avm_unauthenticated_connections"]
        out["connections"]["active"] = int(connected)
        out["containers"] = {"active": int(gauge["avm_active_containers"]), "windowS": ACTIVE_WINDOW_S}
        ages = [s.value for s in families.get("avm_queue_oldest_age_seconds", ())]
        out["queue"] = {
            "depth": int(gauge["avm_queue_depth"]),
            "oldestAgeS": round(max(ages), 3) if ages else 0.0,
            "deadLetters": int(gauge["avm_queue_dead_jobs"]) if query.tenant_id is None else None,
        }
        return out

    # -- the gauges read when scraped --------------------------------------------------------------
    def active_containers(self) -> dict[str, int]:
        cutoff = self._now_ms() - ACTIVE_WINDOW_S * 1000
        with self._active_lock:
            for key in [k for k, at in self._active.items() if at < cutoff]:
                del self._active[key]
            counts: dict[str, int] = {}
            for tenant, _container in self._active:
                counts[tenant] = counts.get(tenant, 0) + 1
        return counts


class _LiveGauges:
    """Gauges computed at scrape time (a collector, not stored values)."""

    NAMES = (
        "avm_active_connections",
        "avm_unauthenticated_connections",
        "avm_active_containers",
        "avm_queue_depth",
        "avm_queue_dead_jobs",
        "avm_mcp_sessions_open",
        "avm_mcp_sessions",
    )

    def __init__(self, metrics: PrometheusMetrics) -> None:
        self._m = metrics

    def describe(self) -> Iterable[Metric]:
        return []  # computed on demand: nothing to check for name clashes at registration

    def collect(self) -> Iterator[Metric]:
        m = self._m
        connections = GaugeMetricFamily(
            "avm_active_connections", "Live WebSocket connections", labels=[TENANT]
        )
        anonymous = GaugeMetricFamily(
            "avm_unauthenticated_connections", "Live WebSocket connections not authenticated yet"
        )
        if m._connections is not None:
            counts = m._connections.by_tenant()
            for tenant, n in sorted(counts.items(), key=lambda kv: kv[0] or ""):
                if tenant is not None:
                    connections.add_metric([tenant], n)
            anonymous.add_metric([], counts.get(None, 0))
        containers = GaugeMetricFamily(
            "avm_active_containers",
            f"Containers with a turn in the last {ACTIVE_WINDOW_S} s",
            labels=[TENANT],
        )
        for tenant, n in sorted(m.active_containers().items()):
            containers.add_metric([tenant], n)
        depth = GaugeMetricFamily("avm_queue_depth", "Turn jobs waiting to start", labels=[TENANT])
        age = GaugeMetricFamily(
            "avm_queue_oldest_age_seconds", "Age of the oldest turn job waiting to start", labels=[TENANT]
        )
        dead = GaugeMetricFamily("avm_queue_dead_jobs", "Turn jobs moved to the dead letters")
        if m._queue is not None:
            now = m._now_ms()
            for tenant, (count, oldest) in sorted(m._queue.depth_by_tenant().items()):
                depth.add_metric([tenant], count)
                age.add_metric([tenant], max(0.0, (now - oldest) / 1000) if oldest else 0.0)
            dead.add_metric([], m._queue.dead_count())
        yield from (connections, anonymous, containers, depth, age, dead)
        figures = m._mcp_figures() if m._mcp_figures is not None else None
        if figures is not None:  # process-wide: the pool's sessions are per tenant, their count is not
            live = GaugeMetricFamily("avm_mcp_sessions_open", "MCP sessions kept open across turns")
            live.add_metric([], figures.get("open", 0))
            events = CounterMetricFamily(
                "avm_mcp_sessions", "MCP session pool events since start", labels=["event"]
            )
            for event, count in sorted(figures.items()):
                if event != "open":
                    events.add_metric([event], count)
            yield from (live, events)


class _TenantOnly:
    """A registry view with one tenant's series only: families without a ``tenant`` label
    (process-wide) are left out, and so is every other tenant's sample."""

    def __init__(self, registry: _Collector, tenant_id: str) -> None:
        self._registry = registry
        self._tenant = tenant_id

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            samples = [s for s in family.samples if s.labels.get(TENANT) == self._tenant]
            if samples:
                kept = Metric(family.name, family.documentation, family.type, family.unit)
                kept.samples = samples
                yield kept


def _families(registry: _Collector, tenant_id: str | None) -> dict[str, list[Any]]:
    """Samples by family name (the name without ``_total``), one tenant's or every one's."""
    source = registry if tenant_id is None else _TenantOnly(registry, tenant_id)
    out: dict[str, list[Any]] = {}
    for family in source.collect():
        out[family.name] = [
            s for s in family.samples if family.type != "counter" or s.name.endswith("_total")
        ]
    return out


def _percentiles(samples: Iterable[Any]) -> dict[str, Any]:
    """count, p50, p95, p99 in milliseconds from histogram samples (every tenant's buckets summed)."""
    buckets: dict[float, float] = {}
    count = 0.0
    for s in samples:
        if s.name.endswith("_bucket"):
            le = float(s.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + s.value
        elif s.name.endswith("_count"):
            count += s.value
    cumulative = sorted(buckets.items())
    return {
        "count": int(count),
        **{f"p{q}": _quantile(q / 100, cumulative, count) for q in (50, 95, 99)},
    }


def _quantile(q: float, cumulative: list[tuple[float, float]], count: float) -> float | None:
    """Prometheus' histogram_quantile: linear interpolation within the bucket the rank falls in;
    in the +Inf bucket, the highest finite bound."""
    if count <= 0:
        return None
    rank = q * count
    lower_bound, lower_count = 0.0, 0.0
    for bound, seen in cumulative:
        if seen >= rank:
            if bound == float("inf"):
                return round(lower_bound * 1000, 1)
            width = seen - lower_count
            fraction = 0.0 if width <= 0 else (rank - lower_count) / width
            return round((lower_bound + (bound - lower_bound) * fraction) * 1000, 1)
        lower_bound, lower_count = bound, seen
    return round(lower_bound * 1000, 1)


__all__ = ["DURATION_BUCKETS", "TTFT_BUCKETS", "PrometheusMetrics", "QueueGauges"]
