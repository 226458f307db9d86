"""``HttpToolClient`` over httpx: sends the request an HTTP tool declaration describes.

The body is streamed and reading stops once ``max_bytes`` of it are in hand, so a tool pointed at
a huge (or endless) response costs at most that much memory. Compressed bodies are inflated with
a bound as well: a few kilobytes of gzip can expand to gigabytes, and httpx's own decoders have no
limit. ``identity`` is asked for unless the declaration sets ``Accept-Encoding`` itself.

Redirects are not followed: the caller checked the URL's address (``agent.egress``) before the
call, and a redirect could lead anywhere; the 3xx response is returned as-is.

Failures carry the host and port only: never the path or query string (they may hold secrets
the URL template filled in) and never a header value (tool secrets travel in headers).
"""

from __future__ import annotations

import asyncio
import codecs
import zlib
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentvm.ports import HttpToolResponse

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HttpToolTimeout(TimeoutError):
    """The tool's server did not answer (or finish answering) within the tool's timeout."""


class HttpToolConnectionError(ConnectionError):
    """The tool's server could not be reached, or the connection broke during the exchange."""


class HttpxToolClient:
    """One ``httpx.AsyncClient`` (one connection pool) for every HTTP tool call of the process.

    ``follow_redirects`` is off by default; see the module docstring for why.
    """

    def __init__(self, *, follow_redirects: bool = False) -> None:
        import httpx  # here, not at import time: a host that runs no HTTP tools never loads it

        self._httpx = httpx
        self._client = httpx.AsyncClient(follow_redirects=follow_redirects)

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        json_body: Any = None,
        timeout_s: float,
        max_bytes: int,
    ) -> HttpToolResponse:
        """Send the request; any status (4xx, 5xx, 3xx) is a response, not an exception.

        Raises ``ValueError`` for a URL that is not http(s), ``HttpToolTimeout`` when the whole
        exchange (connect, send, read up to ``max_bytes``) takes longer than ``timeout_s``, and
        ``HttpToolConnectionError`` when the server cannot be reached or breaks the connection.
        """
        origin = _origin(url)
        httpx = self._httpx
        try:
            request = self._client.build_request(
                method,
                url,
                headers=_with_identity_encoding(headers),
                json=json_body,
                timeout=httpx.Timeout(timeout_s),
            )
        except (httpx.InvalidURL, UnicodeError):
            raise ValueError(
                f"the HTTP tool request to {origin} is invalid (its URL, or a header that is not ASCII)"
            ) from None
        try:
            # httpx's timeout bounds each network operation; this bounds the whole exchange, so a
            # server trickling bytes slowly cannot hold the call open for longer.
            async with asyncio.timeout(timeout_s):
                response = await self._client.send(request, stream=True)
                try:
                    body, truncated = await _read_body(response, max_bytes, origin)
                finally:
                    await response.aclose()  # unread rest: the connection is dropped, not drained
        except (TimeoutError, httpx.TimeoutException):
            raise HttpToolTimeout(f"HTTP tool request to {origin} timed out after {timeout_s:g}s") from None
        except httpx.ConnectError as exc:
            raise HttpToolConnectionError(f"could not connect to {origin} ({_reason(exc)})") from None
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            raise HttpToolConnectionError(f"the connection to {origin} failed ({_reason(exc)})") from None
        except httpx.LocalProtocolError:
            raise ValueError(
                f"the HTTP tool request to {origin} is not valid HTTP (check its method and headers)"
            ) from None
        except httpx.HTTPError as exc:
            # Only the type: some httpx/h11 messages quote the offending header value.
            raise HttpToolConnectionError(
                f"HTTP tool request to {origin} failed ({type(exc).__name__})"
            ) from None
        return HttpToolResponse(response.status_code, _decode_utf8(body, truncated), truncated)

    async def aclose(self) -> None:
        """Close the pool's connections (at host shutdown)."""
        await self._client.aclose()

    async def __aenter__(self) -> HttpxToolClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _origin(url: str) -> str:
    """``host:port`` of an http(s) URL, for messages; raises ``ValueError`` for other schemes.

    Neither the URL nor its query string is ever repeated: both may carry secrets.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"HTTP tools only call http and https URLs, not {scheme or 'a relative URL'!r}")
    host = parts.hostname
    if not host:
        raise ValueError("the HTTP tool URL has no host")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ValueError(f"the HTTP tool URL for {host} has an invalid port") from None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _with_identity_encoding(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers, asking for an uncompressed body unless the declaration chose an encoding."""
    out = dict(headers)
    if not any(name.lower() == "accept-encoding" for name in out):
        out["Accept-Encoding"] = "identity"
    return out


async def _read_body(response: Any, max_bytes: int, origin: str) -> tuple[bytes, bool]:
    """At most ``max_bytes`` of the decoded body, and whether there was more.

    Reads one byte past the limit to tell "exactly ``max_bytes``" from "more", then stops.
    """
    encoding = response.headers.get("content-encoding", "").strip().lower()
    inflate = _bounded_decoder(encoding, origin)
    chunks: AsyncIterator[bytes]
    if inflate is None:  # an encoding the declaration asked for (br, zstd...): httpx decodes it
        chunks = response.aiter_bytes()
        inflate = _passthrough
    else:
        chunks = response.aiter_raw()
    body = bytearray()
    async for chunk in chunks:
        room = max_bytes - len(body)
        body += inflate(chunk, room + 1)[: room + 1]
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _passthrough(chunk: bytes, limit: int) -> bytes:
    return chunk


def _bounded_decoder(encoding: str, origin: str) -> Callable[[bytes, int], bytes] | None:
    """A decoder that never returns more than ``limit`` bytes per chunk, or None if it is not one
    we bound (then httpx decodes, and only the result is limited)."""
    if encoding in ("", "identity"):
        return _passthrough
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _Inflater(encoding, origin)
    return None


class _Inflater:
    """gzip/deflate inflation with a cap on each chunk's output (``zlib``'s ``max_length``)."""

    def __init__(self, encoding: str, origin: str) -> None:
        self._encoding = encoding
        self._origin = origin
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or a zlib header, detected
        # Some servers send "deflate" as raw deflate data, without the zlib header: retry once.
        self._may_retry_raw = encoding == "deflate"

    def __call__(self, chunk: bytes, limit: int) -> bytes:
        try:
            out = self._zlib.decompress(chunk, limit)
        except zlib.error:
            if not self._may_retry_raw:
                raise ValueError(
                    f"the response from {self._origin} has an invalid {self._encoding} body"
                ) from None
            self._may_retry_raw = False
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            return self(chunk, limit)
        self._may_retry_raw = False
        return out


def _decode_utf8(body: bytes, truncated: bool) -> str:
    """UTF-8 with replacement; a character the cut split in two is dropped, not mangled."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(body, final=not truncated)


def _reason(exc: BaseException) -> str:
    """The OS's words for a network failure ("Connection refused"), else the exception's type.

    httpx's own messages are not repeated: this way nothing from the request can leak through.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


__all__ = ["HttpToolConnectionError", "HttpToolTimeout", "HttpxToolClient"]
