"""A small async Python client for the AgentX v1 protocol as AgentVM serves it.

    async with AgentVMClient.connect("ws://127.0.0.1:8080/ws", token=API_KEY) as client:
        img = await client.request("image_create", containerId="user-alice", config={"name": "A"})
        await client.request("message_send", imageId=img["record"]["imageId"], content="Hi")
        async for event in client.turn_events():
            ...

Like AgentX's ``request()``: the ``requestId`` goes inside ``data``, a failed command resolves
with ``data.error`` (raise with ``check=True``), and sessions named in ``__subscriptions`` are
subscribed to automatically. Needs the ``websockets`` package (the ``local`` extra).

Resume (docs/protocol.md, "Resume"): the client remembers, per session, the seqs of the frames it
received, and drops a frame whose seq it has seen (a resume may deliver one twice). After a lost
connection, open a new client with ``resume_from=`` the old one and call ``resume()``: every
session is subscribed again from the last seq seen, so the app gets what it missed, then the live
stream, nothing twice. Frames the old client received but the app had not read yet stay readable::

    async with AgentVMClient.connect(url, token=API_KEY, resume_from=old) as client:
        await client.resume()
        async for event in client.turn_events():
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from typing import TYPE_CHECKING, Any

from agentvm.events import request as request_frame

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

TERMINAL_EVENTS = frozenset({"conversation_end", "error_occurred"})


class RequestFailed(Exception):
    def __init__(self, type_: str, data: dict[str, Any]) -> None:
        super().__init__(f"{type_}: {data.get('error')}")
        self.data = data


class SessionCursors:
    """Per session, the seqs of the frames received: what to resume from, what to drop as seen."""

    def __init__(self) -> None:
        self._seen: dict[str, set[int]] = {}
        self._last: dict[str, int] = {}
        self.sessions: set[str] = set()  # sessions followed: subscribed to, or seen frames of

    def last_seq(self, session_id: str) -> int | None:
        return self._last.get(session_id)

    def accept(self, frame: dict[str, Any]) -> bool:
        """False for a frame whose seq was already received for its session (drop it)."""
        seq = frame.get("seq")
        session_id = (frame.get("context") or {}).get("sessionId")
        if not isinstance(seq, int) or not isinstance(session_id, str):
            return True  # responses, and the few session events outside any turn
        seen = self._seen.setdefault(session_id, set())
        if seq in seen:
            return False
        seen.add(seq)
        self.sessions.add(session_id)
        if seq > self._last.get(session_id, 0):
            self._last[session_id] = seq
        return True


class AgentVMClient:
    def __init__(self, ws: Any, *, resume_from: AgentVMClient | None = None) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._subscribed: set[str] = set()  # on this connection
        self.cursors = resume_from.cursors if resume_from is not None else SessionCursors()
        # every non-response frame; a resuming client keeps the unread frames of the one before
        self.events: asyncio.Queue[dict[str, Any]] = (
            resume_from.events if resume_from is not None else asyncio.Queue()
        )
        self._reader = asyncio.create_task(self._read())

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        resume_from: AgentVMClient | None = None,
    ) -> AsyncIterator[AgentVMClient]:
        """``token``: an API key, sent as ``Authorization: Bearer`` on the upgrade request.
        ``resume_from``: the client of a lost connection, to ``resume()`` its sessions here."""
        import websockets

        if token is not None:
            headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
            client = cls(ws, resume_from=resume_from)
            try:
                yield client
            finally:
                client._reader.cancel()

    async def _read(self) -> None:
        async for raw in self._ws:
            frame = json.loads(raw)
            if "__payload" in frame:  # AgentX's reliable wrapper, if a server uses it
                await self._ws.send(json.dumps({"__ack": frame["__msgId"]}))
                frame = json.loads(frame["__payload"])
            if not self.cursors.accept(frame):
                continue  # a frame delivered twice (resume): the app already has it
            data = frame.get("data") or {}
            request_id = data.get("requestId", "")
            # A failed request also gets a system_error with its requestId: only the response resolves it.
            if frame.get("category") == "response" and request_id in self._pending:
                self._pending.pop(request_id).set_result(frame)
            else:
                await self.events.put(frame)

    async def request(
        self, type_: str, *, timeout: float = 30.0, check: bool = False, **data: Any
    ) -> dict[str, Any]:
        """Send ``<type_>_request``; returns the response's ``data``."""
        request_id = f"req_{int(time.time() * 1000)}_{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        await self.send(request_frame(type_, request_id, data, now_ms=int(time.time() * 1000)))
        response = (await asyncio.wait_for(future, timeout))["data"]
        for session_id in response.get("__subscriptions") or []:
            await self.subscribe(session_id)
        if check and response.get("error"):
            raise RequestFailed(type_, response)
        return response

    async def subscribe(self, session_id: str, *, after_seq: int | None = None) -> None:
        """Follow a session. With ``after_seq``, the server first sends what came after that seq."""
        if session_id in self._subscribed and after_seq is None:
            return
        self._subscribed.add(session_id)
        self.cursors.sessions.add(session_id)
        frame: dict[str, Any] = {"type": "subscribe", "sessionId": session_id}
        if after_seq is not None:
            frame["afterSeq"] = after_seq
        await self.send(frame)

    def last_seq(self, session_id: str) -> int | None:
        """The highest seq received for the session (None: no numbered frame yet)."""
        return self.cursors.last_seq(session_id)

    async def resume(self) -> None:
        """Subscribe again to every session followed (by this client or the one it resumes), from
        the last seq received; a session with no numbered frame yet is followed from now on."""
        for session_id in sorted(self.cursors.sessions):
            await self.subscribe(session_id, after_seq=self.cursors.last_seq(session_id))

    async def authenticate(self, token: str) -> None:
        """Send the ``auth`` frame browsers send (no reply on success; ``system_error`` otherwise)."""
        await self.send({"type": "auth", "headers": {"Authorization": f"Bearer {token}"}})

    async def send(self, frame: dict[str, Any]) -> None:
        await self._ws.send(json.dumps(frame))

    async def turn_events(self, *, timeout: float = 60.0) -> AsyncIterator[dict[str, Any]]:
        """Pushed events until the turn ends (``conversation_end`` or ``error_occurred``)."""
        while True:
            frame = await asyncio.wait_for(self.events.get(), timeout)
            yield frame
            if frame.get("type") in TERMINAL_EVENTS:
                return


__all__ = ["AgentVMClient", "RequestFailed", "SessionCursors"]
