"""Issue 28's acceptance on loopback: PostgreSQL, three ``avm serve --database-url`` nodes, the shipped
nginx config in front of them (rendered as tests/integration/test_nginx_proxy.py renders it), real
processes throughout.

* ``kill -9`` of the node running a streaming turn that has already run a tool step with an external
  effect (a non-idempotent ``POST`` HTTP tool against a counter server in this test, called by the
  fake LLM speaking Anthropic's wire format): the turn ends on another node with the full reply
  stored once, every subscriber's stream is complete (the ones whose socket died resume by
  ``afterSeq``, through nginx or on another node), and the tool ran exactly once.
* A rolling upgrade: with turns running in several sessions, each node in turn is stopped (SIGTERM:
  its running turns handed back and resumed elsewhere) and started again on its port (the
  migrations run again under their advisory lock); every turn ends once, no stream loses frames.
  "A new version" is the same code started again (docs/cluster.md, "Rolling upgrades").

Skipped without nginx or PostgreSQL (failed under ``CI=true``). Waits are generous: two busy cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
import pytest

from agentvm.client import AgentVMClient
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.streaming.frames import ATTEMPT_SPAN
from tests.integration.avm_process import free_port
from tests.integration.test_cluster_serve import _frames, _history, _text, cluster_database, node
from tests.integration.test_nginx_proxy import CONF, nginx_binary, render, start_nginx, wait_http

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.postgres

KEY = "sk-test-SECRET-do-not-leak-0123456789"
MODEL = "anthropic/claude-haiku-4-5"
REPLY = " ".join(f"word{i}" for i in range(40))  # the model's answer after the tool: 5 s at 8 words/s
NAMES = ("node-a", "node-b", "node-c")


class EffectCounter:
    """A loopback HTTP service whose ``POST /book`` is an external effect: each call counted."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        counter = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                counter.calls.append(json.loads(body or b"{}"))
                answer = json.dumps({"booked": len(counter.calls)}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/book"

    def __enter__(self) -> EffectCounter:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def nginx_in_front(tmp_path: Path, ports: list[int]) -> Iterator[str]:
    """The shipped deploy/nginx/agentvm.conf in front of ``ports``; yields its ``ws://`` URL."""
    listen = free_port()
    workdir = tmp_path / "nginx"
    workdir.mkdir()
    site = render(CONF.read_text(), listen=listen, upstreams=ports, access_log=workdir / "access.log")
    proxy = start_nginx(workdir, site)
    try:
        wait_http(f"http://127.0.0.1:{listen}/health", proxy)
        yield f"ws://127.0.0.1:{listen}/ws"
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)


def _running_on(url: str, session_id: str) -> str | None:
    """The node whose lease holds the session's running turn (the queue's row says)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT owner FROM turn_jobs WHERE session_id = %s AND state = 'running'", (session_id,)
        ).fetchone()
    return None if row is None else row[0]


async def _until_completed(events: asyncio.Queue[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    """Frames until a ``conversation_end`` that completed (a resumed turn first ends the attempt
    that was cut off: ``interrupted``)."""
    got: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while True:
            got.append(await events.get())
            if got[-1]["type"] == "conversation_end" and got[-1]["data"]["reason"] == "completed":
                return got


def _streaming_after_the_tool(events: list[dict[str, Any]]) -> bool:
    types = [e["type"] for e in events]
    return "tool_completed" in types and types[types.index("tool_completed") :].count("text_delta") >= 3


def _seqs(frames: list[dict[str, Any]]) -> list[int]:
    return [f["seq"] for f in frames]


def _last_attempt(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The frames after the last attempt that was cut off (``conversation_end`` interrupted)."""
    cut = [
        i
        for i, f in enumerate(frames)
        if f["type"] == "conversation_end" and f["data"]["reason"] == "interrupted"
    ]
    return frames[cut[-1] + 1 :] if cut else frames


def _text_of(frames: list[dict[str, Any]]) -> str:
    return "".join(f["data"]["text"] for f in frames if f["type"] == "text_delta")


def _ends(frames: list[dict[str, Any]]) -> list[str]:
    return [f["data"]["reason"] for f in frames if f["type"] == "conversation_end"]


async def test_kill_9_after_a_tool_step_the_turn_ends_elsewhere_and_the_tool_ran_once(tmp_path):
    nginx_binary()  # skip (or fail under CI) before starting anything
    config = FakeLLMConfig(ttft_ms=50, tokens_per_second=8, reply_tokens=5)
    with (
        FakeLLMServer(config) as fake,
        EffectCounter() as effects,
        cluster_database() as url,
        contextlib.ExitStack() as nodes,
    ):
        env = {
            "AVM_ANTHROPIC_API_KEY": KEY,
            "AVM_ANTHROPIC_BASE_URL": fake.base_url,
            "AVM_PROVIDER_RETRY_BASE_MS": "10",
            "AVM_TOOL_ALLOW_PRIVATE_NETWORKS": "true",  # the counter listens on loopback
        }
        servers = {name: nodes.enter_context(node(tmp_path, name, url, env=env)) for name in NAMES}
        proxied = nodes.enter_context(nginx_in_front(tmp_path, [s.port for s in servers.values()]))
        book = {
            "type": "http",
            "name": "book",
            "description": "Book a table (not idempotent: each call books one).",
            "method": "POST",
            "url": effects.url,
            "inputSchema": {"type": "object", "properties": {"table": {"type": "string"}}},
        }
        script = [
            {"text": "Booking.", "tool_calls": [{"name": "book", "input": {"table": "t1"}}]},
            {"text": REPLY},  # cut off by the kill
            {"text": REPLY},  # the resumed attempt's
        ]
        assert httpx.post(f"{fake.base_url}/_fake/script", json={"replies": script}).status_code < 300

        clients: dict[str, AgentVMClient] = {}
        clients["nginx"] = await AgentVMClient.open(proxied)  # reconnects through nginx
        for name, server in servers.items():  # one client on each node, that resumes by hand
            clients[name] = await AgentVMClient.open(server.url, reconnect=False)
        try:
            sender = clients["nginx"]
            image = (
                await sender.request(
                    "image_create",
                    containerId="u",
                    config={"name": "Booker", "model": MODEL, "tools": [book]},
                    check=True,
                )
            )["record"]
            session = image["sessionId"]
            for client in clients.values():
                await client.subscribe(session)
            await sender.request("message_send", imageId=image["imageId"], content="Book t1", check=True)

            # Wait on node A's client until the tool has run and the next reply streams.
            seen: list[dict[str, Any]] = []
            async with asyncio.timeout(60):
                while not _streaming_after_the_tool(seen):
                    seen.append(await clients["node-a"].events.get())
            assert len(effects.calls) == 1
            victim = _running_on(url, session)
            assert victim in servers, victim
            servers[victim].proc.send_signal(signal.SIGKILL)  # mid-stream, after the tool step
            await asyncio.to_thread(servers[victim].proc.wait, 10)
            survivor = next(name for name in NAMES if name != victim)

            # The dead node's client resumes on a live node from the last seq it got (afterSeq).
            resumed = await AgentVMClient.open(
                servers[survivor].url, resume_from=clients[victim], reconnect=False
            )
            await clients[victim].close()
            clients[victim] = resumed
            await resumed.resume()

            streams: dict[str, list[dict[str, Any]]] = {}
            for name, client in clients.items():  # the lease (10 s) runs out, a live node resumes
                before = seen if name == "node-a" else []
                streams[name] = _frames(before + await _until_completed(client.events, 90))
            history = await _history(sender, image["imageId"])
        finally:
            for client in clients.values():
                await client.close()

        requests = httpx.get(f"{fake.base_url}/_fake/requests").json()

    assert effects.calls == [{"table": "t1"}]  # the tool step ran once, not again on resume
    assert len(requests) == 3  # the tool call, the cut-off reply, the resumed one
    assert [m["subtype"] for m in history] == ["user", "assistant", "tool-call", "tool-result", "assistant"]
    assert _text(history[-1]) == REPLY  # the full reply, stored once
    for name, frames in streams.items():
        seqs = _seqs(frames)
        assert seqs == sorted(set(seqs)), name  # in order, nothing twice
        # Every subscriber got the resumed attempt's frames alike. Of the killed attempt's, each got
        # a prefix of what that node sent: a frame its own sockets got in the instant before kill -9
        # may never have reached the other nodes (nor storage), so the prefixes can differ by those.
        mine, theirs = _seqs(frames), _seqs(streams["nginx"])
        last_attempt = max(mine) // ATTEMPT_SPAN
        assert [q for q in mine if q // ATTEMPT_SPAN == last_attempt] == [
            q for q in theirs if q // ATTEMPT_SPAN == last_attempt
        ], name
        cut = [q for q in mine if q // ATTEMPT_SPAN < last_attempt]
        others = [q for q in theirs if q // ATTEMPT_SPAN < last_attempt]
        shorter, longer = sorted((cut, others), key=len)
        assert longer[: len(shorter)] == shorter, name
        assert _ends(frames) == ["interrupted", "completed"], name
        after_cut = _last_attempt(frames)
        assert _text_of(after_cut) == REPLY, name  # the resumed attempt's reply, whole
        assert [f["type"] for f in after_cut].count("tool_completed") == 0, name


async def test_a_rolling_restart_of_every_node_ends_every_turn_once_and_loses_no_frame(tmp_path):
    nginx_binary()
    sessions = 4
    with cluster_database() as url, contextlib.ExitStack() as stack:
        ports = {name: free_port() for name in NAMES}
        running: dict[str, contextlib.ExitStack] = {}
        servers: dict[str, Any] = {}

        def start(name: str) -> None:
            running[name] = contextlib.ExitStack()
            servers[name] = running[name].enter_context(
                node(tmp_path, name, url, delay_ms=150, port=ports[name])  # 6 s replies
            )

        for name in NAMES:
            start(name)
        stack.callback(lambda: [s.close() for s in running.values()])
        proxied = stack.enter_context(nginx_in_front(tmp_path, list(ports.values())))

        # Half the clients through nginx, half on one node each; all reconnect and resume by
        # themselves (the node's URL answers again once it is back).
        urls = [proxied if i % 2 == 0 else servers[NAMES[i % 3]].url for i in range(sessions)]
        clients = [await AgentVMClient.open(u, reconnect_within=120) for u in urls]
        try:
            images = []
            for i, client in enumerate(clients):
                record = (
                    await client.request(
                        "image_create", containerId=f"u{i}", config={"name": f"S{i}"}, check=True
                    )
                )["record"]
                images.append(record)
                await client.subscribe(record["sessionId"])
            messages = [f"session {i} " + " ".join(f"w{j}" for j in range(38)) for i in range(sessions)]
            for client, record, text in zip(clients, images, messages, strict=True):
                await client.request("message_send", imageId=record["imageId"], content=text, check=True)
            collecting = [asyncio.create_task(_until_completed(c.events, 240)) for c in clients]

            for name in NAMES:  # the rolling upgrade: one node at a time
                await asyncio.sleep(1.5)  # turns are streaming
                servers[name].proc.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(servers[name].proc.wait, 30)
                assert code == -signal.SIGTERM, servers[name].output()
                assert "cluster node stopped" in servers[name].output()
                running[name].close()
                await asyncio.to_thread(start, name)  # "the new version": started again, same port

            streams = [_frames(events) for events in await asyncio.gather(*collecting)]
            histories = [await _history(c, r["imageId"]) for c, r in zip(clients, images, strict=True)]
        finally:
            for client in clients:
                await client.close()

    for i, (frames, history, text) in enumerate(zip(streams, histories, messages, strict=True)):
        seqs = _seqs(frames)
        assert seqs == sorted(set(seqs)), i  # in order, none came twice
        # nothing lost: the attempt that ended has its whole reply in the stream (a socket that
        # resumed by afterSeq got what it missed from the store, its text deltas joined)
        assert _text_of(_last_attempt(frames)) == "Echo: " + text, i
        assert _ends(frames)[-1] == "completed" and set(_ends(frames)) <= {"interrupted", "completed"}, i
        assert _ends(frames).count("completed") == 1, i  # the turn ended once
        assert [m["subtype"] for m in history] == ["user", "assistant"], i  # its reply stored once
        assert _text(history[1]) == "Echo: " + text, i
