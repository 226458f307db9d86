"""Schedules on the cluster host: two nodes on one throwaway PostgreSQL, each running the scheduler
(``turns.schedules.fire_due``) on the same simulated clock, fire each tick exactly once, across a
node's restart too (docs/schedules.md)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from agentvm.config import Settings
from agentvm.hosts.cluster_server import cluster_runtime, start_node
from agentvm.images import ImageConfig, create
from agentvm.records import ScheduleRecord
from agentvm.turns.schedules import fire_due, next_tick
from agentvm.turns.worker import process_turn
from tests.integration.test_cluster_serve import cluster_database
from tests.security_harness import ManualClock
from tests.unit.turns.test_schedules import ms

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.hosts.cluster import ClusterNode
    from agentvm.hosts.local import LocalHost

pytestmark = pytest.mark.postgres


async def _node(url: str, tmp_path: Path, name: str, clock: ManualClock) -> tuple[ClusterNode, LocalHost]:
    settings = Settings(database_url=url, data_dir=tmp_path / name, database_pool_max_size=4)
    node = await start_node(settings)
    host = cluster_runtime(settings, node)
    host.runtime.clock = clock
    return node, host


async def test_each_tick_fires_once_across_nodes_and_a_restart(tmp_path):
    clock = ManualClock(ms("2026-01-15T09:59:30"))
    with cluster_database() as url:
        (node_a, a), (node_b, b) = [await _node(url, tmp_path, n, clock) for n in ("node-a", "node-b")]
        try:
            rt = a.runtime
            assert rt.schedules is not None and b.runtime.schedules is not None
            image = await create(rt, "tenant-a", "user-alice", ImageConfig(), admin=True, by=None, notices=[])
            schedule = ScheduleRecord(
                tenantId="tenant-a",
                scheduleId=rt.ids.new("sch"),
                imageId=image.imageId,
                containerId=image.containerId,
                cron="0 * * * *",
                message="good morning",
                nextAt=next_tick("0 * * * *", "UTC", clock.ms),
                createdAt=clock.ms,
                updatedAt=clock.ms,
            )
            await rt.schedules.put_schedule(schedule)
            for hour in ("10", "11"):
                clock.ms = ms(f"2026-01-15T{hour}:00:02")
                # both nodes' schedulers, several steps each, at once
                fired = await asyncio.gather(*(fire_due(h.runtime) for h in (a, b, a, b, a, b)))
                assert sum(fired) == 1, fired
            await node_a.queue.drain(lambda job: process_turn(rt, job))

            # node A dies and comes back; the schedule's row is as if the 11:00 tick's scheduler had
            # died after its claim (nextAt still 11:00): the restarted node sends nothing again.
            await node_a.aclose()
            node_a, a = await _node(url, tmp_path, "node-a", clock)
            assert a.runtime.schedules is not None
            await a.runtime.schedules.put_schedule(
                schedule.model_copy(update={"nextAt": ms("2026-01-15T11:00:00")})
            )
            assert sum(await asyncio.gather(fire_due(a.runtime), fire_due(b.runtime))) == 0

            runs = await a.runtime.schedules.list_runs("tenant-a", schedule.scheduleId)
            assert [(r.tickAt, r.status) for r in runs] == [
                (ms("2026-01-15T11:00:00"), "sent"),
                (ms("2026-01-15T10:00:00"), "sent"),
            ]
            messages = await a.runtime.store.list_messages(image.sessionId)
            assert [m.role for m in messages].count("user") == 2
            turns = [await a.runtime.store.get_turn(r.turnId or "") for r in runs]
            assert [t.status if t else None for t in turns] == ["completed", "completed"]
        finally:
            await node_a.aclose()
            await node_b.aclose()
