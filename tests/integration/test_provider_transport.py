"""The provider SDKs' lean HTTP transport (adapters/llm/transport.py) against real servers.

Every ``*_against_fake`` suite already streams both SDKs through it (``AVM_PROVIDER_TRANSPORT``
is ``auto``, and httptools is installed here). These tests pin what those do not show: reading
on demand, keep-alive reuse, a stale keep-alive connection, bodies of every framing, TLS, and
the SDKs' errors for what goes wrong on the wire. The servers are small asyncio servers started
by each test on loopback (the fake provider is uvicorn, which frames every answer the same way).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import ssl
from typing import TYPE_CHECKING

import anthropic
import httpx2
import pytest

from agentvm.adapters.llm.anthropic import AnthropicModelClient
from agentvm.adapters.llm.transport import ProviderTransport, sdk_http_client
from agentvm.errors import ProviderUnavailable
from agentvm.llm import ChatTurn, ModelRequest, ModelStop, TextDelta

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path


class RawServer:
    """An HTTP/1.1 server whose answers the test writes byte for byte: ``answer(reader, writer)``
    is called once per request (its head already read) and says whether to keep the connection."""

    def __init__(self, answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]):
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ssl_context)
        port = self._server.sockets[0].getsockname()[1]
        return f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                if b"transfer-encoding: chunked" in head.lower():
                    self.requests.append(head + await reader.readuntil(b"0\r\n\r\n"))
                else:
                    self.requests.append(head + await reader.readexactly(length))
                if not await self.answer(reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            await self._server.wait_closed()


def _chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def _sse(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _anthropic_events(text: list[str]) -> list[bytes]:
    usage = {"input_tokens": 5, "output_tokens": 1}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "usage": usage,
    }
    events = [_sse("message_start", {"type": "message_start", "message": message})]
    events += [
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
        )
        for t in text
    ]
    events += [
        _sse(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return events


SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def _get(client: httpx2.AsyncClient, url: str) -> tuple[int, bytes]:
    async with client.stream("GET", url) as response:
        return response.status_code, await response.aread()


async def test_a_slow_reader_gets_everything_that_arrived_in_one_read():
    sent = asyncio.Event()

    async def answer(reader, writer):
        writer.write(SSE_HEAD)
        for i in range(10):
            writer.write(b"%x\r\n%s\r\n" % (len(f"data: {i}\n\n"), f"data: {i}\n\n".encode()))
            await writer.drain()
            await asyncio.sleep(0.005)
        sent.set()
        writer.write(b"0\r\n\r\n")
        return True

    server = RawServer(answer)
    url = await server.start()
    async with (
        httpx2.AsyncClient(transport=ProviderTransport()) as client,
        client.stream("GET", url) as response,
    ):
        reads = []
        async for chunk in response.aiter_raw():
            if not reads:
                await sent.wait()  # the reader is busy while the other nine events arrive
                await asyncio.sleep(0.05)
            reads.append(chunk)
    await server.close()
    assert b"".join(reads) == b"".join(f"data: {i}\n\n".encode() for i in range(10))
    assert len(reads) == 2  # the first event, then the nine that waited in the socket: one read


async def test_keep_alive_connections_are_reused_and_a_stale_one_is_replaced():
    answers = 0

    async def answer(reader, writer):
        nonlocal answers
        answers += 1
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return answers != 2  # the second answer closes the connection the client keeps

    server = RawServer(answer)
    url = await server.start()
    async with httpx2.AsyncClient(transport=ProviderTransport()) as client:
        assert await _get(client, url) == (200, b"ok")
        assert await _get(client, url) == (200, b"ok")  # reused
        assert server.connections == 1
        await asyncio.sleep(0.05)  # the server has closed it by now; the client still holds it
        assert await _get(client, url) == (200, b"ok")  # a new connection, not an error
    await server.close()
    assert server.connections == 2


async def test_bodies_of_every_framing_arrive_whole():
    framings = [
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
        SSE_HEAD + _chunked(b"he", b"llo"),
        b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhello",  # until the server closes
    ]

    async def answer(reader, writer):
        writer.write((*framings, framings[0])[len(server.requests) - 1])  # the last: the chunked POST's
        await writer.drain()
        return len(server.requests) != 3

    server = RawServer(answer)
    url = await server.start()
    async with httpx2.AsyncClient(transport=ProviderTransport()) as client:
        for _ in framings:
            assert await _get(client, url) == (200, b"hello")

        async def parts():
            yield b"a"
            yield b"bc"

        posted = await client.post(url, content=parts())  # a chunked request
    await server.close()
    assert (posted.status_code, posted.content) == (200, b"hello")
    assert server.requests[-1].endswith(b"\r\n\r\n1\r\na\r\n2\r\nbc\r\n0\r\n\r\n")


async def test_the_sdk_streams_through_it_and_reads_its_errors(tmp_path):
    replies = [
        b"HTTP/1.1 529 Overloaded\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n"
        + json.dumps({"type": "error", "error": {"type": "overloaded_error"}}).encode().ljust(60),
        SSE_HEAD + _chunked(*_anthropic_events(["Hel", "lo"])),
        SSE_HEAD + _chunked(*_anthropic_events(["cut"]))[:-40],  # the body stops half-way
    ]

    async def answer(reader, writer):
        writer.write(replies[len(server.requests) - 1])
        await writer.drain()
        return len(server.requests) < 3

    server = RawServer(answer)
    url = await server.start()
    client = AnthropicModelClient("sk-test", url, timeout_s=5, http_client=sdk_http_client(5))
    request = ModelRequest(model="m", messages=[ChatTurn(role="user", text="hi")], max_tokens=10)

    with pytest.raises(ProviderUnavailable, match="529 overloaded_error"):
        [event async for event in client.stream(request)]
    events = [event async for event in client.stream(request)]
    texts = [e for e in events if isinstance(e, TextDelta)]  # one read's deltas come merged
    assert "".join(e.text for e in texts) == "Hello" and sum(e.deltas for e in texts) == 2
    assert isinstance(events[-1], ModelStop) and events[-1].output_tokens == 2
    with pytest.raises(ProviderUnavailable):
        [event async for event in client.stream(request)]
    await server.close()
    assert b"sk-test" in server.requests[0]  # the SDK authenticated the request


async def test_a_silent_provider_times_out_as_the_sdk_expects():
    async def answer(reader, writer):
        writer.write(SSE_HEAD)
        await writer.drain()
        await asyncio.sleep(2)
        return False

    server = RawServer(answer)
    url = await server.start()
    sdk = anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0, http_client=sdk_http_client(0.3))
    async with sdk.messages.with_streaming_response.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}], stream=True, timeout=0.3
    ) as response:
        with pytest.raises(httpx2.ReadTimeout):
            await response.http_response.aread()
    await server.close()


async def test_nothing_listening_is_a_connection_error():
    transport = ProviderTransport()
    async with httpx2.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx2.ConnectError):
            await client.get("http://127.0.0.1:9/")  # the discard port: nobody listens


def _certificate(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: the server's context and a client trusting it."""
    x509 = pytest.importorskip("cryptography.x509", reason="cryptography makes the test certificate")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


async def test_streams_over_tls_and_refuses_an_untrusted_certificate(tmp_path):
    server_tls, client_tls = _certificate(tmp_path)

    async def answer(reader, writer):
        writer.write(SSE_HEAD + _chunked(*_anthropic_events(["se", "cure"])))
        await writer.drain()
        return True

    server = RawServer(answer)
    url = await server.start(server_tls)
    http_client = httpx2.AsyncClient(transport=ProviderTransport(ssl_context=client_tls))
    client = AnthropicModelClient("k", url, timeout_s=5, http_client=http_client)
    request = ModelRequest(model="m", messages=[ChatTurn(role="user", text="hi")], max_tokens=10)
    events = [event async for event in client.stream(request)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "secure"

    untrusting = AnthropicModelClient(
        "k", url, timeout_s=5, http_client=httpx2.AsyncClient(transport=ProviderTransport())
    )
    with pytest.raises(ProviderUnavailable, match="connection failed"):
        [event async for event in untrusting.stream(request)]
    await server.close()
