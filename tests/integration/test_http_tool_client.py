"""``HttpxToolClient`` against a real HTTP server on loopback (``http.server`` in a thread)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentvm.adapters.http.tools import HttpToolConnectionError, HttpToolTimeout, HttpxToolClient
from agentvm.ports import HttpToolResponse

SECRET = "s3cret-token-value"
ONE_MB = 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    """The routes the tests call; ``hits`` counts requests by path."""

    hits: dict[str, int] = {}
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def do_DELETE(self) -> None:
        self._route()

    def _route(self) -> None:
        path = self.path.split("?", 1)[0]
        self.hits[path] = self.hits.get(path, 0) + 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if path == "/echo":
            echo = {
                "method": self.command,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": json.loads(body) if body else None,
            }
            self._send(200, json.dumps(echo).encode(), "application/json")
        elif path == "/large":
            self._send(200, b"x" * ONE_MB)
        elif path == "/utf8":
            self._send(200, "é".encode() * 100)
        elif path == "/gzip-bomb":
            self._send(200, gzip.compress(b"\0" * (20 * ONE_MB)), encoding="gzip")
        elif path == "/gzip":
            self._send(200, gzip.compress(b"compressed hello"), encoding="gzip")
        elif path == "/deflate-raw":
            raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
            self._send(200, raw.compress(b"raw deflate hello") + raw.flush(), encoding="deflate")
        elif path == "/slow":
            time.sleep(3)
            self._send(200, b"too late")
        elif path == "/trickle":
            self._trickle()
        elif path == "/error":
            self._send(500, b"internal trouble")
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/target")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, b"no such route")

    def _send(self, status: int, body: bytes, content_type: str = "text/plain", encoding: str = "") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client stopped reading (truncation) and closed the connection
            pass

    def _trickle(self) -> None:
        """A byte every 100 ms for 5 s: every read is quick, the whole response is not."""
        self.send_response(200)
        self.send_header("Content-Length", "50")
        self.end_headers()
        try:
            for _ in range(50):
                self.wfile.write(b".")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping must not hold up shutdown

    def handle_error(self, request, client_address) -> None:
        """A client that stopped reading (truncation, timeout) breaks the pipe: expected here."""


@pytest.fixture(scope="module")
def server():
    httpd = _QuietServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, name="http-tool-test-server", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
async def client():
    tool_client = HttpxToolClient()
    yield tool_client
    await tool_client.aclose()


async def _get(client: HttpxToolClient, url: str, *, timeout_s: float = 5.0, max_bytes: int = ONE_MB):
    return await client.request("GET", url, headers={}, timeout_s=timeout_s, max_bytes=max_bytes)


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_post_sends_method_headers_and_json_body(server, client):
    response = await client.request(
        "POST",
        f"{server}/echo",
        headers={"Authorization": f"Bearer {SECRET}", "X-Tool": "weather"},
        json_body={"city": "Paris", "days": 3},
        timeout_s=5.0,
        max_bytes=ONE_MB,
    )

    assert response.status == 200
    assert response.truncated is False
    echo = json.loads(response.text)
    assert echo["method"] == "POST"
    assert echo["headers"]["authorization"] == f"Bearer {SECRET}"
    assert echo["headers"]["x-tool"] == "weather"
    assert echo["headers"]["content-type"] == "application/json"
    assert echo["headers"]["accept-encoding"] == "identity"
    assert echo["body"] == {"city": "Paris", "days": 3}


async def test_get_without_a_body_sends_none(server, client):
    response = await _get(client, f"{server}/echo?q=1")

    echo = json.loads(response.text)
    assert echo["method"] == "GET"
    assert echo["body"] is None
    assert "content-type" not in echo["headers"]


async def test_a_large_body_is_cut_at_max_bytes(server, client):
    response = await _get(client, f"{server}/large", max_bytes=1000)

    assert response == HttpToolResponse(200, "x" * 1000, truncated=True)


async def test_a_body_of_exactly_max_bytes_is_not_truncated(server, client):
    response = await _get(client, f"{server}/large", max_bytes=ONE_MB)

    assert response.truncated is False
    assert len(response.text) == ONE_MB


async def test_a_cut_through_a_utf8_character_drops_the_half_character(server, client):
    response = await _get(client, f"{server}/utf8", max_bytes=7)  # "é" is 2 bytes: 3.5 of them

    assert response.text == "ééé"
    assert response.truncated is True


async def test_a_gzip_bomb_is_inflated_only_up_to_max_bytes(server, client):
    response = await client.request(
        "GET",
        f"{server}/gzip-bomb",
        headers={"Accept-Encoding": "gzip"},
        timeout_s=5.0,
        max_bytes=4096,
    )

    assert response == HttpToolResponse(200, "\0" * 4096, truncated=True)


@pytest.mark.parametrize(
    ("path", "text"), [("/gzip", "compressed hello"), ("/deflate-raw", "raw deflate hello")]
)
async def test_compressed_bodies_are_decoded(server, client, path, text):
    response = await _get(client, f"{server}{path}")

    assert response == HttpToolResponse(200, text)


async def test_a_server_error_is_returned_not_raised(server, client):
    response = await _get(client, f"{server}/error")

    assert response == HttpToolResponse(500, "internal trouble")


async def test_redirects_are_returned_not_followed(server, client):
    _Handler.hits.pop("/target", None)

    response = await _get(client, f"{server}/redirect")

    assert response.status == 302
    assert "/target" not in _Handler.hits


async def test_a_slow_server_times_out_naming_only_the_host(server, client):
    started = time.monotonic()
    with pytest.raises(TimeoutError) as raised:
        await client.request(
            "GET",
            f"{server}/slow?api_key={SECRET}",
            headers={"Authorization": SECRET},
            timeout_s=0.3,
            max_bytes=ONE_MB,
        )

    assert time.monotonic() - started < 2.0
    assert isinstance(raised.value, HttpToolTimeout)
    message = str(raised.value)
    assert server.removeprefix("http://") in message
    assert SECRET not in message
    assert "/slow" not in message


async def test_the_timeout_bounds_the_whole_response_not_each_read(server, client):
    started = time.monotonic()
    with pytest.raises(HttpToolTimeout):
        await _get(client, f"{server}/trickle", timeout_s=0.5)

    assert time.monotonic() - started < 2.0


async def test_connection_refused_is_a_quick_connection_error(client):
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(ConnectionError) as raised:
        await client.request(
            "GET",
            f"http://127.0.0.1:{port}/x?token={SECRET}",
            headers={"Authorization": SECRET},
            timeout_s=5.0,
            max_bytes=100,
        )

    assert time.monotonic() - started < 2.0
    assert isinstance(raised.value, HttpToolConnectionError)
    assert f"127.0.0.1:{port}" in str(raised.value)
    assert SECRET not in str(raised.value)
    assert raised.value.__suppress_context__  # httpx's exception (with the request) is not shown


@pytest.mark.parametrize("url", ["ftp://example.com/file", "file:///etc/passwd", "/relative/path"])
async def test_other_schemes_are_refused(client, url):
    with pytest.raises(ValueError, match="http and https"):
        await _get(client, url)


async def test_one_client_serves_many_requests_and_closes(server):
    async with HttpxToolClient() as tool_client:
        statuses = [(await _get(tool_client, f"{server}/echo")).status for _ in range(3)]

    assert statuses == [200, 200, 200]
    assert tool_client._client.is_closed
