"""Fan-out across the nodes of a cluster on a real PostgreSQL (``adapters/postgres/push.py``).

Two nodes are two pools and two listening connections on one database, as on two machines: a
subscriber connected to node B gets node A's frames in order (small ones in the NOTIFY, large ones
through ``push_frames``), resumes by ``afterSeq`` across nodes through the real coalescing sink, a
connection whose node died is pruned, an interrupt reaches every node, and a lost listening
connection comes back.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest

from agentvm.adapters.postgres.push import PostgresSignals
from agentvm.errors import ConnectionGone
from agentvm.events import EventContext
from agentvm.hosts.cluster import ClusterNode
from agentvm.ports import ConnectionInfo
from agentvm.runtime import SystemClock
from agentvm.streaming.fanout import Fanout
from agentvm.streaming.sink import CoalescingSink
from tests.postgres_server import shared_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.postgres


class Node:
    """A ``ClusterNode`` and its clients."""

    def __init__(self, cluster: ClusterNode) -> None:
        self.cluster = cluster
        self.name = cluster.node
        self.database = cluster.database
        self.notifications = cluster.notifications
        self.connections = cluster.connections
        self.push = cluster.push
        self.signals = cluster.signals

    @property
    def fanout(self) -> Fanout:
        return Fanout(self.connections, self.push)

    async def client(self, connection_id: str) -> list[str]:
        """A WebSocket on this node: what it receives, in order."""
        received: list[str] = []

        async def send(payload: str) -> None:
            received.append(payload)

        await self.connections.register(ConnectionInfo(connection_id, "tenant-a", 1000))
        self.push.attach(connection_id, send)
        return received

    async def close(self) -> None:
        await self.cluster.aclose()


async def start_node(url: str, name: str) -> Node:
    node = await ClusterNode.start(url, node=name, pool_max_size=4)
    node.notifications.reconnect_delay_s = 0.1
    return Node(node)


@asynccontextmanager
async def two_nodes() -> AsyncIterator[tuple[Node, Node]]:
    server = shared_server()
    url = server.create_database()
    a = await start_node(url, "node-a")
    b = await start_node(url, "node-b")
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()
        server.drop_database(url)


async def until(predicate, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_a_subscriber_on_node_b_gets_node_a_frames_in_order_large_ones_included() -> None:
    async with two_nodes() as (a, b):
        on_b = await b.client("c-b")
        on_a = await a.client("c-a")
        await b.connections.subscribe("c-b", "ses_1")
        await a.connections.subscribe("c-a", "ses_1")
        big = "x" * 20_000  # over NOTIFY's 8000 bytes: goes through push_frames
        payloads = [json.dumps({"seq": i, "text": big if i % 25 == 7 else f"t{i}"}) for i in range(200)]
        subs = await a.fanout.subscriptions("ses_1")
        assert {s.connection_id for s in subs} == {"c-a", "c-b"}

        gone = await a.fanout.deliver([(s.connection_id, payloads) for s in subs])

        assert gone == set()
        await until(lambda: len(on_b) == 200)
        assert on_b == payloads
        assert on_a == payloads
        async with a.database.connection() as conn:
            left = await (await conn.execute("SELECT COUNT(*) FROM push_frames")).fetchone()
        assert left == (0,)  # the receiver took the large frames' rows


async def test_a_client_resuming_on_node_b_gets_the_running_turn_above_its_cursor_from_node_a() -> None:
    async with two_nodes() as (a, b):
        live = await b.client("c-live")
        await b.connections.subscribe("c-live", "ses_1")
        sink = CoalescingSink(
            session_id="ses_1",
            context=EventContext(containerId="c", imageId="i", agentId="a", sessionId="ses_1"),
            fanout=a.fanout,
            clock=SystemClock(),
            flush_s=0.0,
            subscriber_refresh_s=0,
            first_seq=100,
        )
        sink.emit("message_start", {"messageId": "m", "model": "x"})
        for i in range(5):
            sink.text(f"w{i} ")
            await asyncio.sleep(0.03)
        await until(lambda: len(live) >= 3)
        cursor = json.loads(live[1])["seq"]  # a client that saw two frames, then lost its socket

        resumed = await b.client("c-resumed")  # reconnects to node B and resumes from its cursor
        await b.connections.subscribe("c-resumed", "ses_1", after_seq=cursor)
        for i in range(5, 10):
            sink.text(f"w{i} ")
            await asyncio.sleep(0.03)
        sink.emit("message_stop", {"messageId": "m"})
        await sink.aclose()

        await until(lambda: json.loads(live[-1])["type"] == "message_stop")
        await until(lambda: bool(resumed) and json.loads(resumed[-1])["type"] == "message_stop")
        live_seqs = [json.loads(p)["seq"] for p in live]
        resumed_seqs = [json.loads(p)["seq"] for p in resumed]
        assert live_seqs == sorted(live_seqs) and len(set(live_seqs)) == len(live_seqs)
        assert resumed_seqs == [s for s in live_seqs if s > cursor]  # nothing missing, nothing twice
        text = "".join(
            json.loads(p)["data"].get("text", "") for p in live if json.loads(p)["type"] == "text_delta"
        )
        assert text == "".join(f"w{i} " for i in range(10))


async def test_a_connection_whose_node_stopped_is_gone_and_pruned() -> None:
    async with two_nodes() as (a, b):
        await b.client("c-b")
        await b.connections.subscribe("c-b", "ses_1")
        await b.push.aclose()  # node B stops (a dead node's heartbeat runs out the same way)

        with pytest.raises(ConnectionGone):
            await a.push.send("c-b", "{}")
        gone = await a.fanout.deliver([("c-b", ["{}"])])

        assert gone == {"c-b"}
        assert await a.connections.subscribers("ses_1") == []


async def test_an_interrupt_fired_on_one_node_reaches_the_others() -> None:
    async with two_nodes() as (a, b):
        event = b.signals.event_for("turn_1")  # the turn runs on node B
        assert isinstance(a.signals, PostgresSignals)

        a.signals.fire("turn_1")  # the interrupt arrived on node A

        await asyncio.wait_for(event.wait(), 5)


async def test_a_lost_listening_connection_reconnects_and_says_so() -> None:
    async with two_nodes() as (a, b):
        on_b = await b.client("c-b")
        await b.connections.subscribe("c-b", "ses_1")
        reconnected = asyncio.Event()
        b.notifications.on_reconnect(reconnected.set)
        async with a.database.connection() as conn:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'agentvm-listen-node-b'"
            )
        await asyncio.wait_for(reconnected.wait(), 10)

        await a.push.send("c-b", '{"after": "reconnect"}')

        await until(lambda: on_b == ['{"after": "reconnect"}'])


async def test_a_barrier_returns_after_every_frame_sent_to_the_node_before_it_was_written() -> None:
    async with two_nodes() as (a, b):
        on_b = await b.client("c-b")
        payloads = [json.dumps({"seq": i, "text": "x" * (20_000 if i == 49 else 10)}) for i in range(50)]
        for payload in payloads:
            await a.push.send("c-b", payload)  # committed: on their way through B's channel

        await b.push.barrier()  # what a turn resumed on B awaits before its first local frame

        assert on_b == payloads
