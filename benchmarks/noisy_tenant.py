"""Noisy tenant: one tenant at every cap at once, while another tenant's echo turns and ``/health``
are timed, side by side with the same measurement on an idle server (issue 25).

A real ``avm serve`` with API keys and lowered caps, so that a two-core run reaches each of them:
``AVM_MAX_CONNECTIONS_PER_TENANT`` 100, ``AVM_MAX_API_KEYS_PER_TENANT`` 10,
``AVM_TENANT_STORAGE_BYTES`` 1 MB, ``AVM_SANDBOX_WORKSPACE_MB`` 20 and ``AVM_HTTP_BODY_TIMEOUT_S``
5. The **noisy** tenant, from 127.0.0.2 where its sockets are its own (per-address caps are
separate defences), at once:

- opens WebSockets until its tenant cap refuses them (``CONNECTIONS`` tries) and holds them;
- mints keys until the key cap refuses (``KEYS`` tries);
- sends 100 KB messages until the storage quota refuses them;
- trickles ``SLOW_BODIES`` request bodies a byte a second (cut by the body deadline);
- runs sandbox jobs: a fork bomb, eight processes filling memory, and a job filling the workspace.

The **quiet** tenant runs ``--turns`` echo turns one after another (``message_send`` to
``conversation_end``) while ``/health`` is polled every 20 ms, first on the idle server, then
during the noise. Reported: the quiet tenant's turn and ``/health`` latency in both phases, and
what the noisy tenant got and was refused.

Run: ``./dev python -m benchmarks.noisy_tenant [--turns 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agentvm.client import AgentVMClient
from benchmarks.procs import avm_serve, create_key, raise_fd_limit
from benchmarks.sandbox_calls import markdown_table

NOISY_ADDRESS = "127.0.0.2"
CONNECTIONS, KEYS, SLOW_BODIES = 150, 20, 100
CAPS = {
    "AVM_MAX_CONNECTIONS_PER_TENANT": "100",
    "AVM_MAX_API_KEYS_PER_TENANT": "10",
    "AVM_TENANT_STORAGE_BYTES": str(1_000_000),
    "AVM_SANDBOX_WORKSPACE_MB": "20",
    "AVM_HTTP_BODY_TIMEOUT_S": "5",
    # The quiet tenant's session grows by two messages a turn: no compaction in the middle of the
    # measure (the echo model says its summary at 20 ms a word: a 2-9 s turn that is not noise).
    "AVM_HISTORY_WINDOW": "10000",
    "AVM_COMPACTION_THRESHOLD_TOKENS": "0",
}
JOBS = [
    "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
    "import subprocess as s\nps=[s.Popen(['python3','-c','x=bytearray(100<<20);import time;time.sleep(5)'])"
    " for _ in range(8)]\n[p.wait() for p in ps]",
    "import os\nfor i in range(100000): open(f'f{i}','wb').write(os.urandom(1<<20))",
]


def _websocket(port: int, token: str) -> tuple[socket.socket, bool]:
    """A raw WebSocket upgrade from the noisy address: (the socket, whether it was accepted)."""
    sock = socket.socket()
    sock.bind((NOISY_ADDRESS, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head and (chunk := sock.recv(1)):
        head += chunk
    return sock, b" 101 " in head.split(b"\r\n", 1)[0]


def _slow_body(port: int, token: str) -> socket.socket:
    sock = socket.socket()
    sock.bind((NOISY_ADDRESS, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        (
            f"POST /v1/auth/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        ).encode()
    )
    return sock


async def _noise(port: int, url: str, token: str, stop: asyncio.Event) -> dict[str, Any]:
    """Every cap of the noisy tenant at once, until ``stop``; returns what it got and was refused."""
    got: dict[str, Any] = {}
    sockets: list[socket.socket] = []

    async def connections() -> None:
        opened = [await asyncio.to_thread(_websocket, port, token) for _ in range(CONNECTIONS)]
        sockets.extend(s for s, _ in opened)
        got["websockets accepted / tried"] = f"{sum(ok for _, ok in opened)} / {CONNECTIONS}"

    async def keys(http: httpx.AsyncClient) -> None:
        answers = [
            (await http.post("/v1/auth/keys", json={"scopes": ["client"], "name": f"k{i}"})).status_code
            for i in range(KEYS)
        ]
        got["keys minted / tried"] = f"{answers.count(201) + answers.count(200)} / {KEYS}"

    async def storage(client: AgentVMClient, image_id: str) -> None:
        stored = refused = 0
        while not stop.is_set() and refused < 3:
            answer = await client.request("message_send", imageId=image_id, content="x" * 100_000)
            if answer.get("error"):
                refused += 1
                error = answer["error"]
                got["storage refused with"] = error.get("code") if isinstance(error, dict) else error
            else:
                stored += 1
                async for frame in client.turn_events(timeout=60):
                    if frame["type"] == "conversation_end":
                        break
        got["100 KB messages stored before the quota"] = stored

    async def slow_bodies() -> None:
        held = [await asyncio.to_thread(_slow_body, port, token) for _ in range(SLOW_BODIES)]
        sockets.extend(held)
        while not stop.is_set():
            for sock in held:
                try:
                    sock.send(b" ")
                except OSError:
                    pass
            await asyncio.sleep(1)
        cut = 0
        for sock in held:
            sock.setblocking(False)
            try:
                cut += b" 408 " in sock.recv(200) or sock.recv(1) == b""
            except OSError:
                pass
        got["slow bodies answered 408 or closed / held"] = f"{cut} / {SLOW_BODIES}"

    async def jobs(client: AgentVMClient, image_id: str) -> None:
        said = []
        for code in JOBS:
            content = f"/tool python {json.dumps({'code': code})}"
            answer = await client.request("message_send", imageId=image_id, content=content)
            if answer.get("error"):  # e.g. the storage account already full
                error = answer["error"]
                said.append(f"refused: {error.get('code') if isinstance(error, dict) else error}"[:60])
                continue
            async for frame in client.turn_events(timeout=120):
                if frame["type"] == "tool_result":
                    said.append(frame["data"]["result"].rsplit("[", 1)[-1].rstrip("]\n")[:40])
                if frame["type"] == "conversation_end":
                    break
        got["sandbox jobs stopped by"] = "; ".join(said)

    transport = httpx.AsyncHTTPTransport(local_address=NOISY_ADDRESS)
    base = url.replace("ws://", "http://").rsplit("/ws", 1)[0]
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(base_url=base, headers=headers, transport=transport) as http,
        AgentVMClient.connect(url, token=token) as client,
    ):
        images = []
        for name in ("messages", "jobs"):  # a session and a client each: their turns never mix
            await client.request("container_create", check=True, containerId=name)
            config = {"name": name, "tools": [{"type": "sandbox", "wallS": 20, "memoryMb": 512}]}
            created = await client.request("image_create", check=True, containerId=name, config=config)
            images.append(created["record"]["imageId"])
        async with AgentVMClient.connect(url, token=token) as jobs_client:
            await asyncio.gather(
                connections(),
                keys(http),
                storage(client, images[0]),
                slow_bodies(),
                jobs(jobs_client, images[1]),
            )
    for sock in sockets:
        sock.close()
    return got


async def _quiet(url: str, token: str, image_id: str, turns: int) -> dict[str, list[float]]:
    base = url.replace("ws://", "http://").rsplit("/ws", 1)[0]
    health: list[float] = []
    stop = asyncio.Event()

    async def poll(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            (await http.get("/health")).raise_for_status()
            health.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.02)

    took = []
    async with httpx.AsyncClient(base_url=base) as http, AgentVMClient.connect(url, token=token) as client:
        poller = asyncio.create_task(poll(http))
        for i in range(turns):
            t0 = time.perf_counter()
            await client.request("message_send", check=True, imageId=image_id, content=f"ping {i}")
            async for frame in client.turn_events(timeout=120):
                if frame["type"] == "conversation_end":
                    break
            took.append((time.perf_counter() - t0) * 1000)
        stop.set()
        await poller
    return {"turn": took, "health": health}


def _summary(phase: str, measured: dict[str, list[float]]) -> dict[str, Any]:
    row: dict[str, Any] = {"phase": phase}
    for name, values in measured.items():
        values = sorted(values)
        row[f"quiet {name} p50 ms"] = round(statistics.median(values), 1)
        row[f"quiet {name} p99 ms"] = round(values[min(len(values) - 1, int(len(values) * 0.99))], 1)
        row[f"quiet {name} max ms"] = round(values[-1], 1)
    return row


async def run(turns: int = 20) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    raise_fd_limit()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        noisy_token = create_key(data_dir, "noisy")
        quiet_token = create_key(data_dir, "quiet")
        with avm_serve(data_dir, CAPS, open_mode=False) as server:
            port = int(server.url.rsplit(":", 1)[1].split("/")[0])
            async with AgentVMClient.connect(server.url, token=quiet_token) as setup:
                await setup.request("container_create", check=True, containerId="q")
                config = {"name": "quiet", "model": "echo/echo-1"}
                image = (await setup.request("image_create", check=True, containerId="q", config=config))[
                    "record"
                ]
            idle = await _quiet(server.url, quiet_token, image["imageId"], turns)
            stop = asyncio.Event()
            noise = asyncio.create_task(_noise(port, server.url, noisy_token, stop))
            noise_started = time.monotonic()
            await asyncio.sleep(3)  # the caps are reached
            during = await _quiet(server.url, quiet_token, image["imageId"], turns)
            body_deadline = float(CAPS["AVM_HTTP_BODY_TIMEOUT_S"])  # the slow bodies' fate is seen
            await asyncio.sleep(max(0.0, noise_started + body_deadline + 2 - time.monotonic()))
            stop.set()
            got = await noise
    return [_summary("idle server", idle), _summary("noisy tenant at every cap", during)], got


def render(rows: list[dict[str, Any]], got: dict[str, Any], turns: int) -> str:
    return (
        "## Noisy tenant: one tenant at every cap, another's turns and /health timed (issue 25)\n\n"
        + (__doc__ or "").split("Run:")[0].split("\n", 1)[1].strip()
        + f"\n\nCommand: `./dev python -m benchmarks.noisy_tenant --turns {turns}`.\n\n"
        + markdown_table(rows)
        + "\nWhat the noisy tenant got: "
        + "; ".join(f"{name}: {value}" for name, value in got.items())
        + ".\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    rows, got = asyncio.run(run(args.turns))
    print(render(rows, got, args.turns))


if __name__ == "__main__":
    main()
