"""The Python SDK's side of resume: it drops frames it has seen and resubscribes from the last seq."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentvm.client import AgentVMClient


class FakeSocket:
    """What ``AgentVMClient`` uses of a ``websockets`` connection: ``send`` and async iteration."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.incoming: asyncio.Queue[str | None] = asyncio.Queue()

    async def send(self, raw: str) -> None:
        self.sent.append(json.loads(raw))

    def __aiter__(self) -> FakeSocket:
        return self

    async def __anext__(self) -> str:
        raw = await self.incoming.get()
        if raw is None:
            raise StopAsyncIteration
        return raw

    def push(self, *frames: dict[str, Any]) -> None:
        for frame in frames:
            self.incoming.put_nowait(json.dumps(frame))


def _frame(seq: int | None, session: str = "sess_1", type_: str = "text_delta") -> dict[str, Any]:
    frame: dict[str, Any] = {"type": type_, "data": {"text": f"t{seq}"}, "context": {"sessionId": session}}
    if seq is not None:
        frame["seq"] = seq
    return frame


async def _drain(client: AgentVMClient) -> list[dict[str, Any]]:
    await asyncio.sleep(0.01)  # let the reader task take what was pushed
    out = []
    while not client.events.empty():
        out.append(client.events.get_nowait())
    return out


async def test_frames_seen_before_are_dropped_and_the_last_seq_is_kept():
    ws = FakeSocket()
    client = AgentVMClient(ws)
    ws.push(_frame(100001), _frame(100002), _frame(100002), _frame(100001), _frame(100003))
    ws.push(_frame(None, type_="session_destroyed"), _frame(None, type_="session_destroyed"))
    ws.push(_frame(7, session="sess_2"))

    got = await _drain(client)

    assert [f.get("seq") for f in got] == [100001, 100002, 100003, None, None, 7]
    assert (client.last_seq("sess_1"), client.last_seq("sess_2"), client.last_seq("x")) == (100003, 7, None)
    client._reader.cancel()


async def test_a_resumed_client_subscribes_from_the_last_seq_and_still_drops_duplicates():
    old_ws = FakeSocket()
    old = AgentVMClient(old_ws)
    await old.subscribe("sess_quiet")  # followed, but nothing numbered received yet
    old_ws.push(_frame(100001), _frame(100002))
    await asyncio.sleep(0.01)
    old._reader.cancel()  # the connection is lost; the app has not read the two frames yet

    ws = FakeSocket()
    client = AgentVMClient(ws, resume_from=old)
    await client.resume()
    ws.push(_frame(100002), _frame(100003))  # a resume may send a frame twice

    assert ws.sent == [
        {"type": "subscribe", "sessionId": "sess_1", "afterSeq": 100002},
        {"type": "subscribe", "sessionId": "sess_quiet"},
    ]
    assert [f["seq"] for f in await _drain(client)] == [100001, 100002, 100003]
    client._reader.cancel()
