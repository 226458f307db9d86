"""``avm serve``: the local host. One process: uvicorn serving the FastAPI app, ``/ws`` feeding the
same gateway the Lambdas use, and the durable SQLite queue's consumer running turns in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import WebSocket, WebSocketDisconnect

from agentvm.api.app import create_app
from agentvm.core.gateway import handle_frame
from agentvm.core.turns import process_turn
from agentvm.errors import ConnectionGone
from agentvm.ports import ConnectionInfo

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fastapi import FastAPI

    from agentvm.bootstrap import LocalHost
    from agentvm.records import TurnJob

log = logging.getLogger("agentvm.server")

LOCAL_TENANT = "local"  # the tenant of key-less loopback connections


def create_local_app(host: LocalHost) -> FastAPI:
    rt = host.runtime

    async def run_job(job: TurnJob) -> None:
        await process_turn(rt, job)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        consumer = asyncio.create_task(host.queue.run(run_job))
        log.info("turn queue consumer started")
        try:
            yield
        finally:
            consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consumer

    app = create_app(rt, lifespan=lifespan)

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        conn_id = rt.ids.new("conn")
        lock = asyncio.Lock()

        async def send(payload: str) -> None:
            async with lock:  # the turn sink and this handler may send at once
                await websocket.send_text(payload)

        host.push.attach(conn_id, send)
        await rt.connections.register(
            ConnectionInfo(connection_id=conn_id, tenant_id=LOCAL_TENANT, connected_at=rt.clock.now_ms())
        )
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                for payload in await handle_frame(rt, conn_id, raw):
                    await host.push.send(conn_id, payload)
        except (WebSocketDisconnect, ConnectionGone):
            pass
        finally:
            host.push.detach(conn_id)
            await rt.connections.remove(conn_id)

    return app


def serve(host: LocalHost) -> None:
    import uvicorn

    settings = host.settings
    if not settings.has_provider_key():
        log.warning(
            "NO LLM PROVIDER KEY SET: every image without a model uses the built-in echo model. "
            "Set ANTHROPIC_API_KEY or OPENAI_API_KEY (or AVM_BEDROCK_REGION) for real replies."
        )
    log.info(
        "AgentVM listening",
        extra={
            "http": f"http://{settings.host}:{settings.port}",
            "ws": f"ws://{settings.host}:{settings.port}/ws",
            "data_dir": str(settings.data_dir),
            "default_model": settings.resolved_default_model(),
        },
    )
    uvicorn.run(
        create_local_app(host),
        host=settings.host,
        port=settings.port,
        log_config=None,  # keep our JSON logging
        ws_max_size=max(settings.max_frame_bytes * 4, 1 << 20),  # we answer oversize frames ourselves
        ws_ping_interval=30,
        ws_ping_timeout=30,
    )


__all__ = ["LOCAL_TENANT", "create_local_app", "serve"]
