"""Every live node's own metrics, through PostgreSQL: what ``/v1/metrics`` on a cluster node shows.

``NodeMetricsBoard`` is ``adapters/prometheus/board.py``'s ``MetricsBoard`` (which says how the
members' figures are exchanged and merged) on the ``node_metrics`` table: a publish is one upsert,
a refresh one read of the rows published within ``stale_s``; each sample is labelled ``node``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentvm.adapters.prometheus.board import PUBLISH_S, STALE_S, Collector, MetricsBoard

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.adapters.postgres.database import Database

_PUBLISH = """
INSERT INTO node_metrics (node, published_at, families) VALUES (%s, %s, %s)
ON CONFLICT (node) DO UPDATE SET published_at = EXCLUDED.published_at, families = EXCLUDED.families
"""
_OTHERS = "SELECT node, families FROM node_metrics WHERE node <> %s AND published_at >= %s ORDER BY node"


class PostgresSnapshots:
    """``SnapshotTable`` on the cluster's ``node_metrics`` table (families as JSONB)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def publish(self, member: str, at_ms: int, families: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute(_PUBLISH, (member, at_ms, families))

    async def others(self, member: str, since_ms: int) -> list[tuple[str, list[dict[str, Any]]]]:
        async with self._db.connection() as conn:
            cur = await conn.execute(_OTHERS, (member, since_ms))
            rows = await cur.fetchall()
        return [
            (str(node), families if isinstance(families, list) else json.loads(families))
            for node, families in rows
        ]

    async def withdraw(self, member: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute("DELETE FROM node_metrics WHERE node = %s", (member,))


class NodeMetricsBoard(MetricsBoard):
    """This node's figures and the other live nodes', labelled ``node``."""

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
        super().__init__(
            PostgresSnapshots(database), node, registry, now_ms=now_ms, label="node", every_s=every_s,
            stale_s=stale_s,
        )  # fmt: skip
        self.node = node

    def nodes(self) -> list[str]:
        """This node and the other live ones, as of the last refresh."""
        return self.members()


__all__ = ["PUBLISH_S", "STALE_S", "NodeMetricsBoard", "PostgresSnapshots"]
