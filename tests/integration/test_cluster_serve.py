"""``avm serve --database-url``: real node processes on one throwaway PostgreSQL (docs/cluster.md).

Node A runs turns; node B is started with ``--no-turns`` (it serves sockets and HTTP, its queue
has no consumer), so a turn sent through B can only run on A: B's client streams it through the
fan-out (NOTIFY to B's channel). Then ``kill -9`` of the node running a streaming turn: a third
node, started mid-turn, takes the turn back when the dead node's lease runs out and ends it; the
reply is stored once and the subscriber on B gets the whole turn in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, base_env, free_port
from tests.postgres_server import as_url, shared_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.postgres

MESSAGE = " ".join(f"word{i}" for i in range(40))
REPLY = "Echo: " + MESSAGE  # the echo model's reply, one word every AVM_ECHO_DELAY_MS
# A reply that outlasts starting node C mid-turn (over 10 s seen on a busy 2-core machine): a
# shorter one ends on node A before node A is stopped, and nothing is left to resume.
STARTS_SLOWER = 400  # ms per word: 16 s for MESSAGE
SHARED_SECRET = "cluster-test-secret-" + "x" * 32  # every node of a cluster signs keys with one secret


@contextlib.contextmanager
def cluster_database() -> Iterator[str]:
    server = shared_server()
    url = server.create_database()
    try:
        yield as_url(url)
    finally:
        server.drop_database(url)


@contextlib.contextmanager
def node(
    tmp_path: Path,
    name: str,
    url: str,
    *args: str,
    delay_ms: int = 25,
    keys: bool = False,
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Any]:
    """A node on ``url``, open (tenant ``local``), or with ``keys`` on the cluster's shared secret;
    ``port`` to start it again where it was, ``env`` for more settings."""
    environment = base_env(
        AVM_DATABASE_URL=url,
        AVM_NODE_ID=name,
        AVM_ECHO_DELAY_MS=str(delay_ms),
        AVM_FLUSH_MS="10",
        AVM_DATABASE_POOL_MAX_SIZE="4",
        **({"AVM_AUTH_SECRET": SHARED_SECRET} if keys else {}),
        **(env or {}),
    )
    mode = () if keys else ("--open",)
    with avm_serve(tmp_path / name, port or free_port(), *mode, *args, env=environment) as server:
        yield server


async def _image(client: AgentVMClient) -> dict[str, Any]:
    return (await client.request("image_create", containerId="u", config={"name": "C"}, check=True))["record"]


async def _until_completed(client: AgentVMClient, timeout: float = 60) -> list[dict[str, Any]]:
    """Events until a ``conversation_end`` that completed (a resumed turn first ends the attempt
    that was cut off: ``interrupted``)."""
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while True:
            events.append(await client.events.get())
            last = events[-1]
            if last["type"] == "conversation_end" and last["data"]["reason"] == "completed":
                return events


def _frames(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if "seq" in e]


async def _history(client: AgentVMClient, image_id: str) -> list[dict[str, Any]]:
    return (await client.request("image_messages", imageId=image_id, check=True))["messages"]


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


async def test_a_client_on_node_b_streams_a_turn_that_runs_on_node_a(tmp_path):
    with (
        cluster_database() as url,
        node(tmp_path, "node-a", url) as a,
        node(tmp_path, "node-b", url, "--no-turns") as b,
    ):
        async with AgentVMClient.connect(b.url) as client:
            img = await _image(client)
            await client.request("message_send", imageId=img["imageId"], content=MESSAGE, check=True)
            events = [e async for e in client.turn_events(timeout=30)]
            history = await _history(client, img["imageId"])
        async with AgentVMClient.connect(a.url) as on_a:  # the same session, seen from node A
            history_on_a = await _history(on_a, img["imageId"])
        assert "turn queue consumer started" in a.output()
        assert "turn queue consumer started" not in b.output()
    frames = _frames(events)
    seqs = [e["seq"] for e in frames]
    assert seqs == sorted(set(seqs))  # every frame once, in order
    assert "".join(e["data"]["text"] for e in frames if e["type"] == "text_delta") == REPLY
    assert frames[-1]["type"] == "conversation_end" and frames[-1]["data"]["reason"] == "completed"
    assert [m["subtype"] for m in history] == ["user", "assistant"]  # the reply stored once
    assert _text(history[1]) == REPLY
    assert history_on_a == history


async def test_kill_9_of_the_node_running_a_streaming_turn_the_turn_ends_on_another_node(tmp_path):
    with (
        cluster_database() as url,
        node(tmp_path, "node-a", url, delay_ms=STARTS_SLOWER) as a,  # a 16 s reply
        node(tmp_path, "node-b", url, "--no-turns", delay_ms=STARTS_SLOWER) as b,
    ):
        async with AgentVMClient.connect(b.url) as client:
            img = await _image(client)
            await client.request("message_send", imageId=img["imageId"], content=MESSAGE, check=True)
            before: list[dict[str, Any]] = []
            while sum(e["type"] == "text_delta" for e in before) < 3:  # streaming, from node A
                before.append(await asyncio.wait_for(client.events.get(), 20))
            with node(tmp_path, "node-c", url, delay_ms=STARTS_SLOWER):  # room for the turn elsewhere
                a.proc.send_signal(signal.SIGKILL)  # the node running the turn dies mid-stream
                a.proc.wait(timeout=10)
                after = await _until_completed(client, 120)  # the lease (10 s) runs out, node C resumes
                history = await _history(client, img["imageId"])
        assert b.proc.poll() is None
    frames = _frames(before + after)
    seqs = [e["seq"] for e in frames]
    assert seqs == sorted(set(seqs))  # in order, nothing twice
    ends = [e["data"]["reason"] for e in frames if e["type"] == "conversation_end"]
    assert ends == ["interrupted", "completed"]  # the attempt cut off by the kill, then node C's
    resumed = frames[[e["type"] for e in frames].index("conversation_end") + 1 :]
    assert "".join(e["data"]["text"] for e in resumed if e["type"] == "text_delta") == REPLY
    assert [m["subtype"] for m in history] == ["user", "assistant"]  # the full reply, stored once
    assert _text(history[1]) == REPLY


async def test_sigterm_hands_the_running_turn_back_at_once(tmp_path):
    with (
        cluster_database() as url,
        node(tmp_path, "node-a", url, delay_ms=STARTS_SLOWER) as a,
        node(tmp_path, "node-b", url, "--no-turns", delay_ms=STARTS_SLOWER) as b,
    ):
        async with AgentVMClient.connect(b.url) as client:
            img = await _image(client)
            await client.request("message_send", imageId=img["imageId"], content=MESSAGE, check=True)
            before: list[dict[str, Any]] = []
            while sum(e["type"] == "text_delta" for e in before) < 3:
                before.append(await asyncio.wait_for(client.events.get(), 20))
            with node(tmp_path, "node-c", url, delay_ms=STARTS_SLOWER):
                a.proc.send_signal(signal.SIGTERM)  # a graceful stop (a rolling restart, a scale-in)
                stopped_at = asyncio.get_running_loop().time()
                code = await asyncio.to_thread(a.proc.wait, 20)
                after = []
                while not after or after[-1]["type"] != "message_start":  # the resumed attempt's
                    after.append(await asyncio.wait_for(client.events.get(), 30))
                resumed_after = asyncio.get_running_loop().time() - stopped_at
                after += await _until_completed(client, 120)
                history = await _history(client, img["imageId"])
    assert code == -signal.SIGTERM  # uvicorn re-raises the signal once its shutdown is done...
    assert "cluster node stopped" in a.output()  # ...which closed the node first
    frames = _frames(before + after)
    assert [e["data"]["reason"] for e in frames if e["type"] == "conversation_end"] == [
        "interrupted",
        "completed",
    ]
    assert [m["subtype"] for m in history] == ["user", "assistant"] and _text(history[1]) == REPLY
    # handed back at the stop, not found when its lease (10 s) ran out: node C started before it
    assert resumed_after < 5
    assert [m["subtype"] for m in history] == ["user", "assistant"]  # the full reply, stored once
    assert _text(history[1]) == REPLY


async def test_keys_made_on_one_node_work_on_the_others_and_an_interrupt_reaches_the_turn(tmp_path):
    with (
        cluster_database() as url,
        node(tmp_path, "node-a", url, delay_ms=200, keys=True) as a,  # an 8 s reply
        node(tmp_path, "node-b", url, "--no-turns", delay_ms=200, keys=True) as b,
    ):
        admin = a.admin_token()  # printed by the first node; the second found it stored
        assert b.printed_tokens() == []
        created = httpx.post(  # a client key, made on node B
            f"{b.http}/v1/auth/keys",
            json={"scopes": ["client"]},
            headers={"Authorization": f"Bearer {admin}"},
        ).json()
        async with (
            AgentVMClient.connect(a.url, token=created["token"]) as sender,
            AgentVMClient.connect(b.url, token=created["token"]) as other,
        ):
            img = await _image(sender)
            assert (await other.request("container_list", check=True))["containerIds"] == ["u"]
            await sender.request("message_send", imageId=img["imageId"], content=MESSAGE, check=True)
            while (await asyncio.wait_for(sender.events.get(), 20))["type"] != "text_delta":
                pass
            started = asyncio.get_running_loop().time()
            await other.request("agent_interrupt", imageId=img["imageId"], check=True)  # on node B
            events = [e async for e in sender.turn_events(timeout=20)]
            stopped_after = asyncio.get_running_loop().time() - started
    assert events[-1]["type"] == "conversation_end" and events[-1]["data"]["reason"] == "interrupted"
    assert stopped_after < 4.0  # told to node A at once (NOTIFY avm_cancel): the reply had 7 s to go


async def test_metrics_show_the_clusters_queue_and_the_nodes_sockets(tmp_path):
    with cluster_database() as url, node(tmp_path, "node-b", url, "--no-turns") as b:  # no node runs turns
        async with AgentVMClient.connect(b.url) as client:
            img = await _image(client)
            await client.request("message_send", imageId=img["imageId"], content="hi", check=True)
            async with asyncio.timeout(20):  # the gauges' snapshot is refreshed every 5 s
                while True:
                    figures = httpx.get(f"{b.http}/v1/metrics?format=json").json()
                    if figures["queue"]["depth"] == 1:
                        break
                    await asyncio.sleep(0.2)
            assert figures["connections"]["active"] == 1
