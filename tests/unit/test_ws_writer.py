"""The local host's per-connection writer: sends never wait on the socket; a client that falls
behind is closed with 4008, not waited for."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.local.ws_writer import SLOW_CONSUMER_CLOSE, ConnectionWriter
from agentvm.errors import ConnectionGone


class Socket:
    def __init__(self, *, stuck: bool = False) -> None:
        self.stuck = stuck
        self.sent: list[str] = []
        self.closed: tuple[int, str] | None = None

    async def send_text(self, payload: str) -> None:
        if self.stuck:
            await asyncio.sleep(3600)
        self.sent.append(payload)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)


async def test_frames_go_out_in_order():
    sock = Socket()
    writer = ConnectionWriter("c1", sock.send_text, sock.close)
    for i in range(5):
        await writer.send(f"f{i}")
    await asyncio.sleep(0.01)
    assert sock.sent == [f"f{i}" for i in range(5)] and sock.closed is None
    await writer.aclose()


async def test_a_full_queue_closes_the_connection_instead_of_waiting():
    sock = Socket(stuck=True)
    writer = ConnectionWriter("c1", sock.send_text, sock.close, max_frames=16)
    for i in range(16):
        await asyncio.wait_for(writer.send(f"f{i}"), 0.1)  # never waits on the socket
    with pytest.raises(ConnectionGone):
        await writer.send("one too many")
    await asyncio.sleep(0.01)
    assert sock.closed == (SLOW_CONSUMER_CLOSE, "fell behind: reconnect and resume")
    with pytest.raises(ConnectionGone):
        await writer.send("after")
    await writer.aclose()


async def test_a_frame_that_waits_too_long_closes_the_connection():
    sock = Socket(stuck=True)
    writer = ConnectionWriter("c1", sock.send_text, sock.close, send_timeout_s=0.05)
    await writer.send("f0")
    await asyncio.sleep(0.2)
    assert writer.closed and sock.closed is not None and sock.closed[0] == SLOW_CONSUMER_CLOSE
    await writer.aclose()
