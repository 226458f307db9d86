"""A real WebSocket endpoint in front of the AWS handlers on moto, for clients that need a socket
(the SDK, ``avm chat``): what API Gateway does, on loopback.

Each client frame goes to the real ``ws_default`` handler (one "Lambda": invocations one at a time);
every frame the functions post with ``post_to_connection`` (the real ``ApiGatewayPush``) is written
to that connection's socket, and a closed socket answers ``GoneException`` as API Gateway does. A
worker thread takes turn jobs from the moto FIFO queue and hands them to the real ``turn_worker``
handler, as the SQS event source mapping would. A connection is registered for its tenant on
open (the ``$connect`` authorizer's part is tested in ``test_ws_auth.py``); ``$disconnect`` forgets
it. Each thread gets its own event loop for ``run_sync`` (a Lambda process has one; here the
gateway and the worker are two "Lambdas" in one process).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from websockets.exceptions import ConnectionClosed

import agentvm.hosts.aws as aws_hosting
from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.agent.tools.sources import ToolSources
from agentvm.hosts.aws import run_sync
from agentvm.streaming.batching import asked_cadence, wants_batches
from tests.functions.aws_host import TABLE, GoneAwareClient

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.functions.aws_host import AwsHost

_loops = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_loops, "loop", None)
    if loop is None:
        loop = _loops.loop = asyncio.new_event_loop()
    return loop


class _Sockets(GoneAwareClient):
    """``apigatewaymanagementapi`` whose posts reach the bridge's open sockets."""

    def __init__(self, inner: Any, bridge: WsBridge) -> None:
        super().__init__(inner)
        self.bridge = bridge

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> Any:  # noqa: N803 (boto3 names)
        ws = self.bridge.sockets.get(ConnectionId)
        if ws is None:
            self.gone.add(ConnectionId)
            return super().post_to_connection(ConnectionId=ConnectionId, Data=Data)
        future = asyncio.run_coroutine_threadsafe(ws.send(Data.decode()), self.bridge.loop)
        with contextlib.suppress(Exception):  # a socket closing meanwhile: like a lost message
            future.result(timeout=10)
        return {}


class WsBridge:
    def __init__(self, host: AwsHost, *, tenant: str = "default") -> None:
        self.host = host
        self.tenant = tenant
        self.sockets: dict[str, Any] = {}
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._gateway_lock = threading.Lock()
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/prod"

    def start(self) -> None:
        import boto3

        from tests.functions.aws_host import ENDPOINT

        inner = boto3.client("apigatewaymanagementapi", endpoint_url=ENDPOINT)
        self.host.gone_client = _Sockets(inner, self)
        self.gateway = self.host.default(self.host.runtime(tools=ToolSources()))
        self.worker = self.host.worker(self.host.runtime(tools=ToolSources()))
        ready = threading.Event()
        self._threads = [
            threading.Thread(target=self._serve, args=(ready,), daemon=True),
            threading.Thread(target=self._work, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        ready.wait(10)

    def stop(self) -> None:
        """Stop taking jobs, close the sockets and the server; returns once no thread of the
        bridge can call AWS any more (before moto's mock ends: nothing may reach the network)."""
        self._stop.set()
        self._threads[1].join(timeout=30)
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._threads[0].join(timeout=30)
        self.loop.close()

    async def _close(self) -> None:
        self._server.close()
        await self._server.wait_closed()

    # -- API Gateway's side ----------------------------------------------------------------------------
    def _serve(self, ready: threading.Event) -> None:
        from websockets.asyncio.server import serve

        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self._server = await serve(self._connection, "127.0.0.1", 0, max_size=None)
            self.port = next(iter(self._server.sockets)).getsockname()[1]
            ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _connection(self, ws: Any) -> None:
        connection_id = f"conn-{uuid.uuid4().hex[:12]}="
        # ?frames=batch: what $connect records (functions/ws_connect, streaming/batching.py)
        query = dict(parse_qsl(urlsplit(ws.request.path).query))
        batch, cadence = wants_batches(query), asked_cadence(query)  # ?cadence= likewise
        await asyncio.to_thread(
            self._call, lambda: self.host.connect(connection_id, self.tenant, batch=batch, cadence=cadence)
        )
        self.sockets[connection_id] = ws
        try:
            async for raw in ws:
                await asyncio.to_thread(
                    self._call, lambda raw=raw: self.host.send(connection_id, raw, self.gateway)
                )
        except ConnectionClosed:
            pass  # a client that went without a close frame: API Gateway's $disconnect all the same
        finally:
            self.sockets.pop(connection_id, None)
            await asyncio.to_thread(
                self._call, lambda: run_sync(DynamoDbConnections(TABLE).remove(connection_id))
            )

    def _call(self, fn: Any) -> Any:
        with self._gateway_lock:  # one gateway Lambda: one invocation at a time
            return fn()

    # -- the SQS event source mapping's side -------------------------------------------------------------
    def _work(self) -> None:
        while not self._stop.is_set():
            messages = self.host.receive()
            if messages:
                self.host.deliver(messages, self.worker)
            else:
                time.sleep(0.02)


@contextlib.contextmanager
def ws_bridge(host: AwsHost, monkeypatch: Any) -> Iterator[WsBridge]:
    monkeypatch.setattr(aws_hosting, "event_loop", _thread_loop)
    bridge = WsBridge(host)
    bridge.start()
    try:
        yield bridge
    finally:
        bridge.stop()


__all__ = ["WsBridge", "ws_bridge"]
