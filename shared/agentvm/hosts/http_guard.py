"""Limits on raw HTTP connections of ``avm serve``, below the ASGI app: a header deadline and a
cap per client address.

uvicorn arms no timer while a request's headers arrive: a client that connects and sends nothing,
or trickles a header byte every few seconds (slowloris), holds its socket and file descriptor
for ever, and one host can open them until the process runs out of descriptors (``/health``
included). uvicorn has no setting for either, so ``avm serve`` runs its HTTP protocol (httptools,
or h11 without it) subclassed with:

- a **header deadline**: every ``header_timeout_s`` the connection is checked; if no request has
  started since the last check (no headers completed, or the previous response is done and the
  next request has not got past its headers), the socket is closed. A request in progress (a
  body being read, a response being written) is never cut, and an upgraded WebSocket leaves this
  protocol behind (its own limits are in ``hosts/local_server.py``);
- a **body deadline**: a request whose body is not all in ``body_timeout_s`` after its headers
  (a body trickled a byte every few seconds holds its socket as a slowloris does, and the header
  deadline spares a request in progress) is answered ``408`` (``request_timeout``) if nothing was
  answered yet, and closed; the app reading it sees the client gone;
- a **cap per address**: at most ``max_per_address`` HTTP connections (not yet upgraded) from one
  client address; one more is answered ``429`` and closed at once.

They work on the protocol's public life cycle (``connection_made``/``data_received``/
``connection_lost``, the ``cycle`` a request creates and its ``more_body`` while the body is still
coming, ``handle_websocket_upgrade``), the same in both uvicorn protocols.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from agentvm.logs import log_refusal

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("agentvm.hosts.http_guard")


def _closing_answer(status: bytes, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, with the API's error body."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return (
        b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\n"
        b"content-length: %d\r\n\r\n%s" % (status, len(body), body)
    )


_TOO_MANY = _closing_answer(
    b"429 Too Many Requests", "rate_limited", "too many connections from this address"
)


_TIMED_OUT = _closing_answer(
    b"408 Request Timeout", "request_timeout", "the request body did not arrive in time"
)


def guarded_http_protocol(
    *, header_timeout_s: float, max_per_address: int, body_timeout_s: float = 30.0
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the header and body deadlines and the per-address cap."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    per_address: dict[str, int] = {}  # open, not upgraded, connections by client address

    # uvicorn declares AutoHTTPProtocol a variable (httptools' class or h11's), not a class
    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        _guard_timer: asyncio.TimerHandle | None = None
        _guard_address: str | None = None
        _guard_seen: Any = None
        _body_timer: asyncio.TimerHandle | None = None
        _body_cycle: Any = None  # the request whose body the body timer waits for

        def connection_made(self, transport: asyncio.Transport) -> None:  # uvicorn's protocols' type
            super().connection_made(transport)
            address = self.client[0] if self.client else "?"
            if per_address.get(address, 0) >= max_per_address:
                log_refusal(log, "refused a connection: too many from one address", source=address)
                transport.write(_TOO_MANY)
                transport.close()
                return
            per_address[address] = per_address.get(address, 0) + 1
            self._guard_address = address
            self._guard_timer = self.loop.call_later(header_timeout_s, self._guard_check)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = self.cycle
            if cycle is not None and cycle is not self._body_cycle and cycle.more_body:
                self._body_cycle = cycle  # headers in, body still coming: its deadline starts now
                self._cancel_body_timer()
                self._body_timer = self.loop.call_later(body_timeout_s, self._body_check, cycle)

        def connection_lost(self, exc: Exception | None) -> None:
            self._guard_release()
            self._cancel_body_timer()
            super().connection_lost(exc)

        def handle_websocket_upgrade(self, *args: Any) -> None:
            self._guard_release()  # the WebSocket has its own limits from here on
            self._cancel_body_timer()
            super().handle_websocket_upgrade(*args)

        def _body_check(self, cycle: Any) -> None:
            self._body_timer = None
            if self.cycle is not cycle or not cycle.more_body or self.transport.is_closing():
                return  # the body came (or the connection went): nothing to cut
            log_refusal(
                log,
                "closed a connection whose request body did not arrive in time",
                source=self.client[0] if self.client else "?",
                body_timeout_s=body_timeout_s,
            )
            if not cycle.response_started:
                self.transport.write(_TIMED_OUT)
            cycle.disconnected = True  # the app reading the body sees the client gone, and
            cycle.message_event.set()  # anything it answers is dropped
            self.transport.close()

        def _cancel_body_timer(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _guard_check(self) -> None:
            cycle = self.cycle
            waiting = cycle is None or (cycle is self._guard_seen and cycle.response_complete)
            if waiting:
                if not self.transport.is_closing():
                    log_refusal(
                        log,
                        "closed a connection that sent no complete request headers in time",
                        source=self._guard_address or "?",
                        header_timeout_s=header_timeout_s,
                    )
                    self.transport.close()
                self._guard_release()
                return
            self._guard_seen = cycle
            self._guard_timer = self.loop.call_later(header_timeout_s, self._guard_check)

        def _guard_release(self) -> None:
            if self._guard_timer is not None:
                self._guard_timer.cancel()
                self._guard_timer = None
            address, self._guard_address = self._guard_address, None
            if address is not None:
                per_address[address] -= 1
                if per_address[address] <= 0:
                    del per_address[address]

    return GuardedHTTPProtocol


__all__ = ["guarded_http_protocol"]
