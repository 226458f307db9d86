"""``avm serve``: the local host. One process: uvicorn serving the FastAPI app, ``/ws`` feeding the
same gateway the Lambdas use, and the durable SQLite queue's consumer running turns in-process.

WebSocket authentication (see SECURITY.md): an ``Authorization: Bearer`` header on the upgrade
request, or ``?token=``, authenticates the connection; a bad one refuses the upgrade with HTTP 401
(no WebSocket is opened; browsers report close code 1006). Without credentials the connection is
accepted but unauthenticated: it may send only an ``auth`` frame (handled by the gateway). In the
open dev mode (``--open``, loopback only) every connection is tenant ``local``. The web playground
(``api/playground.py``) is served at ``/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from agentvm.adapters.local.frame_rate import FrameRate
from agentvm.adapters.local.ws_writer import ConnectionWriter
from agentvm.addresses import is_loopback
from agentvm.api.app import create_app
from agentvm.api.errors import error_body
from agentvm.api.playground import playground_routes
from agentvm.config import ECHO_MODEL
from agentvm.errors import AgentVMError, ConnectionGone, RateLimited, Unauthorized
from agentvm.gateway.dispatch import handle_frame, refuse_frame
from agentvm.hosts.http_guard import guarded_http_protocol
from agentvm.logs import client_source, log_refusal, upgrade_refused
from agentvm.ports import ConnectionInfo
from agentvm.security.tenant_limits import connection_cap
from agentvm.streaming.batching import asked_cadence, wants_batches
from agentvm.turns.worker import process_turn

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import uvicorn
    from fastapi import FastAPI
    from starlette.types import Receive, Scope, Send

    from agentvm.config import Settings
    from agentvm.hosts.local import LocalHost
    from agentvm.records import TurnJob
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

log = logging.getLogger("agentvm.hosts.local_server")

LOCAL_TENANT = "local"  # the tenant of key-less loopback connections (the open dev mode)
AUTH_DEADLINE_CLOSE = 4401  # application close code: no authentication within AVM_WS_AUTH_DEADLINE_S
POLICY_VIOLATION_CLOSE = 1008  # kept sending past a whole burst of refused frames


def open_mode_error(settings: Settings) -> str | None:
    """Why these settings must not start (the open mode on a non-loopback address), else None."""
    if settings.open and not is_loopback(settings.host):
        return (
            f"refusing to start: --open (AVM_OPEN) disables authentication and is allowed only on a "
            f"loopback address, not on {settings.host!r}. Drop --open and use API keys (see SECURITY.md)."
        )
    return None


async def _sweep_waits(rt: Runtime, every_s: float) -> None:
    """Suspended turns' waits past their deadline time out; lost continuations are enqueued again;
    turns with no job are ended (``turns.orphans``). The first sweep runs at start: waits that
    expired while the server was down go on at once."""
    from agentvm.turns import orphans as orphan_turns
    from agentvm.turns.waits import sweep_waits

    while True:
        try:
            while await sweep_waits(rt) > 0:
                pass
            await orphan_turns.sweep_orphans(rt)
        except Exception as exc:  # the store is busy or full: the next sweep tries again
            log.warning("sweeping suspended turns failed", extra={"error": type(exc).__name__})
        await asyncio.sleep(every_s)


async def _fire_schedules(rt: Runtime, every_s: float) -> None:
    """The scheduler: schedules' due ticks fire (``turns.schedules``; each tick once, whichever
    process or node claims it). The first step runs at start: a tick missed while down runs once."""
    from agentvm.turns.schedules import fire_due

    while True:
        try:
            await fire_due(rt)
        except Exception as exc:  # the store is busy: the next step tries again
            log.warning("firing schedules failed", extra={"error": type(exc).__name__})
        await asyncio.sleep(every_s)


async def _send_webhooks(rt: Runtime, every_s: float, *, allow_private: bool) -> None:
    """The webhook sender: due deliveries of the outbox (``turns.webhooks``), with one HTTP client."""
    import httpx

    from agentvm.turns.webhooks import deliver_due

    async with httpx.AsyncClient(follow_redirects=False) as client:
        while True:
            try:
                while await deliver_due(rt, client, allow_private=allow_private) > 0:
                    pass
            except Exception as exc:  # the store is busy: the next step tries again
                log.warning("sending webhooks failed", extra={"error": type(exc).__name__})
            await asyncio.sleep(every_s)


async def _upgrade_principal(rt: Runtime, websocket: WebSocket) -> Principal | None:
    """The key of the upgrade request (header, else ``?token=``); None if it carries none."""
    if rt.auth is None:
        raise Unauthorized("authentication is not configured on this server")
    return await rt.auth.from_request(websocket.headers, websocket.query_params)


def create_local_app(host: LocalHost) -> FastAPI:
    rt = host.runtime
    settings = host.settings
    error = open_mode_error(host.settings)
    if error is not None:
        raise ValueError(error)
    open_tenant = LOCAL_TENANT if host.settings.open else None

    async def run_job(job: TurnJob) -> None:
        # the work after the reply (a compaction, a title) must not hold the session's queue slot
        await process_turn(rt, job, later=host.after_reply.start)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        from agentvm.adapters.local.relay import RelayPush

        relay = host.push if isinstance(host.push, RelayPush) else None
        if relay is not None:  # one of several workers: the others reach our sockets through it
            await relay.start()
        tasks = [asyncio.create_task(_sweep_waits(rt, settings.wait_sweep_s))]
        if rt.schedules is not None:
            tasks.append(asyncio.create_task(_fire_schedules(rt, settings.schedule_tick_s)))
        if rt.webhooks is not None:
            sender = _send_webhooks(rt, settings.webhook_send_s, allow_private=rt.webhooks_allow_private)
            tasks.append(asyncio.create_task(sender))
        tasks += [asyncio.create_task(run()) for run in host.background]
        if settings.run_turns:  # false: a cluster node that only serves (the others run the turns)
            tasks.append(asyncio.create_task(host.queue.run(run_job)))
            log.info("turn queue consumer started", extra={"worker": settings.worker_id, "node": host.node})
        try:
            yield
        finally:
            # the consumer first: cancelled, it hands its running turns back to the queue
            for task in reversed(tasks):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await host.after_reply.aclose()
            if relay is not None:
                await relay.aclose()
            await _kill_sandbox_jobs(rt)
            for step in host.on_shutdown:
                await step()

    app = create_app(rt, lifespan=lifespan, open_tenant=open_tenant)
    app.include_router(playground_routes())  # the web playground at / (static files, no key)
    per_address: dict[str, int] = {}  # live WebSocket connections by client address

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        address = websocket.client.host if websocket.client else "?"
        client_source.set(address)  # this connection's refusal lines are counted per address
        if per_address.get(address, 0) >= settings.max_connections_per_address:
            limit = settings.max_connections_per_address
            limited = RateLimited(
                f"too many connections from this address (at most {limit})",
                limit=limit,
                reset_at_ms=rt.clock.now_ms(),  # a slot frees as soon as one of them closes
            )
            await _deny(websocket, limited, 429, address)
            return
        principal = None
        if open_tenant is None:
            try:
                principal = await _upgrade_principal(rt, websocket)
            except AgentVMError as exc:
                await _deny(websocket, exc, 401, address)
                return
        try:
            batch = wants_batches(websocket.query_params)  # ?frames=batch (streaming/batching.py)
            cadence = asked_cadence(websocket.query_params)  # ?cadence=live|economy (likewise)
        except AgentVMError as exc:
            await _deny(websocket, exc, 400, address)
            return
        per_address[address] = per_address.get(address, 0) + 1
        try:
            await _serve_socket(websocket, principal, address, batch, cadence)
        finally:
            per_address[address] -= 1
            if per_address[address] <= 0:
                per_address.pop(address, None)

    async def _serve_socket(
        websocket: WebSocket,
        principal: Principal | None,
        address: str,
        batch: bool = False,
        cadence: str | None = None,
    ) -> None:
        conn_id = rt.ids.new("conn")
        try:
            # Registered before the upgrade completes: a key or a tenant past its connection cap
            # is refused with an HTTP answer, like every other refused upgrade.
            tenant_id = open_tenant or (principal.tenant_id if principal else None)
            await rt.connections.register(
                ConnectionInfo(
                    connection_id=conn_id,
                    tenant_id=tenant_id,
                    connected_at=rt.clock.now_ms(),
                    key_id=principal.key_id if principal else None,
                    batch=batch,
                    cadence=cadence,
                ),
                tenant_cap=await connection_cap(rt.tenant_limits, tenant_id),
            )
        except AgentVMError as exc:
            await _deny(websocket, exc, 429, address)
            return
        try:
            await websocket.accept()
        except BaseException:
            await rt.connections.remove(conn_id)
            raise

        async def close(code: int, reason: str) -> None:
            await websocket.close(code, reason)

        # Every frame to this client (turn frames and responses) goes through one bounded queue
        # and one writer task: a client that stops reading is closed, never waited for.
        writer = ConnectionWriter(
            conn_id,
            websocket.send_text,
            close,
            max_frames=settings.ws_send_queue_frames,
            send_timeout_s=settings.ws_send_timeout_s,
        )
        host.push.attach(conn_id, writer.send)
        deadline = None
        if open_tenant is None and principal is None:
            # A connection that has not authenticated (no key at the upgrade) must send its `auth`
            # frame in time, or it is closed: idle unauthenticated sockets hold nothing hostage.
            deadline = asyncio.get_running_loop().call_later(
                settings.ws_auth_deadline_s,
                lambda: asyncio.ensure_future(_close_unauthenticated(conn_id, writer)),
            )
        rate = FrameRate(settings.ws_frames_per_second, burst=settings.ws_frames_per_second * 4)
        refused = 0  # frames refused since the last one handled
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                if rate.take():
                    refused = 0
                    # the answer before any frame pushed meanwhile: a turn's worker may stream
                    # before message_send's handler returns (adapters/local/ws_writer.py)
                    writer.hold()
                    answered: list[str] = []
                    try:
                        answered = await handle_frame(rt, conn_id, raw)
                    finally:
                        await writer.answer(answered)
                    continue
                refused += 1
                if refused > rate.burst:
                    log.info(
                        "closing a connection that ignores its frame rate limit",
                        extra={"connection_id": conn_id},
                    )
                    await writer.close_now(POLICY_VIOLATION_CLOSE, "frame rate limit exceeded", flush=True)
                    break
                replies = refuse_frame(rt, raw, _frame_rate_error(rt, rate))
                for payload in replies:
                    await host.push.send(conn_id, payload)
        except (WebSocketDisconnect, ConnectionGone):
            pass
        finally:
            if deadline is not None:
                deadline.cancel()
            host.push.detach(conn_id)
            await writer.aclose()
            await rt.connections.remove(conn_id)

    async def _close_unauthenticated(conn_id: str, writer: ConnectionWriter) -> None:
        info = await rt.connections.get(conn_id)
        if info is not None and info.tenant_id is None:
            log.info(
                "closing a connection that did not authenticate in time", extra={"connection_id": conn_id}
            )
            await writer.close_now(AUTH_DEADLINE_CLOSE, "authenticate within the deadline (auth frame)")

    app.state.ws_endpoint = ws
    return app


class WebSocketFirst:
    """``/ws`` straight to its endpoint, everything else (HTTP, lifespan) to the FastAPI app.

    Through the app, every live socket keeps a dozen middleware frames suspended for its whole
    life (error handling, telemetry, body and metrics middlewares that only act on HTTP, the
    router, the exception wrappers) and every frame it sends passes their ``send`` wrappers: at a
    thousand idle connections, a good part of each one's memory (docs/scaling.md). The endpoint
    is the same one the app routes ``/ws`` to (tests reach it through the app)."""

    def __init__(self, app: FastAPI, path: str = "/ws") -> None:
        self.app = app
        self.path = path
        self.endpoint = app.state.ws_endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope.get("path") == self.path:
            await self.endpoint(WebSocket(scope, receive=receive, send=send))
            return
        await self.app(scope, receive, send)


async def _deny(websocket: WebSocket, exc: AgentVMError, status: int, address: str) -> None:
    """Refuse the upgrade with an HTTP answer: one (rate-limited) line here, and none of uvicorn's."""
    log_refusal(
        log, "WebSocket upgrade refused", source=address, level=logging.WARNING, status=status, code=exc.code
    )
    upgrade_refused.set(True)  # this connection's task only
    await websocket.send_denial_response(JSONResponse(error_body(exc), status_code=status))


def _frame_rate_error(rt: Runtime, rate: FrameRate) -> RateLimited:
    per_second = f"{rate.rate:g}"
    return RateLimited(
        f"more than {per_second} frames per second on this connection; slow down",
        limit=int(rate.rate),
        reset_at_ms=rt.clock.now_ms() + int(1000 / rate.rate) + 1,  # when the next token is due
    )


async def _kill_sandbox_jobs(rt: Runtime) -> None:
    """At shutdown, after the turns are cancelled: no sandbox job outlives the server."""
    from agentvm.adapters.sandbox.process import LocalSandbox

    if isinstance(rt.sandbox, LocalSandbox):
        await rt.sandbox.close()


def _say_sandbox_isolation(settings: Settings) -> None:
    from agentvm.adapters.sandbox.job_limits import detect
    from agentvm.adapters.sandbox.process import bubblewrap

    log.info(detect().describe())
    if bubblewrap() is not None:
        log.info("sandbox jobs run isolated with bubblewrap")
    elif settings.sandbox_allow_unisolated or is_loopback(settings.host):
        log.warning(
            "SANDBOX NOT ISOLATED: bubblewrap (bwrap) is missing or cannot run here, so sandbox jobs run "
            "as plain processes of this user, with limits but no isolation. Install Debian's "
            "'bubblewrap' (./dev does) before serving anyone but yourself."
        )
    else:
        log.warning(
            "SANDBOX DISABLED: bubblewrap (bwrap) is missing or cannot run here, and this server listens "
            "on a non-loopback address; images' sandbox tools are left out. Install 'bubblewrap', or "
            "set AVM_SANDBOX_ALLOW_UNISOLATED=true to accept unisolated jobs."
        )


def _raise_descriptor_limit() -> None:
    """Every connection is a file descriptor: use all the process may have (the soft limit is
    often 1,024, the hard one far higher), and say how many that is."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    log.info("file descriptor limit", extra={"nofile": soft})


def _keep_log_lines(host: LocalHost) -> None:
    """Every line from now on is also kept for ``/v1/logs`` (adapters/local/sqlite/logs.py)."""
    from agentvm.adapters.local.sqlite.logs import SqliteLogStore
    from agentvm.logs import add_log_handler

    if isinstance(host.runtime.logs, SqliteLogStore):
        add_log_handler(host.runtime.logs.handler())


def _tune_garbage_collector() -> None:
    """A long-lived server with a thousand connections holds millions of objects: with CPython's
    default thresholds (700, 10, 10) a full collection walks all of them several times a minute
    under load, a pause of hundreds of milliseconds each (3 of the 13 CPU-seconds of the
    1,000-stream benchmark). What exists at start (modules, SDKs, schemas) is frozen out of
    collection, young collections run every 50,000 allocations instead of 700, and full ones
    about a hundred times less often. Cycles are still collected; they live a little longer."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def serve(host: LocalHost) -> None:
    server, sockets = build_server(host)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=sockets)
    if not server.started:
        raise SystemExit(3)  # uvicorn's STARTUP_FAILURE (the port is taken, ...), as uvicorn.run


def build_server(host: LocalHost) -> tuple[uvicorn.Server, list[socket.socket] | None]:
    """The uvicorn server of ``host`` (and its socket, for one of several workers), not started:
    ``serve`` runs it in a loop of its own; the cluster host (hosts/cluster_server.py) in the loop
    its database pool lives in."""
    import uvicorn

    settings = host.settings
    error = open_mode_error(settings)
    if error is not None:
        raise SystemExit(error)
    if settings.open:
        log.warning("OPEN DEV MODE: no authentication; every connection is tenant 'local' (loopback only)")
    if not settings.has_provider_key():
        log.warning(
            "NO LLM PROVIDER KEY SET: every image without a model uses the built-in echo model. "
            "Set ANTHROPIC_API_KEY or OPENAI_API_KEY (or AVM_BEDROCK_REGION) for real replies."
        )
    elif settings.resolved_default_model() == ECHO_MODEL:
        log.warning(
            "NO DEFAULT MODEL: images without a model use the built-in echo model; "
            "set AVM_DEFAULT_MODEL (e.g. bedrock/<model id>) to use a configured provider by default."
        )
    _keep_log_lines(host)
    _say_sandbox_isolation(settings)
    log.info(
        "AgentVM listening",
        extra={
            "http": f"http://{settings.host}:{settings.port}",
            "playground": f"http://{settings.host}:{settings.port}/",
            "ws": f"ws://{settings.host}:{settings.port}/ws",
            "data_dir": str(settings.data_dir),
            "node": host.node,
            "default_model": settings.resolved_default_model(),
            "auth": "open (no keys)" if settings.open else "API keys",
        },
    )
    _raise_descriptor_limit()
    _tune_garbage_collector()
    prepare = getattr(host.runtime.models, "prepare", None)
    if prepare is not None:
        prepare()  # provider SDKs imported and warmed before the first turn, not during it
    config = uvicorn.Config(
        WebSocketFirst(create_local_app(host)),
        host=settings.host,
        port=settings.port,
        http=guarded_http_protocol(
            header_timeout_s=settings.http_header_timeout_s,
            max_per_address=settings.max_http_connections_per_address,
            body_timeout_s=settings.http_body_timeout_s,
        ),
        timeout_keep_alive=5,
        log_config=None,  # keep our JSON logging
        ws_max_size=max(settings.max_frame_bytes * 4, 1 << 20),  # we answer oversize frames ourselves
        ws_ping_interval=30,
        ws_ping_timeout=30,
        ws_per_message_deflate=settings.ws_deflate,
    )
    server = uvicorn.Server(config)
    # One of several workers on one port: each binds it with SO_REUSEPORT, and the kernel spreads
    # new connections over them (docs/scaling.md).
    sockets = [_reuse_port_socket(settings.host, settings.port)] if settings.reuse_port else None
    return server, sockets


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


__all__ = ["LOCAL_TENANT", "build_server", "create_local_app", "is_loopback", "open_mode_error", "serve"]
