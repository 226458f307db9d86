"""Webhooks on the cluster host: two nodes on one throwaway PostgreSQL record the same turn event
and both run the sender; the receiver (a real HTTP server on loopback) gets it once, signed
(verified with the ``standardwebhooks`` package), after a 500 and a retry."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from standardwebhooks import Webhook

from agentvm.config import Settings
from agentvm.hosts.cluster_server import cluster_runtime, start_node
from agentvm.turns.webhooks import BACKOFF_BASE_S, deliver_due, new_secret, record_event
from tests.integration.test_cluster_serve import cluster_database
from tests.unit.turns.test_webhooks import LaterClock, Receiver

pytestmark = pytest.mark.postgres


async def test_an_event_is_delivered_once_across_nodes(tmp_path):
    from agentvm.records import WebhookEndpoint

    clock = LaterClock()
    receiver = Receiver([500])
    with cluster_database() as url:
        nodes, hosts = [], []
        for name in ("node-a", "node-b"):
            settings = Settings(
                database_url=url,
                data_dir=tmp_path / name,
                database_pool_max_size=4,
                auth_secret="a-cluster-wide-server-secret-0123456789",
            )
            nodes.append(await start_node(settings))
            hosts.append(cluster_runtime(settings, nodes[-1]))
            hosts[-1].runtime.clock = clock
        try:
            a, b = (h.runtime for h in hosts)
            assert a.webhooks is not None and b.webhooks is not None
            secret = new_secret()
            endpoint = WebhookEndpoint(
                tenantId="acme",
                endpointId="whe_1",
                url=receiver.url,
                events=["turn.ended"],
                createdAt=clock.now_ms(),
            )
            await a.webhooks.put_endpoint(endpoint, secret)
            data = {"turnId": "turn_1", "status": "completed"}
            stored = [
                await record_event(rt, "acme", "turn.ended", "turn_1.completed.1", data) for rt in (a, b)
            ]
            assert stored == [1, 0]  # one delivery per event per endpoint, whichever node records it
            async with httpx.AsyncClient() as client:
                made = await asyncio.gather(
                    *(deliver_due(rt, client, allow_private=True) for rt in (a, b, a, b))
                )
                assert sum(made) == 1  # the 500
                clock.offset_ms += int(BACKOFF_BASE_S * 1000) + 1
                made = await asyncio.gather(
                    *(deliver_due(rt, client, allow_private=True) for rt in (a, b, a, b))
                )
                assert sum(made) == 1
            [delivery] = await b.webhooks.list_deliveries("acme", "whe_1", 10)
            assert (delivery.status, delivery.attempts) == ("delivered", 2)
            assert [h["webhook-id"] for h, _ in receiver.requests] == [delivery.deliveryId] * 2
            for headers, body in receiver.requests:
                assert Webhook(secret).verify(body, headers)["data"] == data
        finally:
            receiver.server.shutdown()
            for node in nodes:
                await node.aclose()
