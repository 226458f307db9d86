"""``/v1/metrics`` sees the whole cluster: every live node's own figures, labelled ``node`` (issue 28).

Two nodes' metrics on one PostgreSQL: each ``NodeMetricsBoard`` publishes its node's families and
reads the other's; a node that stops publishing drops out after the stale window, one that stops
gracefully at once; the queue's gauges (the cluster's on every node) are not counted twice. Then
two real ``avm serve --database-url`` processes: node A's ``/v1/metrics`` shows node B's requests.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from agentvm.adapters.local.prometheus_metrics import PrometheusMetrics
from agentvm.adapters.postgres.node_metrics import NodeMetricsBoard
from agentvm.adapters.postgres.queue_gauges import QueueGaugeSnapshot
from agentvm.client import AgentVMClient
from agentvm.hosts.cluster import ClusterNode
from agentvm.ports import MetricsQuery
from agentvm.records import TurnJob
from tests.integration.test_cluster_serve import cluster_database, node
from tests.postgres_server import shared_server

pytestmark = pytest.mark.postgres


class Clock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> int:
        return self.ms


def _job(n: int) -> TurnJob:
    return TurnJob(
        turnId=f"turn_{n}", tenantId="acme", containerId="c", imageId="img", sessionId=f"sess_{n}",
        agentId="agent", userMessageId=f"msg_{n}", requestId=f"r{n}", enqueuedAt=0, userSeq=n,
    )  # fmt: skip


def _series(exposition: bytes, name: str) -> list[str]:
    return [line for line in exposition.decode().splitlines() if line.startswith(name + "{")]


async def test_every_live_node_s_figures_on_any_node_labelled_by_node_and_stale_nodes_dropped():
    server = shared_server()
    url = server.create_database()
    clock = Clock()
    nodes = [await ClusterNode.start(url, node=name, pool_max_size=2) for name in ("node-a", "node-b")]
    try:
        metrics, boards = [], []
        for n in nodes:
            gauges = QueueGaugeSnapshot(n.queue)
            m = PrometheusMetrics(connections=n.connections, queue=gauges, now_ms=clock)
            board = NodeMetricsBoard(n.database, n.node, m.registry, now_ms=clock, stale_s=20)
            m.source = board
            metrics.append((m, gauges))
            boards.append(board)
        (a, gauges_a), (b, gauges_b) = metrics
        await nodes[0].queue.enqueue(_job(1))  # one job waiting: the cluster's queue depth is 1
        await gauges_a.refresh()
        await gauges_b.refresh()
        for _ in range(3):
            a.request("acme", "ws", None)
        b.request("acme", "http", None)
        b.request("other", "http", "not_found")
        for board in boards:
            await board.publish()
        for board in boards:
            await board.refresh()

        assert boards[0].nodes() == boards[1].nodes() == ["node-a", "node-b"]
        text, _ = a.exposition(None)
        requests = _series(text, "avm_requests_total")
        assert sum('node="node-a"' in line for line in requests) == 1
        assert sum('node="node-b"' in line for line in requests) == 2
        assert 'node="node-b"' in "".join(_series(text, "process_resident_memory_bytes"))
        assert _series(text, "avm_queue_depth") == ['avm_queue_depth{tenant="acme"} 1.0']  # once
        view = await a.view(MetricsQuery(tenant_id=None))
        assert view["requests"]["total"] == 5 and view["requests"]["errors"] == 1
        assert view["requests"]["byTransport"] == {
            "http": {"total": 2, "errors": 1},
            "ws": {"total": 3, "errors": 0},
        }
        assert view["queue"]["depth"] == 1
        acme = await b.view(MetricsQuery(tenant_id="acme"))  # node B sees node A's figures too
        assert acme["requests"]["total"] == 4 and acme["requests"]["errors"] == 0
        tenant_text, _ = b.exposition("acme")
        assert "other" not in tenant_text.decode() and "process_" not in tenant_text.decode()

        # node B stops publishing (dead): past the stale window node A no longer shows it
        clock.ms += 21_000
        await boards[0].publish()
        await boards[0].refresh()
        assert boards[0].nodes() == ["node-a"]
        assert (await a.view(MetricsQuery(tenant_id=None)))["requests"]["total"] == 3
        # node B is back; then it stops gracefully (its row withdrawn): dropped at once
        await boards[1].publish()
        await boards[0].refresh()
        assert boards[0].nodes() == ["node-a", "node-b"]
        await boards[1].withdraw()
        await boards[0].refresh()
        assert boards[0].nodes() == ["node-a"]
    finally:
        for n in nodes:
            await n.aclose()
        server.drop_database(url)


async def _metrics_text(http: str) -> str:
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"{http}/v1/metrics", params={"format": "prometheus"})
        answer.raise_for_status()
        return answer.text


async def test_node_a_s_metrics_endpoint_shows_node_b_s_requests(tmp_path):
    with cluster_database() as url, node(tmp_path, "node-a", url) as a, node(tmp_path, "node-b", url) as b:
        async with AgentVMClient.connect(b.url) as client:
            await client.request("image_create", containerId="u", config={"name": "M"}, check=True)
        deadline = time.monotonic() + 30  # node B publishes every 5 s, node A reads every 5 s
        text = await _metrics_text(a.http)
        while not _ws_requests_of(text, "node-b") and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            text = await _metrics_text(a.http)
        assert _ws_requests_of(text, "node-b") >= 1  # node B's image_create, seen on node A
        assert 'node="node-a"' in text  # and node A's own


def _ws_requests_of(text: str, node_id: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("avm_requests_total{") and f'node="{node_id}"' in line and 'transport="ws"' in line
    )
