"""The workers' shared connection registry and relay (adapters/local/sqlite/connections.py, relay.py),
two workers in one test process: each with its own SQLite connection and Unix socket, as each
worker process has."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.local.relay import RelayPush, RelaySignals
from agentvm.adapters.local.sqlite.connections import SqliteConnections
from agentvm.errors import ConnectionGone, RateLimited
from agentvm.ports import ConnectionInfo


def _info(conn: str, key: str | None = None) -> ConnectionInfo:
    return ConnectionInfo(connection_id=conn, tenant_id="t", connected_at=1, key_id=key)


@pytest.fixture
async def workers(tmp_path):
    made = []
    for name in ("w0", "w1"):
        connections = SqliteConnections(tmp_path / "agentvm.db", worker=name, max_per_key=2)
        relay = RelayPush(tmp_path / "workers", connections)
        await relay.start()
        made.append((connections, relay))
    yield made
    for connections, relay in made:
        await relay.aclose()
        connections.close()


async def test_a_frame_for_another_workers_connection_reaches_its_socket_in_order(workers):
    (c0, r0), (c1, r1) = workers
    received: list[str] = []

    async def socket_on_w1(payload: str) -> None:
        received.append(payload)

    await c1.register(_info("conn-b"))
    r1.attach("conn-b", socket_on_w1)
    for i in range(50):
        await r0.send("conn-b", f"frame {i}")  # from the turn on w0
    for _ in range(100):
        if len(received) == 50:
            break
        await asyncio.sleep(0.01)
    assert received == [f"frame {i}" for i in range(50)]


async def test_a_connection_nobody_holds_or_on_a_stopped_worker_is_gone(workers):
    (c0, r0), (c1, r1) = workers
    with pytest.raises(ConnectionGone):
        await r0.send("conn-unknown", "x")
    await c1.register(_info("conn-b"))
    await r1.aclose()  # w1 stops: its socket file goes, its rows stay until it starts again
    with pytest.raises(ConnectionGone):
        await r0.send("conn-b", "x")
    assert c1.forget_worker() == 1  # what w1 does when it starts again
    assert await c0.get("conn-b") is None


async def test_the_key_cap_counts_the_keys_connections_on_every_worker(workers):
    (c0, _), (c1, _) = workers
    await c0.register(_info("a", key="k1"))
    await c1.register(_info("b", key="k1"))
    with pytest.raises(RateLimited):
        await c0.register(_info("c", key="k1"))
    assert (len(c0), len(c1)) == (1, 1)  # each worker counts its own sockets for /v1/metrics
    await c1.remove("b")
    await c0.register(_info("c", key="k1"))


async def test_an_interrupt_fired_on_one_worker_reaches_the_turn_on_the_other(workers):
    (_, r0), (_, r1) = workers
    here, there = RelaySignals(), RelaySignals()
    here.relay, there.relay = r0, r1
    r1.on_cancel = there.fire_here
    event = there.event_for("turn-1")  # the turn runs on w1
    here.fire("turn-1")  # the interrupt arrived on w0
    await asyncio.wait_for(event.wait(), 2)
