"""The cluster queue's gauges (depth and oldest job by tenant, dead letters) for ``/metrics``.

The Prometheus collector reads its gauges synchronously (``adapters/local/prometheus_metrics.py``,
``QueueGauges``); on PostgreSQL they are rows a round trip away, so each node keeps a snapshot,
refreshed every ``every_s`` by ``run`` in the background (two small queries). The figures are the
whole cluster's, the same on every node: aggregate them across nodes with ``max``, not ``sum``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentvm.adapters.postgres.queue import PostgresTurnQueue

log = logging.getLogger("agentvm.postgres.queue_gauges")

REFRESH_S = 5.0


class QueueGaugeSnapshot:
    def __init__(self, queue: PostgresTurnQueue, *, every_s: float = REFRESH_S) -> None:
        self._queue = queue
        self.every_s = every_s
        self._depth: dict[str, tuple[int, int]] = {}
        self._dead = 0

    def depth_by_tenant(self) -> dict[str, tuple[int, int]]:
        return dict(self._depth)

    def dead_count(self) -> int:
        return self._dead

    async def refresh(self) -> None:
        self._depth = await self._queue.depth_by_tenant()
        self._dead = await self._queue.dead_count()

    async def run(self) -> None:
        """Refresh forever (cancel to stop); a failed refresh keeps the last figures."""
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # PostgreSQL unavailable: the next refresh tries again
                log.warning("could not refresh the queue gauges", extra={"error": type(exc).__name__})
            await asyncio.sleep(self.every_s)


__all__ = ["REFRESH_S", "QueueGaugeSnapshot"]
