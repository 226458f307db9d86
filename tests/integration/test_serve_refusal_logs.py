"""What a hostile client makes a real ``avm serve`` log (security review, finding 6): every refused
or malformed input is one short line, never an ERROR or a traceback, at most
``AVM_LOG_REFUSALS_PER_MINUTE`` (10) per client address; uvicorn's own lines about them are gone or
one INFO line each; and even at DEBUG no frame is logged (finding 9c)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time
from collections import Counter

import httpx
import pytest
import websockets

from agentvm.security.apikeys import new_token
from tests.integration.avm_process import avm_serve, base_env, free_port


def _raw_ws_send(port: int, frame_payload: bytes) -> bytes:
    """Open a WebSocket by hand and send one text frame of raw bytes (clients refuse invalid
    UTF-8); returns what the server sent back. It connects from 127.0.0.2: the connections before
    it may still hold 127.0.0.1's slots while the server finishes closing them, and what uvicorn
    says of invalid UTF-8 is counted apart from the per-address refusals."""
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0)) as s:
        key = base64.b64encode(os.urandom(16))
        s.sendall(
            b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n"
        )
        assert s.recv(4096).startswith(b"HTTP/1.1 101")
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(frame_payload))
        s.sendall(bytes([0x81, 0x80 | len(frame_payload)]) + mask + masked)
        return s.recv(4096)


def _raw_http(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        return s.recv(4096)


async def test_refusals_are_one_line_each_never_errors_and_at_most_ten_per_address(tmp_path):
    env = base_env(AVM_LOG_LEVEL="DEBUG", AVM_MAX_CONNECTIONS_PER_ADDRESS="2", AVM_MAX_FRAME_BYTES="1024")
    wrong = f"avm_aaaaaaaaaaaa_{new_token()[1].split('_', 2)[2]}"
    with avm_serve(tmp_path, free_port(), env=env) as server:
        token = server.admin_token()
        # nine refusals from 127.0.0.1, one of each kind
        with pytest.raises(websockets.InvalidStatus):  # a bad key at the upgrade: 401
            async with websockets.connect(f"{server.url}?token={wrong}"):
                pass
        async with (
            websockets.connect(f"{server.url}?token={token}"),
            websockets.connect(f"{server.url}?token={token}"),
        ):
            with pytest.raises(websockets.InvalidStatus):  # two connections per address here: 429
                async with websockets.connect(f"{server.url}?token={token}"):
                    pass
        # The server frees a closed connection's slot when its handler ends, a moment after the
        # close handshake: give it that moment (a retry would log one more refusal).
        await asyncio.sleep(0.5)
        async with websockets.connect(server.url) as ws:  # no key: only `auth` is allowed
            for frame, replies in [
                ('{"type":"container_list_request","data":{"requestId":"r1"}}', 2),  # + its response
                ("{not json", 1),
                ('{"type":"x","pad":"' + "a" * 2000 + '"}', 1),
                ('{"a":' * 100 + "1" + "}" * 100, 1),
                (json.dumps({"type": "auth", "headers": {"Authorization": f"Bearer {wrong}"}}), 1),
            ]:
                await ws.send(frame)
                got = [json.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(replies)]
                assert got[0]["type"] == "system_error", got
        big = httpx.post(f"{server.http}/v1/auth/keys", content=b"x" * (2 << 20))
        assert big.status_code == 413
        assert (
            httpx.get(f"{server.http}/v1/usage", headers={"Authorization": "Bearer nope"}).status_code == 401
        )
        # ... then ten more 401s: one more line, and the address is over its limit
        for _ in range(10):
            httpx.get(f"{server.http}/v1/usage", headers={"Authorization": "Bearer nope"})
        # inputs uvicorn refuses before our app sees them: one INFO line each (no address)
        assert b"\x03\xef" in _raw_ws_send(server.port, b'{"type":"\xff"}')  # invalid UTF-8: closed 1007
        bad_key = b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        bad_key += b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: bad\r\n\r\n"
        assert _raw_http(server.port, bad_key).startswith(b"HTTP/1.1 400")
        assert _raw_http(server.port, b"\x00\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
        deadline = time.monotonic() + 5
        while "Invalid HTTP request received." not in server.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)

    lines = [json.loads(line) for line in server.stderr if line.startswith("{")]
    assert not [x for x in lines if x["level"] in ("ERROR", "CRITICAL") or "exc" in x]
    assert max(len(line) for line in server.stderr) < 4500
    refusals = Counter(
        (x["msg"], x.get("status") or x.get("code")) for x in lines if x.get("source") == "127.0.0.1"
    )
    assert refusals == {
        ("WebSocket upgrade refused", 401): 1,
        ("WebSocket upgrade refused", 429): 1,
        ("frame refused", "unauthorized"): 2,  # a request before `auth`, a bad `auth`
        ("frame refused", "bad_request"): 2,  # not JSON, nested too deep
        ("frame refused", "frame_too_large"): 1,
        ("HTTP request body refused", 413): 1,
        ("HTTP request refused", 401): 2,  # of eleven
    }
    uvicorn = [x["msg"] for x in lines if x.get("source") == "uvicorn"]
    assert sorted(uvicorn) == [
        "Invalid HTTP request received.",
        "Invalid UTF-8 sequence received from client.",
        "connection rejected (400 Bad Request)",
    ]
    assert all(x["level"] == "INFO" for x in lines if x.get("source") == "uvicorn")
    # uvicorn's own lines about the upgrades we refused are gone (among them a spurious ERROR)
    assert not [x for x in lines if "without completing handshake" in x["msg"] or '" 401' in x["msg"]]
    # DEBUG, yet no frame or handshake dump (AVM_LOG_WS_FRAMES is off)
    assert not [x for x in lines if x["logger"] == "uvicorn.error" and x["level"] == "DEBUG"]
    assert not [x for x in lines if x["msg"].startswith(("< TEXT", "> TEXT"))]
