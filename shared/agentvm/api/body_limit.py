"""Request bodies over a size limit are refused before they are read (issue 15, finding 2).

FastAPI reads and parses a request's body before its dependencies run, so without this an
unauthenticated client could make the server buffer any amount of memory before the API key is
even looked at. A declared ``Content-Length`` over the limit is answered 413 at once; a body sent
without one (chunked) is counted as it arrives and cut at the limit. On AWS, API Gateway and
Lambda cap payloads too (10 MB and 6 MB); this limit is the tighter one.

A few routes take files (``wider``: a method, a path pattern and their own limit): knowledge
uploads (``api/knowledge.py``). Those handlers read the body themselves, after the caller is
authenticated, so the wider limit never buffers anything for an unknown client.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from agentvm.errors import FrameTooLarge
from agentvm.logs import log_refusal

if TYPE_CHECKING:
    import re
    from collections.abc import Awaitable, Callable, MutableMapping, Sequence

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

    def __init__(
        self, app: ASGIApp, max_bytes: int, wider: Sequence[tuple[str, re.Pattern[str], int]] = ()
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.wider = tuple(wider)

    def limit_of(self, scope: Scope) -> int:
        """The route's own limit if it has one (``wider``), else ``max_bytes``."""
        for method, path, limit in self.wider:
            if scope.get("method") == method and path.fullmatch(scope.get("path", "")):
                return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_of(scope)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(scope, send, limit)
            return
        received = 0
        started = exceeded = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise BodyTooLarge(_message(limit))  # stops the reading; FastAPI may wrap it
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if exceeded:  # whatever the app answers to a cut body (FastAPI: a 400), it is a 413
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._refuse(scope, send, limit)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, send, limit)

    async def _refuse(self, scope: Scope, send: Send, limit: int) -> None:
        client = scope.get("client")
        source = client[0] if client else "?"
        log_refusal(log, "HTTP request body refused", source=source, status=413, path=scope.get("path", ""))
        body = json.dumps({"error": {"code": BodyTooLarge.code, "message": _message(limit)}}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _message(limit: int) -> str:
    return f"request body exceeds the limit of {limit} bytes"


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


__all__ = ["BodyLimit", "BodyTooLarge"]
