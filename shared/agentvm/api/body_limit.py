"""Request bodies over a size limit are refused before they are read (issue 15, finding 2).

FastAPI reads and parses a request's body before its dependencies run, so without this an
unauthenticated client could make the server buffer any amount of memory before the API key is
even looked at. A declared ``Content-Length`` over the limit is answered 413 at once; a body sent
without one (chunked) is counted as it arrives and cut at the limit. On AWS, API Gateway and
Lambda cap payloads too (10 MB and 6 MB); this limit is the tighter one.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from agentvm.errors import FrameTooLarge
from agentvm.logs import log_refusal

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("agentvm.api")


class BodyTooLarge(FrameTooLarge):
    """The request body is over the server's limit."""

    code = "payload_too_large"


class BodyLimit:
    """ASGI middleware: HTTP request bodies of at most ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send)
            return
        received = 0
        started = exceeded = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise BodyTooLarge(self._message())  # stops the reading; FastAPI may wrap it
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if exceeded:  # whatever the app answers to a cut body (FastAPI: a 400), it is a 413
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._refuse(scope, send)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, send)

    def _message(self) -> str:
        return f"request body exceeds the limit of {self.max_bytes} bytes"

    async def _refuse(self, scope: Scope, send: Send) -> None:
        client = scope.get("client")
        source = client[0] if client else "?"
        log_refusal(log, "HTTP request body refused", source=source, status=413, path=scope.get("path", ""))
        body = json.dumps({"error": {"code": BodyTooLarge.code, "message": self._message()}}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


__all__ = ["BodyLimit", "BodyTooLarge"]
