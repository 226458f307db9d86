"""Several ``avm serve`` workers on one data dir (docs/scaling.md), as real processes.

The first tests start two workers on two ports (so that each client picks its worker; behind one
port the kernel picks) and check what must work across them: a turn running on one streams to a
subscriber connected to the other, that subscriber resumes on the other worker after losing its
connection, an interrupt reaches the turn from either worker, and one session's turns keep their
order whichever worker takes them. The last one runs ``avm serve --workers 2`` on one port.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import TYPE_CHECKING, Any

import httpx

from agentvm.client import AgentVMClient
from tests.integration.avm_process import avm_serve, base_env, free_port

if TYPE_CHECKING:
    from pathlib import Path

MESSAGE = " ".join(f"word{i}" for i in range(40))
REPLY = "Echo: " + MESSAGE  # the echo model's reply, one word every AVM_ECHO_DELAY_MS
ENV = {"AVM_ECHO_DELAY_MS": "25", "AVM_FLUSH_MS": "10"}  # ~1 s of streaming, many frames


@contextlib.contextmanager
def two_workers(data_dir: Path, **env: str):
    ports = free_port(), free_port()
    with (
        avm_serve(data_dir, ports[0], "--open", env=base_env(**{**ENV, **env, "AVM_WORKER_ID": "w0"})) as w0,
        avm_serve(data_dir, ports[1], "--open", env=base_env(**{**ENV, **env, "AVM_WORKER_ID": "w1"})) as w1,
    ):
        yield w0, w1


async def _image(client: AgentVMClient) -> dict[str, Any]:
    return (await client.request("image_create", containerId="u", config={"name": "W"}, check=True))["record"]


async def _last_event(client: AgentVMClient) -> dict[str, Any]:
    return [e async for e in client.turn_events(timeout=20)][-1]


def _turn_frames(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if "seq" in e]


def _check_reply(frames: list[dict[str, Any]]) -> None:
    seqs = [e["seq"] for e in frames]
    assert seqs == sorted(set(seqs))  # every frame once, in order
    assert "".join(e["data"]["text"] for e in frames if e["type"] == "text_delta") == REPLY
    assert [e["type"] for e in frames[-3:]] == ["message_stop", "assistant_message", "conversation_end"]


async def test_a_turn_on_one_worker_streams_to_a_subscriber_on_the_other_which_resumes_there(tmp_path):
    with two_workers(tmp_path) as (w0, w1):
        async with AgentVMClient.connect(w0.url) as sender, AgentVMClient.connect(w1.url) as watcher:
            img = await _image(sender)
            await watcher.subscribe(img["sessionId"])
            await sender.request("message_send", imageId=img["imageId"], content=MESSAGE, check=True)
            before: list[dict[str, Any]] = []
            while sum(e["type"] == "text_delta" for e in before) < 3:  # live, through w0's relay to w1
                before.append(await asyncio.wait_for(watcher.events.get(), 10))
            await watcher.close()  # the watcher loses its connection mid-turn...
            async with AgentVMClient.connect(w0.url, resume_from=watcher) as again:  # ...and comes back on w0
                await again.resume()
                after = [e async for e in again.turn_events(timeout=20)]
            sent = [e async for e in sender.turn_events(timeout=20)]
    _check_reply(_turn_frames(before + after))
    _check_reply(_turn_frames(sent))
    assert sum(e["type"] == "text_delta" for e in after) > 1  # resumed while it streamed


async def test_an_interrupt_sent_to_either_worker_stops_the_turn(tmp_path):
    with two_workers(tmp_path, AVM_ECHO_DELAY_MS="200") as (w0, w1):  # an 8 s reply
        async with AgentVMClient.connect(w0.url) as sender, AgentVMClient.connect(w1.url) as other:
            img = await _image(sender)
            await sender.request("message_send", imageId=img["imageId"], content=MESSAGE, check=True)
            while (await asyncio.wait_for(sender.events.get(), 10))["type"] != "text_delta":
                pass
            started = asyncio.get_running_loop().time()
            await other.request("agent_interrupt", imageId=img["imageId"], check=True)  # on w1
            events = [e async for e in sender.turn_events(timeout=20)]
            stopped_after = asyncio.get_running_loop().time() - started
    assert events[-1]["type"] == "conversation_end"
    assert events[-1]["data"]["reason"] == "interrupted"
    assert stopped_after < 2.0  # relayed at once, not found by a poll: the reply had 7 s to go


async def test_one_sessions_turns_keep_their_order_across_workers(tmp_path):
    with two_workers(tmp_path, AVM_ECHO_DELAY_MS="5") as (w0, w1):
        async with AgentVMClient.connect(w0.url) as a, AgentVMClient.connect(w1.url) as b:
            img = await _image(a)
            for i in range(6):  # alternate workers; each send is queued behind the one before
                await (a if i % 2 == 0 else b).request(
                    "message_send", imageId=img["imageId"], content=f"turn {i}", check=True
                )
            for _ in range(200):
                history = await a.request("image_messages", imageId=img["imageId"], check=True)
                if len(history["messages"]) == 12:
                    break
                await asyncio.sleep(0.05)
    texts = [
        m["content"][0]["text"] if isinstance(m["content"], list) else m["content"]
        for m in history["messages"]
    ]
    # user messages are stored as they are sent, replies as their turns end: one at a time, in order
    assert [t for t in texts if not t.startswith("Echo")] == [f"turn {i}" for i in range(6)]
    assert [t for t in texts if t.startswith("Echo")] == [f"Echo: turn {i}" for i in range(6)]


def _listeners(port: int) -> int:
    """How many sockets listen on ``port`` (Linux's /proc/net/tcp; state 0A is LISTEN). A worker
    binds its socket early but listens only once its app has started, and the kernel spreads new
    connections only over the sockets that listen: its relay socket existing says nothing yet."""
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return sum(int(local.rsplit(":", 1)[1], 16) == port and state == "0A" for _, local, _, state, *_ in rows)


async def test_avm_serve_workers_share_one_port(tmp_path):
    port = free_port()
    with avm_serve(tmp_path, port, "--open", "--workers", "2", env=base_env(**ENV)) as server:
        for _ in range(200):  # until both workers listen (the supervisor answers nothing itself)
            if _listeners(port) == 2:
                break
            await asyncio.sleep(0.1)
        assert _listeners(port) == 2
        clients = [await AgentVMClient.open(server.url) for _ in range(24)]
        try:
            images = await asyncio.gather(*(_image(c) for c in clients))
            db = sqlite3.connect(tmp_path / "agentvm.db")
            per_worker = dict(db.execute("SELECT worker, COUNT(*) FROM ws_connections GROUP BY worker"))
            await asyncio.gather(
                *(
                    c.request("message_send", imageId=img["imageId"], content="hello", check=True)
                    for c, img in zip(clients, images, strict=True)
                )
            )
            ends = await asyncio.gather(*(_last_event(c) for c in clients))
        finally:
            for c in clients:
                await c.close()
        assert httpx.get(f"{server.http}/health").status_code == 200
    assert set(per_worker) == {"w0", "w1"} and sum(per_worker.values()) == 24  # the kernel spread them
    assert all(e["type"] == "conversation_end" for e in ends)


async def test_either_workers_metrics_endpoint_answers_for_both(tmp_path):
    """With several workers the kernel hands /v1/metrics to any of them: each answers for all,
    every sample labelled with its worker (adapters/prometheus/board.py)."""
    with two_workers(tmp_path) as (w0, w1):
        async with AgentVMClient.connect(w0.url) as client:
            img = await _image(client)
            await client.request("message_send", imageId=img["imageId"], content="hi", check=True)
            await _last_event(client)
        deadline = asyncio.get_running_loop().time() + 30  # w0 publishes every 5 s, w1 reads every 5 s
        async with httpx.AsyncClient() as http:
            while True:
                answer = await http.get(f"{w1.http}/v1/metrics", params={"format": "prometheus"})
                answer.raise_for_status()
                turns = [
                    line for line in answer.text.splitlines()
                    if line.startswith("avm_turns_total{") and 'worker="w0"' in line
                ]  # fmt: skip
                if turns or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert turns and float(turns[0].rsplit(" ", 1)[1]) == 1  # w0's turn, seen on w1
            assert 'worker="w1"' in answer.text  # and w1's own figures
            summed = (await http.get(f"{w1.http}/v1/metrics")).json()
            assert summed["turns"]["total"] == 1  # the JSON view sums the workers
