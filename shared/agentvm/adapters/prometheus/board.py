"""Several processes' Prometheus figures as one: what ``/v1/metrics`` shows on a cluster node or a
``avm serve --workers N`` worker.

A process's Prometheus registry (``adapters/local/prometheus_metrics.py``) counts what that process
handled: its requests, turns, tokens, tool calls, sockets and process. ``MetricsBoard`` makes them
the group's: every ``every_s`` it publishes this process's families to a shared ``SnapshotTable``
(one row per member, upserted) and reads back the other members' rows published within
``stale_s``; a member that stopped publishing (dead, or stopped: a graceful stop deletes its row)
drops out after ``stale_s``. ``collect`` yields this member's families, fresh, and the others' from
their last snapshot, every sample labelled with its member (``label``: ``node`` on a cluster,
``worker`` for local workers); the collector is what ``PrometheusMetrics`` reads for
``/v1/metrics`` (``source``), in JSON (summed over the members) and in the Prometheus text (one
series per member).

The tables: PostgreSQL's ``node_metrics`` (``adapters/postgres/node_metrics.py``) and SQLite's
``worker_metrics`` in the data dir (``adapters/local/sqlite/worker_metrics.py``).

The queue's gauges (``avm_queue_*``) are the group's already, the same in every member: only this
member's are shown, so they are not counted once per member.

Written here rather than with prometheus_client's multiprocess mode: that mode shares files
between processes of one machine only (the cluster's nodes are not), drops the process collector,
and cannot label a sample with the process it came from.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import Metric

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

log = logging.getLogger("agentvm.metrics_board")

PUBLISH_S = 5.0
STALE_S = 20.0  # four missed publishes
GROUP_WIDE_PREFIX = "avm_queue_"  # the queue's gauges: the group's in every member


class Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


class SnapshotTable(Protocol):
    """Where members publish their families: one row per member, newest wins."""

    async def publish(self, member: str, at_ms: int, families: str) -> None: ...

    async def others(self, member: str, since_ms: int) -> list[tuple[str, list[dict[str, Any]]]]:
        """The other members' families published at or after ``since_ms``, by member name."""
        ...

    async def withdraw(self, member: str) -> None: ...


class MetricsBoard:
    def __init__(
        self,
        table: SnapshotTable,
        member: str,
        registry: Collector,
        *,
        now_ms: Callable[[], int],
        label: str = "node",
        every_s: float = PUBLISH_S,
        stale_s: float = STALE_S,
    ) -> None:
        self._table = table
        self.member = member
        self.label = label
        self._registry = registry
        self._now_ms = now_ms
        self.every_s = every_s
        self.stale_s = stale_s
        self._others: list[tuple[str, list[Metric]]] = []

    async def publish(self) -> None:
        """This member's families, as they are now, in its row."""
        families = [_to_json(f) for f in self._registry.collect() if not _group_wide(f.name)]
        await self._table.publish(self.member, self._now_ms(), json.dumps(families))

    async def refresh(self) -> None:
        """The other live members' last published families."""
        rows = await self._table.others(self.member, self._now_ms() - int(self.stale_s * 1000))
        self._others = [(member, [_from_json(f) for f in families]) for member, families in rows]

    def members(self) -> list[str]:
        """This member and the other live ones, as of the last refresh."""
        return sorted([self.member, *(member for member, _ in self._others)])

    def collect(self) -> Iterator[Metric]:
        """Every live member's families, merged by name, each sample labelled with its member."""
        merged: dict[str, Metric] = {}
        mine = [(self.member, list(self._registry.collect()), True)]
        for member, families, own in [*mine, *((m, f, False) for m, f in self._others)]:
            for family in families:
                if not own and _group_wide(family.name):
                    continue
                target = merged.get(family.name)
                if target is None:
                    target = Metric(family.name, family.documentation, family.type, family.unit)
                    merged[family.name] = target
                for s in family.samples:
                    labels = s.labels if _group_wide(family.name) else {**s.labels, self.label: member}
                    target.add_sample(s.name, labels, s.value, s.timestamp)
        yield from merged.values()

    async def withdraw(self) -> None:
        """Delete this member's row (a graceful stop: it leaves the view at once)."""
        await self._table.withdraw(self.member)

    async def run(self) -> None:
        """Publish and refresh forever (cancel to stop: the row is withdrawn)."""
        try:
            while True:
                try:
                    await self.publish()
                    await self.refresh()
                except Exception as exc:  # the table unavailable: keep the last figures, retry
                    log.warning("could not exchange metrics", extra={"error": type(exc).__name__})
                await asyncio.sleep(self.every_s)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.withdraw())


def _group_wide(name: str) -> bool:
    return name.startswith(GROUP_WIDE_PREFIX)


def _to_json(family: Metric) -> dict[str, Any]:
    return {
        "name": family.name,
        "type": family.type,
        "help": family.documentation,
        "unit": family.unit,
        # JSON has no Infinity or NaN: those go as strings (float() reads them back)
        "samples": [
            [s.name, s.labels, s.value if math.isfinite(s.value) else str(s.value)] for s in family.samples
        ],
    }


def _from_json(data: dict[str, Any]) -> Metric:
    family = Metric(data["name"], data["help"], data["type"], data.get("unit", ""))
    for name, labels, value in data["samples"]:
        family.add_sample(name, {str(k): str(v) for k, v in labels.items()}, float(value))
    return family


__all__ = ["PUBLISH_S", "STALE_S", "MetricsBoard", "SnapshotTable"]
