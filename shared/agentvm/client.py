"""A small async Python client for the AgentX v1 protocol as AgentVM serves it.

    async with AgentVMClient.connect("ws://127.0.0.1:8080/ws", token=API_KEY) as client:
        img = await client.request("image_create", containerId="user-alice", config={"name": "A"})
        await client.request("message_send", imageId=img["record"]["imageId"], content="Hi")
        async for event in client.turn_events():
            ...

Like AgentX's ``request()``: the ``requestId`` goes inside ``data``, a failed command resolves
with ``data.error`` (raise with ``check=True``), and sessions named in ``__subscriptions`` are
subscribed to automatically. Needs the ``websockets`` package (the ``local`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

TERMINAL_EVENTS = frozenset({"conversation_end", "error_occurred"})


class RequestFailed(Exception):
    def __init__(self, type_: str, data: dict[str, Any]) -> None:
        super().__init__(f"{type_}: {data.get('error')}")
        self.data = data


class AgentVMClient:
    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._subscribed: set[str] = set()
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # every non-response frame
        self._reader = asyncio.create_task(self._read())

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls, url: str, *, token: str | None = None, headers: dict[str, str] | None = None
    ) -> AsyncIterator[AgentVMClient]:
        """``token``: an API key, sent as ``Authorization: Bearer`` on the upgrade request."""
        import websockets

        if token is not None:
            headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
            client = cls(ws)
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
        await self.send(
            {
                "type": f"{type_}_request",
                "timestamp": int(time.time() * 1000),
                "data": {**data, "requestId": request_id},
                "source": "command",
                "category": "request",
                "intent": "request",
            }
        )
        response = (await asyncio.wait_for(future, timeout))["data"]
        for session_id in response.get("__subscriptions") or []:
            await self.subscribe(session_id)
        if check and response.get("error"):
            raise RequestFailed(type_, response)
        return response

    async def subscribe(self, session_id: str, *, after_seq: int | None = None) -> None:
        if session_id in self._subscribed and after_seq is None:
            return
        self._subscribed.add(session_id)
        frame: dict[str, Any] = {"type": "subscribe", "sessionId": session_id}
        if after_seq is not None:
            frame["afterSeq"] = after_seq
        await self.send(frame)

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


__all__ = ["AgentVMClient", "RequestFailed"]
