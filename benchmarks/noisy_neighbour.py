"""Noisy neighbour: does one tenant's flood of slow turns slow down another tenant's turns?

Issue 15, finding 1, at scale. A real ``avm serve`` with API keys and two tenants:

- the **flood** tenant starts ``--flood`` turns at once, each on its own session, against the fake
  provider streaming slowly (``FLOOD_TURN``: seconds per turn), and opens a WebSocket that
  subscribes to all of them and never reads a byte (tiny receive buffer);
- the **victim** tenant runs short echo turns one after another, first on the idle server
  (baseline), then while the flood runs; we time ``message_send`` to ``conversation_end``.

Run once with the default fair slots (``AVM_TURN_SLOTS`` 1000, ``AVM_TURN_SLOTS_PER_TENANT`` 750)
and once with the per-tenant share switched off (750 → 1000), side by side. Without the share,
the victim's turn queues behind the flood's waiting turns until slots free up.

Run: ``./dev python -m benchmarks.noisy_neighbour [--flood 1100] [--turns 7]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import socket
import statistics
import struct
import tempfile
import time
from pathlib import Path

from agentvm.client import AgentVMClient
from benchmarks.procs import avm_serve, create_key, fake_llm, raise_fd_limit

# A slow provider turn: 8 s to the first token, then 10 tokens at 5 per second (10 s in all). Slow
# to answer rather than heavy to stream: 1,100 of them hold slots without saturating this 2-core
# machine's CPU (which the server shares with the fake provider and this client), so what is
# measured is slot starvation, not CPU contention (that is issue 14's benchmark).
FLOOD_TURN = ["--ttft-ms", "8000", "--tokens-per-second", "5", "--reply-tokens", "10"]


class StalledSocket:
    """A WebSocket client that writes frames and never reads (so every send to it backs up)."""

    def __init__(self, port: int, token: str) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET /ws?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:  # the handshake response is the only thing ever read
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"upgrade refused: {head!r}")

    def send(self, frame: dict) -> None:
        payload = json.dumps(frame).encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = bytes([0x81, 0x80 | n])
        elif n < 65536:
            header = bytes([0x81, 0x80 | 126]) + struct.pack(">H", n)
        else:
            header = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def close(self) -> None:
        self.sock.close()


async def _victim_turns(url: str, token: str, image_id: str, n: int) -> list[float]:
    """Seconds from ``message_send`` to ``conversation_end`` of ``n`` echo turns, one after another."""
    out = []
    async with AgentVMClient.connect(url, token=token) as client:
        for i in range(n):
            t0 = time.monotonic()
            await client.request("message_send", check=True, imageId=image_id, content=f"ping {i}")
            async for frame in client.turn_events(timeout=300):
                if frame["type"] == "conversation_end":
                    break
            out.append(time.monotonic() - t0)
    return out


async def _start_flood(url: str, token: str, port: int, n: int) -> tuple[StalledSocket, list[str]]:
    """``n`` slow turns of the flood tenant, each on its own session; the stalled socket watches all."""
    stalled = StalledSocket(port, token)
    sessions = []
    async with AgentVMClient.connect(url, token=token) as client:
        await client.request("container_create", check=True, containerId="flood")
        for i in range(n):
            image = (
                await client.request(
                    "image_create", check=True, containerId="flood", config={"name": f"f{i}"}
                )
            )["record"]
            stalled.send({"type": "subscribe", "sessionId": image["sessionId"]})
            await client.request(
                "message_send", check=True, timeout=120, imageId=image["imageId"], content="flood " * 50
            )
            sessions.append(image["sessionId"])
    return stalled, sessions


async def _scenario(flood: int, turns: int, slots: int, per_tenant: int) -> dict[str, object]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        fake_llm(*FLOOD_TURN) as fake,
    ):
        data_dir = Path(tmp)
        flood_token = create_key(data_dir, "flood", rate_limit=0)
        victim_token = create_key(data_dir, "victim")
        env = {
            "ANTHROPIC_API_KEY": "bench",
            "ANTHROPIC_BASE_URL": fake.url,
            "AVM_TURN_SLOTS": str(slots),
            "AVM_TURN_SLOTS_PER_TENANT": str(per_tenant),
            "AVM_MAX_CONNECTIONS_PER_ADDRESS": "4096",
            "AVM_WS_FRAMES_PER_SECOND": "100000",  # the flood client creates images in a burst
            "AVM_TENANT_RATE_LIMIT_PER_MINUTE": "0",  # its 2,200 requests in a minute are the point
        }
        with avm_serve(data_dir, env, open_mode=False) as server:
            port = int(server.url.rsplit(":", 1)[1].split("/")[0])
            async with AgentVMClient.connect(server.url, token=victim_token) as setup:
                await setup.request("container_create", check=True, containerId="v")
                image = (
                    await setup.request(
                        "image_create",
                        check=True,
                        containerId="v",
                        config={"name": "victim", "model": "echo/echo-1"},
                    )
                )["record"]
            baseline = await _victim_turns(server.url, victim_token, image["imageId"], turns)
            t0 = time.monotonic()
            stalled, _ = await _start_flood(server.url, flood_token, port, flood)
            started_s = time.monotonic() - t0
            try:
                cpu0 = server.cpu_seconds()
                during = await _victim_turns(server.url, victim_token, image["imageId"], turns)
                cpu = server.cpu_seconds() - cpu0
                flood_fake_stats = await asyncio.to_thread(_stats, fake.url)
            finally:
                stalled.close()
    base, load = statistics.median(baseline), statistics.median(during)
    return {
        "flood_turns": flood,
        "slots_per_tenant": f"{per_tenant} of {slots}",
        "flood_start_s": round(started_s, 1),
        # flood turns the provider had finished when the victim's last turn ended
        "flood_turns_done_before_victim": flood_fake_stats.get("completed", 0),
        "victim_turn_ms_idle_p50": round(base * 1000, 1),
        "victim_turn_ms_flood_p50": round(load * 1000, 1),
        "victim_turn_ms_flood_max": round(max(during) * 1000, 1),
        "ratio_flood_vs_idle": round(load / base, 2),
        "ratio_max_vs_idle": round(max(during) / base, 1),
        "server_cpu_during_victim_s": round(cpu, 2),
    }


def _stats(url: str) -> dict[str, object]:
    import httpx

    return httpx.get(f"{url}/_fake/stats", timeout=5).json()


async def run(flood: int = 1100, turns: int = 7, slots: int = 1000) -> list[dict[str, object]]:
    raise_fd_limit()
    rows = []
    for per_tenant in (slots * 3 // 4, slots):  # fair share first, then the share switched off
        row = await _scenario(flood, turns, slots, per_tenant)
        print(json.dumps(row))
        rows.append(row)
    return rows


def render(rows: list[dict[str, object]]) -> str:
    from benchmarks.run_all import _table

    return (
        "## Noisy neighbour: another tenant's turn during a flood of slow turns (issue 15)\n\n"
        + (__doc__ or "").split("Run:")[0].strip()
        + "\n\n"
        + _table(rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flood", type=int, default=1100, help="slow turns of the flood tenant")
    parser.add_argument("--turns", type=int, default=7, help="victim turns per phase")
    parser.add_argument("--slots", type=int, default=1000, help="AVM_TURN_SLOTS (the default)")
    args = parser.parse_args()
    print(render(asyncio.run(run(args.flood, args.turns, args.slots))))


if __name__ == "__main__":
    main()
