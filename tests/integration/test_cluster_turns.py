"""Real turns across two cluster nodes: the queue and the fan-out on PostgreSQL, the gateway and the
turn worker as every host runs them.

Two ``ClusterNode``s on one database stand for two machines; each gets the harness's runtime with
its own queue, connection registry, push and signals. The conversation store stays the harness's
(SQLite, shared in-process: the Store on PostgreSQL is built on another branch), so what is tested
here is the queue and the fan-out under real turns: a client connected to node B sends a message,
the turn runs on node A, and B's client streams it; node A stops mid-turn, node B resumes the turn,
and the session ends answered once with the client's stream complete.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from agentvm.hosts.cluster import ClusterNode
from agentvm.ports import ConnectionInfo
from agentvm.turns.worker import process_turn
from tests.harness import ProtocolClient
from tests.postgres_server import shared_server

pytestmark = pytest.mark.postgres

REPLY = "one two three four five six seven eight"


async def _nodes(harness):
    server = shared_server()
    url = server.create_database()
    nodes = [await ClusterNode.start(url, node=name, pool_max_size=4) for name in ("node-a", "node-b")]
    runtimes = [
        dataclasses.replace(
            harness.rt, queue=n.queue, connections=n.connections, push=n.push, signals=n.signals
        )
        for n in nodes
    ]
    return server, url, nodes, runtimes


async def _client_on(rt, node: ClusterNode, connection_id: str) -> ProtocolClient:
    await rt.connections.register(ConnectionInfo(connection_id, "tenant-a", rt.clock.now_ms()))
    return ProtocolClient(rt, node.push, connection_id)


async def _until(predicate, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_a_turn_on_node_a_streams_to_a_client_on_node_b_and_survives_node_a_stopping(harness):
    server, url, (a, b), (rt_a, rt_b) = await _nodes(harness)
    consumers: list[asyncio.Task[None]] = []
    try:
        c = await _client_on(rt_b, b, "conn-on-b")
        img = (await c.request("image_create", containerId="u", config={"name": "A"}))["record"]
        await c.subscribe(img["sessionId"])
        harness.model.word_delay_s = 0.02
        harness.model.add(REPLY, REPLY)
        await c.request("message_send", imageId=img["imageId"], content="hi")  # enqueued by node B

        consumers.append(asyncio.create_task(a.queue.run(lambda job: process_turn(rt_a, job))))
        await _until(lambda: sum(f["type"] == "text_delta" for f in c.session_events()) >= 2)
        consumers[0].cancel()  # node A stops mid-turn (SIGTERM): its turn is handed back
        async with asyncio.timeout(10):
            await asyncio.gather(consumers[0], return_exceptions=True)

        consumers.append(asyncio.create_task(b.queue.run(lambda job: process_turn(rt_b, job))))
        await _until(
            lambda: (
                [f["data"]["reason"] for f in c.session_events() if f["type"] == "conversation_end"][-1:]
                == ["completed"]
            )
        )

        history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
        assert [m["subtype"] for m in history] == ["user", "assistant"]
        assert history[1]["content"] == [{"type": "text", "text": REPLY}]
        [usage] = await harness.store.list_usage("tenant-a")
        assert usage.status == "completed"
        assert len(harness.model.requests) == 2  # the reply was not stored when A stopped
        seqs = [f["seq"] for f in c.turn_frames()]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # in order, nothing twice
        ends = [f["data"]["reason"] for f in c.session_events() if f["type"] == "conversation_end"]
        assert ends == ["interrupted", "completed"]
        async with asyncio.timeout(10):  # the row is deleted just after the turn's last frame
            while await a.queue.pending():
                await asyncio.sleep(0.02)
    finally:
        for task in consumers:
            task.cancel()
        async with asyncio.timeout(10):
            await asyncio.gather(*consumers, return_exceptions=True)
        async with asyncio.timeout(10):
            await a.aclose()
        async with asyncio.timeout(10):
            await b.aclose()
        server.drop_database(url)


async def test_a_question_asked_on_node_a_is_answered_on_node_b(harness):
    """The test server's ``ask`` tool (official SDK, stdio) asks the user during a call running on
    node A; the client, connected to node B, answers there. The answer is a row of PostgreSQL, and
    its NOTIFY wakes node A's call (whose backstop read is set to a minute: only the notification
    can tell it within the test's time)."""
    from agentvm.adapters.llm.scripted import Calls
    from agentvm.adapters.mcp.client import SdkMcpConnector
    from agentvm.agent.tools.sources import ToolSources
    from agentvm.config import Settings
    from agentvm.hosts.cluster_server import cluster_elicitations
    from tests.mcp_servers.fixtures import stdio_config

    server, url, (a, b), (rt_a, rt_b) = await _nodes(harness)
    tools = ToolSources(
        mcp=SdkMcpConnector(connect_timeout_s=30), allow_private_networks=True, list_deadline_s=30
    )
    rt_a = dataclasses.replace(rt_a, tools=tools, elicitations=cluster_elicitations(Settings(), a))
    rt_b = dataclasses.replace(rt_b, tools=tools, elicitations=cluster_elicitations(Settings(), b))
    rt_a.elicitations.poll_s = 60.0
    consumer = asyncio.create_task(a.queue.run(lambda job: process_turn(rt_a, job)))
    try:
        c = await _client_on(rt_b, b, "conn-on-b")
        other = await _client_on(rt_b, b, "conn-of-b")
        await rt_b.connections.register(ConnectionInfo("conn-tenant-b", "tenant-b", rt_b.clock.now_ms()))
        stranger = ProtocolClient(rt_b, b.push, "conn-tenant-b")
        servers = {"people": stdio_config()}
        img = (await c.request("image_create", containerId="u", config={"mcpServers": servers}))["record"]
        await c.subscribe(img["sessionId"])
        harness.model.add(Calls(("ask", {"question": "Who?"})), "Thanks.")
        await c.request("message_send", imageId=img["imageId"], content="ask me")
        await _until(lambda: any(f["type"] == "tool_elicitation" for f in c.session_events()), 60)
        [asked] = [f["data"] for f in c.session_events() if f["type"] == "tool_elicitation"]
        foreign = await stranger.request(
            "elicitation_answer", elicitationId=asked["elicitationId"], action="decline"
        )
        assert foreign["code"] == "not_found"
        answered = await c.request(
            "elicitation_answer",
            elicitationId=asked["elicitationId"],
            action="accept",
            content={"name": "Ada", "age": 36},
        )
        assert answered["action"] == "accept"
        again = await other.request(
            "elicitation_answer", elicitationId=asked["elicitationId"], action="decline"
        )
        assert again["code"] == "not_found"  # taken once
        await _until(lambda: any(f["type"] == "conversation_end" for f in c.session_events()), 20)
        [result] = harness.model.requests[1].messages[-1].tool_results
        assert result.content == "accepted: Ada, 36"
        [ended] = [f["data"] for f in c.session_events() if f["type"] == "tool_elicitation_ended"]
        assert (ended["action"], ended["reason"]) == ("accept", "answered")
    finally:
        consumer.cancel()
        async with asyncio.timeout(10):
            await asyncio.gather(consumer, return_exceptions=True)
        async with asyncio.timeout(10):
            await a.aclose()
        async with asyncio.timeout(10):
            await b.aclose()
        server.drop_database(url)
