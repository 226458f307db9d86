"""AgentX v2 (JSON-RPC 2.0) against ``avm serve``'s own ``/ws``: an AgentX 2.x client's session
(create, send, the stream, the answer at the turn's end, interrupt, history), a browser client's
``auth`` notification, bad frames, and another tenant's ids."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import TYPE_CHECKING, Any

import websockets

from tests.integration.avm_process import avm_serve, base_env, free_port, run_avm
from tests.v2_client import Inbox, rpc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

_ids = itertools.count(1)


class Socket(Inbox):
    """A JSON-RPC client on a real WebSocket: what it received, and a reader task filling it."""

    def __init__(self, ws: Any) -> None:
        super().__init__()
        self.ws = ws
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for payload in self.ws:
                self.add(payload)

    async def until(self, predicate: Any, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.01)

    async def send(self, msg: Any) -> None:
        await self.ws.send(msg if isinstance(msg, str) else json.dumps(msg))

    async def call_raw(self, method: str, **params: Any) -> dict[str, Any]:
        msg = rpc(method, params, id=f"c{next(_ids)}")
        await self.send(msg)
        await self.until(lambda: self.responses(msg["id"]))
        return self.responses(msg["id"])[0]

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        response = await self.call_raw(method, **params)
        assert "error" not in response, response
        return response["result"]


@contextlib.asynccontextmanager
async def connect(url: str, token: str | None = None) -> AsyncIterator[Socket]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(url, additional_headers=headers) as ws:
        socket = Socket(ws)
        yield socket


async def test_an_agentx_2x_session_over_avm_serves_websocket(tmp_path):
    env = base_env(AVM_ECHO_DELAY_MS="30")
    with avm_serve(tmp_path, free_port(), env=env) as server:
        async with connect(server.url, server.admin_token()) as c:
            record = (await c.call("runtime.image.create", name="Helper"))["record"]
            assert record["containerId"] == "default"
            run = await c.call("runtime.image.run", imageId=record["imageId"])
            send = rpc(
                "runtime.message.send", {"imageId": record["imageId"], "content": "hello there"}, id="s1"
            )
            await c.send(send)
            await c.until(lambda: c.responses("s1"))
            (answer,) = c.responses("s1")
            assert answer["result"]["status"] == "completed"
            assert answer["result"]["instanceId"] == run["instanceId"]
            types = [e["type"] for e in c.turn_events()]
            assert types[0] == "turn_request" and types[-2:] == ["conversation_end", "turn_response"]
            assert "tool_call_message" not in types and "message_persisted" not in types
            text = "".join(e["data"]["text"] for e in c.turn_events() if e["type"] == "text_delta")
            assert text == "Echo: hello there"
            assert all(e["context"]["instanceId"] == run["instanceId"] for e in c.turn_events())
            history = await c.call("runtime.image.messages", imageId=record["imageId"])
            assert [m["role"] for m in history["messages"]] == ["user", "assistant"]

            # interrupt a long reply while it streams: the answer says so
            long = " ".join(f"w{i}" for i in range(300))
            await c.send(rpc("message.send", {"imageId": record["imageId"], "content": long}, id="s2"))
            await c.until(lambda: c.types().count("text_delta") > 3 + types.count("text_delta"))
            stopped = await c.call("instance.interrupt", instanceId=run["instanceId"])
            assert stopped["instanceId"] == run["instanceId"]
            await c.until(lambda: c.responses("s2"))
            assert c.responses("s2")[0]["result"]["status"] == "interrupted"
            assert c.types()[-2:] == ["conversation_end", "turn_response"] and "interrupted" in c.types()

            # bad frames: JSON-RPC errors, and the connection keeps serving
            await c.send("{oops")
            await c.until(lambda: any(m.get("error", {}).get("code") == -32700 for m in c.messages()))
            missing = await c.call_raw("image.get", imageId=7)
            assert missing["error"]["code"] == -32602 and missing["error"]["data"]["code"] == "bad_request"
            unknown = await c.call_raw("llm.list")
            assert unknown["error"]["code"] == -32601
            await c.send('{"type":"container_list_request","data":{"requestId":"r1"}}')  # v1 on a v2 socket
            await c.until(lambda: any(m.get("error", {}).get("code") == -32600 for m in c.messages()))
            assert (await c.call("container.list"))["containerIds"] == ["default"]


async def test_a_browser_style_v2_client_authenticates_with_a_notification_and_sees_only_its_tenant(tmp_path):
    created = run_avm("keys", "create", "--tenant", "acme", "--scope", "client", "--data-dir", str(tmp_path))
    assert created.returncode == 0, created.stderr
    acme = created.stdout.strip()
    with avm_serve(tmp_path, free_port()) as server:
        async with connect(server.url, server.admin_token()) as owner:
            record = (await owner.call("image.create", name="Private"))["record"]
        async with connect(server.url) as b:  # no key at the upgrade
            refused = await b.call_raw("image.list")
            assert refused["error"]["code"] == 401 and refused["error"]["data"]["code"] == "unauthorized"
            await b.send(rpc("auth", {"headers": {"Authorization": "Bearer avm_nope_nope"}}, id=None))
            await b.until(lambda: any(m.get("id", 0) is None and "error" in m for m in b.messages()))
            await b.send(rpc("auth", {"headers": {"Authorization": f"Bearer {acme}"}}, id=None))
            assert (await b.call("image.list"))["records"] == []
            foreign = await b.call_raw("image.messages", imageId=record["imageId"])
            absent = await b.call_raw("image.messages", imageId="img_missing")
            assert foreign["error"]["code"] == absent["error"]["code"] == 404
            sub = await b.call_raw("agentvm.subscribe", sessionId=record["sessionId"])
            assert sub["error"]["data"]["code"] == "not_found"
