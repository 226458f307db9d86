"""The provider SDKs' HTTP transport on the local host: HTTP/1.1 over asyncio, read on demand.

``avm serve`` holds up to a thousand model streams at once, each sending an SSE event per token
(35 a second in the standard turn). Through the SDKs' default transport (httpx → httpcore → h11
on anyio) every event is a wake-up of the event loop, a pure-Python parse of the chunked body and
a timer armed and cancelled: tens of microseconds per token, more than one core at 35,000 tokens
a second. This transport is what the SDKs are given instead (``http_client=httpx2.AsyncClient(
transport=ProviderTransport())``, the SDKs' documented way to choose a transport). The SDKs still
build, authenticate and send every request, read error responses and raise their typed errors;
what changes is below them:

- **httptools** (the C parser uvicorn uses) parses status, headers and the chunked body;
- the socket is **read only when the body is asked for**: once a read has buffered body bytes the
  transport stops reading (``pause_reading``) until they are taken. A stream whose consumer reads
  once per flush window (``agent/pacing.py``) is then read once per window, with every event that
  arrived since in one go, instead of once per token;
- connections are kept alive per origin (``keepalive_expiry_s``, at most ``max_idle`` idle ones
  each) and reused; a reused connection the server had closed (no byte of an answer) is retried
  once on a new one, before any byte of a response was seen, so no request is answered twice.

TLS uses the SDK's trust settings (``httpx2.create_ssl_context``); HTTP/2, proxies and Unix
sockets are not spoken here: with a proxy in the environment (``HTTPS_PROXY``...) the SDKs keep
their own transport, and ``AVM_PROVIDER_TRANSPORT=sdk`` turns this one off. Errors
are httpx's own (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``, ``ReadError``,
``RemoteProtocolError``), so the SDKs and ``adapters/llm/errors.py`` translate them as before.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import urllib.request
from collections import deque
from typing import TYPE_CHECKING, Any

import httptools
import httpx2

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

log = logging.getLogger("agentvm.llm.transport")

_DEFAULT_PORTS = {"http": 80, "https": 443}


class _Stale(Exception):
    """A reused keep-alive connection was closed by the server before any byte of an answer."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, its response parsed as it is read."""

    def __init__(self, origin: tuple[str, str, int]) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.idle_until = 0.0
        self.in_flight = False  # a request was sent and its response is not done with
        self._paused = False
        self._closed = False  # the server closed, or the socket failed
        self._error: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._start_response()

    def _start_response(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.seen_bytes = False  # any byte of this response arrived
        self._keep = False  # the server keeps the connection after this response
        self._body: list[bytes] = []
        self._until_close = False  # no length and not chunked: the body ends with the connection

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.in_flight:  # bytes nobody asked for on an idle connection: not reusable
            self._fail(httpx2.RemoteProtocolError("unexpected bytes on an idle connection"))
            return
        self.seen_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx2.RemoteProtocolError(f"invalid HTTP response: {exc}"))
            return
        if self._body and not self._paused and self.transport is not None:
            self.transport.pause_reading()  # read on: only when the body is asked for
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self._closed = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if exc is not None and self._error is None:
            self._error = httpx2.ReadError(str(exc) or type(exc).__name__)
        self._wake()

    # -- httptools callbacks ----------------------------------------------------------------
    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.headers_done = True
        names = {name.lower() for name, _ in self.headers}
        self._until_close = b"content-length" not in names and b"transfer-encoding" not in names
        self._keep = self._parser.should_keep_alive()  # only meaningful inside the callbacks

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True

    # -- used by the transport --------------------------------------------------------------
    @property
    def reusable(self) -> bool:
        return (
            not self._closed
            and self._error is None
            and self.transport is not None
            and (not self.transport.is_closing())
        )

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.in_flight = True
        self.transport.write(data)

    async def read_head(self, timeout: float | None) -> None:
        while not self.headers_done:
            if self._error is not None:
                raise self._error
            if self._closed:
                if not self.seen_bytes:
                    raise _Stale()
                raise httpx2.RemoteProtocolError("the server closed the connection before its answer ended")
            await self._wait(timeout)

    async def read_body(self, timeout: float | None) -> bytes:
        """The body bytes that arrived since the last call (waiting for some); b"" at its end."""
        while not self._body:
            if self.complete:
                return b""
            if self._error is not None:
                raise self._error
            if self._closed:
                if self._until_close:
                    self.complete = True
                    return b""
                raise httpx2.RemoteProtocolError("the server closed the connection before the body ended")
            if self._paused and self.transport is not None:
                self.transport.resume_reading()
                self._paused = False
            await self._wait(timeout)
        data = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body.clear()
        return data

    def keep_alive(self) -> bool:
        """Ready for the next request (the response was read to its end, the server keeps it)."""
        if not (self.complete and self.reusable and self._keep and not self._until_close):
            return False
        self.in_flight = False
        self._start_response()
        if self._paused and self.transport is not None:
            self.transport.resume_reading()  # idle: see the server close it
            self._paused = False
        return True

    def close(self) -> None:
        self._closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, error: Exception) -> None:
        self._error = error
        self.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx2.ReadTimeout("timed out waiting for the provider"))


class _Body(httpx2.AsyncByteStream):
    """A response body: read on demand; the connection goes back to the pool when it was read to
    its end, and is closed otherwise (a stream left early: the provider sees it go)."""

    def __init__(self, transport: ProviderTransport, conn: _Connection, timeout: float | None) -> None:
        self._transport = transport
        self._conn: _Connection | None = conn
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        while True:
            data = await conn.read_body(self._timeout)
            if not data:
                break
            self._transport.body_reads += 1
            yield data

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._transport.release(conn)


class ProviderTransport(httpx2.AsyncBaseTransport):
    """See the module docstring. ``ssl_context``: the trust used for https (the SDK's defaults)."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: int = 1024,
        keepalive_expiry_s: float = 5.0,
    ) -> None:
        self._ssl = ssl_context
        self._max_idle = max_idle
        self._expiry = keepalive_expiry_s
        self._idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self._open: set[_Connection] = set()
        self.body_reads = 0  # pieces of response bodies handed up so far: how often streams were read

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx2.create_ssl_context()
        return self._ssl

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in _DEFAULT_PORTS:
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        origin = (scheme, url.host, url.port or _DEFAULT_PORTS[scheme])
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        head, body = await _encode(request)
        for attempt in range(2):
            conn, reused = await self._connection(origin, timeouts.get("connect"), request)
            try:
                conn.send(head)
                if body:
                    conn.send(body)
                await conn.read_head(timeouts.get("read"))
            except _Stale:
                conn.close()
                self._open.discard(conn)
                if reused and attempt == 0:
                    continue  # the server had closed the idle connection: nothing was answered
                raise httpx2.RemoteProtocolError(
                    "the server closed the connection without an answer"
                ) from None
            except BaseException:
                conn.close()
                self._open.discard(conn)
                raise
            break
        return httpx2.Response(
            conn.status,
            headers=conn.headers,
            stream=_Body(self, conn, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": conn.reason.strip()},
            request=request,
        )

    async def _connection(
        self, origin: tuple[str, str, int], timeout: float | None, request: httpx2.Request
    ) -> tuple[_Connection, bool]:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.reusable and conn.idle_until > now:
                return conn, True
            conn.close()
            self._open.discard(conn)
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._ssl_context() if scheme == "https" else None
        sni = request.extensions.get("sni_hostname")
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(origin),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=(sni or host) if tls is not None else None,
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx2.ConnectError(f"connecting to {host}:{port} failed: {exc}") from None
        self._open.add(conn)
        return conn, False

    def release(self, conn: _Connection) -> None:
        """A response is over: keep its connection for the next request, or close it."""
        idle = self._idle.setdefault(conn.origin, deque())
        if len(idle) < self._max_idle and conn.keep_alive():
            conn.idle_until = time.monotonic() + self._expiry
            idle.append(conn)
            return
        conn.close()
        self._open.discard(conn)

    async def aclose(self) -> None:
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()


async def _encode(request: httpx2.Request) -> tuple[bytes, bytes]:
    """The request line and headers, and the body (chunked if the request says so)."""
    target = request.url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    chunked = False
    for name, value in request.headers.raw:
        if name.lower() == b"transfer-encoding" and value.lower() == b"chunked":
            chunked = True
        lines.append(name + b": " + value)
    head = b"\r\n".join(lines) + b"\r\n\r\n"
    if not chunked:
        return head, await request.aread()
    parts = []
    async for piece in request.stream:  # type: ignore[union-attr]
        if piece:
            parts.append(b"%x\r\n%s\r\n" % (len(piece), piece))
    parts.append(b"0\r\n\r\n")
    return head, b"".join(parts)


def sdk_http_client(timeout_s: float) -> httpx2.AsyncClient | None:
    """An ``httpx2.AsyncClient`` on this transport, for an SDK's ``http_client``; None when the
    environment names an HTTP proxy (``HTTPS_PROXY``...): httpx does not apply those to a client
    given its own transport, so the SDKs keep theirs, which does."""
    if any(scheme in urllib.request.getproxies() for scheme in ("http", "https", "all")):
        log.info("an HTTP proxy is configured: the provider SDKs keep their own transport")
        return None
    return httpx2.AsyncClient(transport=ProviderTransport(), timeout=timeout_s, follow_redirects=True)


__all__ = ["ProviderTransport", "sdk_http_client"]
