"""An AgentX v2 (JSON-RPC 2.0) client for the tests: in-process on the harness, or over any
transport that hands it what the server sent (``frames``)."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from agentvm.gateway.dispatch import handle_frame
from agentvm.ports import ConnectionInfo

if TYPE_CHECKING:
    from agentvm.adapters.local.push import LocalPush
    from agentvm.runtime import Runtime
    from tests.harness import Harness

_ids = itertools.count(1)


def rpc(method: str, params: dict[str, Any] | None = None, *, id: Any = "auto") -> dict[str, Any]:  # noqa: A002
    """A JSON-RPC request (``id=None`` in the call: a notification, no ``id`` key)."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if id is not None:
        msg["id"] = next(_ids) if id == "auto" else id
    return msg


class Inbox:
    """What a v2 client received: responses (by id) and ``stream.event`` notifications, in order."""

    def __init__(self) -> None:
        self.frames: list[Any] = []

    def add(self, payload: str) -> None:
        self.frames.append(json.loads(payload))

    def messages(self) -> list[dict[str, Any]]:
        """Every JSON-RPC message received, batches unpacked."""
        out: list[dict[str, Any]] = []
        for frame in self.frames:
            out += frame if isinstance(frame, list) else [frame]
        return out

    def responses(self, rpc_id: Any) -> list[dict[str, Any]]:
        return [m for m in self.messages() if "method" not in m and m.get("id") == rpc_id]

    def events(self) -> list[dict[str, Any]]:
        return [m["params"]["event"] for m in self.messages() if m.get("method") == "stream.event"]

    def types(self) -> list[str]:
        return [e["type"] for e in self.events()]

    def turn_events(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if "seq" in e]


class V2Client(Inbox):
    """Speaks JSON-RPC to the gateway in-process; keeps everything it receives (pushed and replied)."""

    def __init__(self, rt: Runtime, push: LocalPush, connection_id: str) -> None:
        super().__init__()
        self.rt = rt
        self.connection_id = connection_id
        self._push = push
        push.attach(connection_id, self._receive)

    async def _receive(self, payload: str) -> None:
        self.add(payload)

    async def send_raw(self, raw: str | bytes) -> list[Any]:
        """Send one frame; returns the payloads the gateway answered directly (parsed)."""
        out = await handle_frame(self.rt, self.connection_id, raw)
        for payload in out:
            self.add(payload)
        return [json.loads(p) for p in out]

    async def send(self, msg: Any) -> list[Any]:
        return await self.send_raw(json.dumps(msg))

    async def call_raw(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request; returns its response (answered directly), asserting there is exactly one."""
        msg = rpc(method, {} if params is None else params)
        await self.send(msg)
        (response,) = self.responses(msg["id"])
        return response

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One request that must succeed; returns its ``result``."""
        response = await self.call_raw(method, params)
        assert "error" not in response, response
        return response["result"]

    async def notify(self, method: str, **params: Any) -> list[Any]:
        return await self.send(rpc(method, params, id=None))

    async def disconnect(self) -> None:
        self._push.detach(self.connection_id)
        await self.rt.connections.remove(self.connection_id)


_conns = itertools.count(1)


async def v2_client(h: Harness, tenant: str | None = "tenant-a") -> V2Client:
    """A connection registered as the host would (``tenant``: authenticated at the upgrade)."""
    conn_id = f"conn_v2_{next(_conns)}"
    await h.rt.connections.register(ConnectionInfo(conn_id, tenant, h.rt.clock.now_ms()))
    return V2Client(h.rt, h.push, conn_id)


__all__ = ["Inbox", "V2Client", "rpc", "v2_client"]
