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


class FlowControlledSocket:
    """A socket whose buffer fills: while ``paused`` a send waits (as uvicorn's does on its
    ``writable`` event) until the client reads again."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.writable = asyncio.Event()
        self.writable.set()
        self.closed: tuple[int, str] | None = None

    async def send_text(self, payload: str) -> None:
        await self.writable.wait()
        self.sent.append(payload)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)


async def test_a_frame_to_a_free_socket_is_written_before_send_returns_without_a_task():
    sock = Socket()
    writer = ConnectionWriter("c1", sock.send_text, sock.close)
    tasks_before = len(asyncio.all_tasks())
    await writer.send("f0")
    assert sock.sent == ["f0"]
    assert len(asyncio.all_tasks()) == tasks_before  # no writer task for it
    await writer.aclose()


async def test_a_send_that_must_wait_is_finished_by_the_writer_in_order_with_later_frames():
    sock = FlowControlledSocket()
    writer = ConnectionWriter("c1", sock.send_text, sock.close)
    await writer.send("f0")
    sock.writable.clear()  # the client stopped reading: the next send suspends
    await writer.send("f1")
    await writer.send("f2")
    await asyncio.sleep(0.01)
    assert sock.sent == ["f0"]
    sock.writable.set()  # it reads again
    await asyncio.sleep(0.01)
    assert sock.sent == ["f0", "f1", "f2"] and sock.closed is None
    await writer.send("f3")  # the queue drained: straight to the socket again
    assert sock.sent == ["f0", "f1", "f2", "f3"]
    await writer.aclose()


async def test_a_send_that_waits_past_the_timeout_after_starting_at_once_closes_the_connection():
    sock = FlowControlledSocket()
    writer = ConnectionWriter("c1", sock.send_text, sock.close, send_timeout_s=0.05)
    sock.writable.clear()
    await writer.send("f0")
    await writer.send("f1")
    await asyncio.sleep(0.2)
    assert writer.closed and sock.closed == (SLOW_CONSUMER_CLOSE, "fell behind: reconnect and resume")
    assert sock.sent == []
    sock.writable.set()
    await asyncio.sleep(0.01)
    assert sock.sent == []  # the send that timed out was abandoned, not completed late
    with pytest.raises(ConnectionGone):
        await writer.send("f2")
    await writer.aclose()


async def test_closing_the_writer_abandons_a_send_that_waits():
    sock = FlowControlledSocket()
    writer = ConnectionWriter("c1", sock.send_text, sock.close)
    sock.writable.clear()
    await writer.send("f0")
    await writer.aclose()
    sock.writable.set()
    await asyncio.sleep(0.01)
    assert sock.sent == []


async def test_a_socket_that_fails_at_once_marks_the_connection_gone():
    async def broken(payload: str) -> None:
        raise RuntimeError("Unexpected ASGI message 'websocket.send', after sending 'websocket.close'")

    sock = Socket()
    writer = ConnectionWriter("c1", broken, sock.close)
    await writer.send("f0")
    with pytest.raises(ConnectionGone):
        await writer.send("f1")
    await writer.aclose()


async def test_a_requests_answer_goes_out_before_the_frames_pushed_while_it_was_handled():
    """message_send's worker may stream before the handler returns: its frames wait for the answer."""
    sock = Socket()
    writer = ConnectionWriter("c1", sock.send_text, sock.close)
    await writer.send("before")
    writer.hold()
    await writer.send("message_start")
    await writer.send("text_delta")
    assert sock.sent == ["before"]
    await writer.answer(["message_send_response"])
    await writer.send("after")
    assert sock.sent == ["before", "message_send_response", "message_start", "text_delta", "after"]
    await writer.aclose()


async def test_frames_held_for_an_answer_count_against_the_queue_bound():
    sock = Socket()
    writer = ConnectionWriter("c1", sock.send_text, sock.close, max_frames=4)
    writer.hold()
    for i in range(4):
        await writer.send(f"f{i}")
    with pytest.raises(ConnectionGone):
        await writer.send("one too many")
    await asyncio.sleep(0.01)
    assert sock.closed == (SLOW_CONSUMER_CLOSE, "fell behind: reconnect and resume") and sock.sent == []
    await writer.aclose()
