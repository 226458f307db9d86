"""Every live node's own metrics, through PostgreSQL: what ``/v1/metrics`` on a cluster node shows.

A node's Prometheus registry (``adapters/local/prometheus_metrics.py``) counts what that node
handled: its requests, turns, tokens, tool calls, sockets and process. ``NodeMetricsBoard`` makes
them the cluster's: every ``every_s`` it publishes this node's families to the ``node_metrics``
table (one row per node, upserted: one round trip) and reads back the other nodes' rows published
within ``stale_s`` (one round trip); a node that stopped publishing (dead, or stopped: a graceful
stop deletes its row) drops out after ``stale_s``. ``collect`` yields this node's families, fresh,
and the others' from their last snapshot, every sample labelled ``node``; the collector is what
``PrometheusMetrics`` reads for ``/v1/metrics`` (``source``), in JSON (summed over the nodes) and
in the Prometheus text (one series per node).

The queue's gauges (``avm_queue_*``) are the cluster's already, the same on every node: only this
node's are shown, so they are not counted once per node.
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

    from agentvm.adapters.postgres.database import Database

log = logging.getLogger("agentvm.postgres.node_metrics")

PUBLISH_S = 5.0
STALE_S = 20.0  # four missed publishes
NODE_LABEL = "node"
CLUSTER_WIDE_PREFIX = "avm_queue_"  # the queue's gauges: the cluster's on every node


class Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


_PUBLISH = """
INSERT INTO node_metrics (node, published_at, families) VALUES (%s, %s, %s)
ON CONFLICT (node) DO UPDATE SET published_at = EXCLUDED.published_at, families = EXCLUDED.families
"""
_OTHERS = "SELECT node, families FROM node_metrics WHERE node <> %s AND published_at >= %s ORDER BY node"


class NodeMetricsBoard:
    def __init__(
        self,
        database: Database,
        node: str,
        registry: Collector,
        *,
        now_ms: Callable[[], int],
        every_s: float = PUBLISH_S,
        stale_s: float = STALE_S,
    ) -> None:
        self._db = database
        self.node = node
        self._registry = registry
        self._now_ms = now_ms
        self.every_s = every_s
        self.stale_s = stale_s
        self._others: list[tuple[str, list[Metric]]] = []

    async def publish(self) -> None:
        """This node's families, as they are now, in its row."""
        families = [_to_json(f) for f in self._registry.collect() if not _cluster_wide(f.name)]
        async with self._db.connection() as conn:
            await conn.execute(_PUBLISH, (self.node, self._now_ms(), json.dumps(families)))

    async def refresh(self) -> None:
        """The other live nodes' last published families."""
        cutoff = self._now_ms() - int(self.stale_s * 1000)
        async with self._db.connection() as conn:
            cur = await conn.execute(_OTHERS, (self.node, cutoff))
            rows = await cur.fetchall()
        self._others = [(str(node), [_from_json(f) for f in families]) for node, families in rows]

    def nodes(self) -> list[str]:
        """This node and the other live ones, as of the last refresh."""
        return sorted([self.node, *(node for node, _ in self._others)])

    def collect(self) -> Iterator[Metric]:
        """Every live node's families, merged by name, each sample labelled with its node."""
        merged: dict[str, Metric] = {}
        mine = [(self.node, list(self._registry.collect()), True)]
        for node, families, own in [*mine, *((n, f, False) for n, f in self._others)]:
            for family in families:
                if not own and _cluster_wide(family.name):
                    continue
                target = merged.get(family.name)
                if target is None:
                    target = Metric(family.name, family.documentation, family.type, family.unit)
                    merged[family.name] = target
                for s in family.samples:
                    labels = {**s.labels, NODE_LABEL: node} if not _cluster_wide(family.name) else s.labels
                    target.add_sample(s.name, labels, s.value, s.timestamp)
        yield from merged.values()

    async def withdraw(self) -> None:
        """Delete this node's row (a graceful stop: the node leaves the view at once)."""
        async with self._db.connection() as conn:
            await conn.execute("DELETE FROM node_metrics WHERE node = %s", (self.node,))

    async def run(self) -> None:
        """Publish and refresh forever (cancel to stop: the row is withdrawn)."""
        try:
            while True:
                try:
                    await self.publish()
                    await self.refresh()
                except Exception as exc:  # PostgreSQL unavailable: keep the last figures, retry
                    log.warning("could not exchange node metrics", extra={"error": type(exc).__name__})
                await asyncio.sleep(self.every_s)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.withdraw())


def _cluster_wide(name: str) -> bool:
    return name.startswith(CLUSTER_WIDE_PREFIX)


def _to_json(family: Metric) -> dict[str, Any]:
    return {
        "name": family.name,
        "type": family.type,
        "help": family.documentation,
        "unit": family.unit,
        # JSONB has no Infinity or NaN: those go as strings (float() reads them back)
        "samples": [
            [s.name, s.labels, s.value if math.isfinite(s.value) else str(s.value)] for s in family.samples
        ],
    }


def _from_json(data: dict[str, Any]) -> Metric:
    family = Metric(data["name"], data["help"], data["type"], data.get("unit", ""))
    for name, labels, value in data["samples"]:
        family.add_sample(name, {str(k): str(v) for k, v in labels.items()}, float(value))
    return family


__all__ = ["PUBLISH_S", "STALE_S", "NodeMetricsBoard"]
