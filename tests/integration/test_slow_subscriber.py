"""A client that never reads its socket cannot stall anyone's turns (issue 15, finding 1).

The stalled client is a raw socket with a tiny receive buffer that upgrades to WebSocket, starts
turns with large replies on its own session, and never reads a byte. Without a bounded writer,
the first turn blocks on its first send to that socket and every turn slot after it waits too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import time

from agentvm.client import AgentVMClient
from agentvm.events import request
from tests.integration.avm_process import avm_serve, base_env, free_port


class StalledClient:
    """A WebSocket client that sends and never reads (so the server's sends to it back up)."""

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
        assert b" 101 " in head.split(b"\r\n", 1)[0], head

    def send(self, frame: dict) -> None:
        payload = json.dumps(frame).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def close(self) -> None:
        self.sock.close()


BIG = "word " * 40_000  # an echo reply of ~200 KB, sent twice (the deltas and the message)


async def _shared_turn(client: AgentVMClient, image: dict) -> list[dict]:
    await client.request("message_send", check=True, imageId=image["imageId"], content=BIG)
    return [e async for e in client.turn_events(timeout=60)]


async def test_a_client_that_never_reads_does_not_stall_other_subscribers_or_turns(tmp_path):
    env = base_env(AVM_ECHO_DELAY_MS="0", AVM_WS_SEND_TIMEOUT_S="2")
    with avm_serve(tmp_path, free_port(), env=env) as server:
        token = server.admin_token()
        async with AgentVMClient.connect(server.url, token=token) as setup:
            await setup.request("container_create", check=True, containerId="c")
            others = []
            for n in range(11):
                created = await setup.request(
                    "image_create", check=True, containerId="c", config={"name": f"A{n}"}
                )
                others.append(created["record"])
        async with AgentVMClient.connect(server.url, token=token) as healthy:
            shared = (
                await healthy.request("image_create", check=True, containerId="c", config={"name": "S"})
            )["record"]
            stalled = StalledClient(server.port, token)
            try:
                # The stalled socket subscribes to the healthy client's session and to others whose
                # big turns it starts: megabytes for a socket that reads nothing.
                stalled.send({"type": "subscribe", "sessionId": shared["sessionId"]})
                for n, image in enumerate(others):
                    stalled.send({"type": "subscribe", "sessionId": image["sessionId"]})
                    data = {"imageId": image["imageId"], "content": BIG}
                    stalled.send(request("message_send", f"req_{n}", data, now_ms=0))
                await asyncio.sleep(1.0)
                # Without a bounded writer, this turn's sink blocks on the stalled subscriber and the
                # healthy client never sees its turn end.
                events = await asyncio.wait_for(_shared_turn(healthy, shared), 60)
                deadline = time.monotonic() + 20  # the stalled one is closed once a frame waits 2 s
                while "fell behind" not in server.output() and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
            finally:
                stalled.close()
        assert events[-1]["type"] == "conversation_end"
        text = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
        assert text == "Echo: " + BIG
        assert "closing a connection that fell behind" in server.output()
