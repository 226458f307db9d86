"""Parity with the cluster host: the scripted conversation of ``tests/functions/test_aws_parity.py``
through a node wired as ``avm serve --database-url`` wires it (``hosts/cluster_server.py``:
``start_node`` and ``cluster_runtime``: every store, the queue, the registry and the push on a
throwaway PostgreSQL), against the local host. Same scripted model and flush window; the client
must see the same frames, in the same order."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.config import Settings
from agentvm.gateway.dispatch import handle_frame
from agentvm.hosts.aws import run_sync
from agentvm.hosts.cluster_server import cluster_runtime, start_node
from agentvm.ports import ConnectionInfo
from agentvm.turns.worker import process_turn
from tests.functions.test_aws_parity import REPLIES, TURNS, Conversation, _local_stream, _normalised
from tests.integration.test_cluster_serve import cluster_database

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from agentvm.runtime import Runtime

pytestmark = pytest.mark.postgres


def _cluster_stream(
    tmp_path: Path, url: str, after: Callable[[Runtime], Awaitable[None]] | None = None
) -> list[dict[str, Any]]:
    settings = Settings(database_url=url, data_dir=tmp_path / "node", database_pool_max_size=4)
    node = run_sync(start_node(settings))
    try:
        host = cluster_runtime(settings, node)
        rt = dataclasses.replace(
            host.runtime, models=SingleModelResolver(ScriptedModelClient(REPLIES)), turns=TURNS
        )
        received: list[dict[str, Any]] = []

        async def deliver(payload: str) -> None:
            received.append(json.loads(payload))

        node.push.attach("conn_cluster", deliver)
        run_sync(rt.connections.register(ConnectionInfo("conn_cluster", "default", rt.clock.now_ms())))

        async def send(frame: dict[str, Any]) -> None:
            for payload in await handle_frame(rt, "conn_cluster", json.dumps(frame)):
                await node.push.send("conn_cluster", payload)

        Conversation(
            lambda frame: run_sync(send(frame)),
            lambda: run_sync(node.queue.drain(lambda job: process_turn(rt, job))),
            lambda: received,
        ).play()
        if after is not None:
            run_sync(after(host.runtime))
        return received
    finally:
        run_sync(node.aclose())


def test_the_cluster_host_sends_the_client_what_the_local_host_sends(tmp_path):
    local = _local_stream(tmp_path)
    with cluster_database() as url:
        cluster = _cluster_stream(tmp_path, url)
    types = [f["type"] for f in cluster]
    assert types.count("conversation_end") == 3 and types[-1] == "image_get_response"
    assert types.count("tool_result") == 1 and types.count("message_stop") == 4
    assert _normalised(cluster) == _normalised(local)
    history = next(f for f in cluster if f["type"] == "image_messages_response")["data"]["messages"]
    assert [m["subtype"] for m in history].count("assistant") == 4  # every reply stored once


def test_the_cluster_node_wires_every_port_the_local_host_wires_on_postgresql(tmp_path):
    from agentvm.hosts.local import local_runtime

    local = local_runtime(Settings(data_dir=tmp_path / "local")).runtime
    with cluster_database() as url:
        settings = Settings(
            database_url=url,
            data_dir=tmp_path / "node",
            database_pool_max_size=2,
            knowledge_exact_below=50_000,  # AVM_KNOWLEDGE_EXACT_BELOW reaches the pgvector search
        )
        node = run_sync(start_node(settings))
        try:
            cluster = cluster_runtime(settings, node).runtime
        finally:
            run_sync(node.aclose())
    wired = {f.name for f in dataclasses.fields(local) if getattr(local, f.name) is not None}
    assert wired <= {f.name for f in dataclasses.fields(cluster) if getattr(cluster, f.name) is not None}
    # MCP servers' questions: rows of PostgreSQL, so an answer landing on any node reaches the call
    # (docs/mcp.md, "Elicitation"; tests/integration/test_cluster_turns.py answers one across nodes)
    assert type(cluster.elicitations.store).__module__ == "agentvm.adapters.postgres.elicitations"
    assert node.elicitations is not None and node.elicitations.on_answer == cluster.elicitations.wake
    on_sqlite = {
        f.name: type(getattr(cluster, f.name)).__name__
        for f in dataclasses.fields(cluster)
        if type(getattr(cluster, f.name)).__module__.startswith("agentvm.adapters.local.sqlite")
    }
    # the purge is the local host's code over the PostgreSQL store and reply cache
    assert on_sqlite == {"tenant_purge": "LocalTenantPurge"}
    assert type(cluster.store).__module__ == "agentvm.adapters.postgres.store"
    assert type(cluster.knowledge_index).__module__ == "agentvm.adapters.postgres.knowledge"
    assert cluster.knowledge_index.exact_below == 50_000  # type: ignore[attr-defined]
    assert cluster.queue is node.queue and cluster.push is node.push and cluster.signals is node.signals


def test_a_deleted_tenants_conversations_are_purged_from_postgresql(tmp_path):
    purged: dict[str, Any] = {}

    async def purge(rt: Runtime) -> None:
        [container] = await rt.store.list_containers("default")
        image = (await rt.store.list_images("default", container.containerId))[0]
        purged["messages_before"] = len(await rt.store.list_messages(image.sessionId))
        assert rt.tenant_purge is not None
        purged["count"] = await rt.tenant_purge.purge_tenant("default")
        purged["containers_after"] = await rt.store.list_containers("default")
        purged["image_after"] = await rt.store.get_image("default", image.imageId)
        purged["messages_after"] = await rt.store.list_messages(image.sessionId)

    with cluster_database() as url:
        _cluster_stream(tmp_path, url, after=purge)
    assert purged["messages_before"] == 9 and purged["count"] > 0
    assert purged["containers_after"] == [] and purged["image_after"] is None
    assert purged["messages_after"] == []
