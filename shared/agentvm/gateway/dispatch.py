"""The gateway: one client frame in, the frames for that caller out.

Both hosts call ``handle_frame`` for every WebSocket text frame and send the returned payloads
to the calling connection only (never broadcast: AgentX v1 broadcast responses to everyone, which
leaks across tenants). Events for a session go to its subscribers through the fanout.
Nothing a client sends can crash it: every failure becomes the protocol's error shape. One
exception to "replies are returned": a ``subscribe`` with ``afterSeq`` pushes the frames the
caller missed itself, before subscribing it (``core.resume`` says why).

A frame in JSON-RPC 2.0 (AgentX v2, ``agentx_v2``) is handled there; one connection speaks one
protocol, chosen by its first frame, and a frame of the other protocol is answered with an error
in the connection's protocol.

Authentication (with ``rt.auth`` set): an ``auth`` frame carrying a valid ``Authorization:
Bearer`` header authenticates its connection (the connection is re-registered with the key's
tenant); a bad one answers ``unauthorized`` and leaves the connection as it was. Every later frame
re-checks the connection's key (cached, so a revoked key stops within the revocation bound).
Every request, ``subscribe`` and ``auth`` frame counts against the key's rate limit, or, before
the connection has a key, against the connection's small unauthenticated allowance.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentvm.errors import AgentVMError, NotFound, Unauthorized
from agentvm.events import SUBSCRIBED_KEY, dumps, response, system_error
from agentvm.gateway.access import admit, authenticate, is_admin, log_refused_frame
from agentvm.gateway.tally import Tally, counted_for, failed, not_counted
from agentvm.gateway.tally import current as current_tally
from agentvm.gateway.v1.commands import COMMANDS, ECHOED_FIELDS, FAILURE_DEFAULTS, CommandContext
from agentvm.gateway.v1.frames import (
    AuthFrame,
    FrameError,
    IgnoredFrame,
    RequestFrame,
    SubscribeFrame,
    parse_frame,
    peek_request,
)
from agentvm.gateway.v2 import rpc as agentx_v2
from agentvm.logs import bind, unbind
from agentvm.observability.metrics import record_request
from agentvm.ports import PROTOCOL_V1, PROTOCOL_V2
from agentvm.streaming.batching import pack
from agentvm.streaming.resume import subscribe_after

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.ports import ConnectionInfo
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.gateway")


async def handle_frame(rt: Runtime, connection_id: str, raw: str | bytes) -> list[str]:
    """Handle one frame from ``connection_id``; returns the payloads to send back to it.
    Each frame is counted once, with its tenant and how it was answered."""
    tally = Tally()
    token = current_tally.set(tally)
    ids = bind()  # the caller's tenant is bound once known: its log lines carry it
    try:
        return await _handle_frame(rt, connection_id, raw)
    finally:
        unbind(ids)
        current_tally.reset(token)
        if tally.counted:
            record_request(rt, tally.tenant_id, "ws", tally.error_code)


async def _handle_frame(rt: Runtime, connection_id: str, raw: str | bytes) -> list[str]:
    if agentx_v2.looks_like_rpc(raw):  # JSON-RPC 2.0: AgentX v2 (None: a v1 frame after all)
        answered = await agentx_v2.handle_rpc(rt, connection_id, raw)
        if answered is not None:
            return answered
    try:
        frame = parse_frame(raw, max_bytes=rt.turns.max_frame_bytes)
    except FrameError as exc:
        if await _speaks_v2(rt, connection_id):
            return agentx_v2.refused_v1_frame(exc)
        return _refused(rt, connection_id, exc, exc.request_type, exc.request_id)
    except Exception:  # a bug in a validator: the client still gets an answer, the socket lives
        log.exception("parsing a frame failed")
        request_type, request_id = peek_request(raw)
        err = AgentVMError("internal error")
        return _error_frames(rt, err, request_type=request_type, request_id=request_id, data={})
    if isinstance(frame, IgnoredFrame):
        not_counted()
        return []  # acks and echoed responses cost nothing; the local host bounds their rate
    conn = await rt.connections.get(connection_id)
    counted_for(conn.tenant_id if conn is not None else None)
    out = await _handle_parsed(rt, connection_id, conn, frame)
    # a connection that declared batched frames gets its answer (a response and the frames before
    # it, or an error and its response) as one message (streaming/batching.py)
    return pack(out) if conn is not None and conn.batch and len(out) > 1 else out


async def _handle_parsed(
    rt: Runtime,
    connection_id: str,
    conn: ConnectionInfo | None,
    frame: AuthFrame | SubscribeFrame | RequestFrame,
) -> list[str]:
    request_type, request_id = (
        (frame.type, frame.request_id) if isinstance(frame, RequestFrame) else (None, None)
    )
    if conn is not None and conn.protocol != PROTOCOL_V1:
        # One connection speaks one protocol, chosen by its first frame (free: v1 is recorded only
        # where that costs nothing).
        protocol = conn.protocol or await rt.connections.claim_protocol(connection_id, PROTOCOL_V1)
        if protocol == PROTOCOL_V2:
            return agentx_v2.refused_v1_frame(None)
    authenticated = conn is not None and conn.tenant_id is not None
    try:
        await admit(rt, connection_id, conn)
    except AgentVMError as exc:
        return _refused(rt, connection_id, exc, request_type, request_id)
    except Exception:
        log.exception("admission failed", extra={"request_type": request_type, "request_id": request_id})
        err = AgentVMError("internal error")
        return _error_frames(rt, err, request_type=request_type, request_id=request_id, data={})
    if isinstance(frame, AuthFrame):
        return await _authenticate(rt, connection_id, conn, frame)
    if not authenticated:
        refused = Unauthorized("connection is not authenticated")
        return _refused(rt, connection_id, refused, request_type, request_id)
    assert conn is not None
    if isinstance(frame, SubscribeFrame):
        return await _subscribe(rt, conn, frame)
    return await _request(rt, conn, frame)


async def _speaks_v2(rt: Runtime, connection_id: str) -> bool:
    """Whether a connection chose v2 (read only for frames that fail to parse: a rare path)."""
    try:
        conn = await rt.connections.get(connection_id)
    except Exception:
        return False
    return conn is not None and conn.protocol == PROTOCOL_V2


async def _authenticate(
    rt: Runtime, connection_id: str, conn: ConnectionInfo | None, frame: AuthFrame
) -> list[str]:
    try:
        tenant_id = await authenticate(rt, connection_id, conn, frame.headers)
    except AgentVMError as exc:
        return _refused(rt, connection_id, exc, None, None)
    except Exception:
        log.exception("auth frame failed")
        return _error_frames(rt, AgentVMError("internal error"), request_type=None, request_id=None, data={})
    counted_for(tenant_id)
    return []  # AgentX clients expect no reply to `auth`


async def _subscribe(rt: Runtime, conn: ConnectionInfo, frame: SubscribeFrame) -> list[str]:
    """Silent on success. With ``afterSeq``, what the caller missed is pushed to it first (resume)."""
    assert conn.tenant_id is not None
    try:
        session = await rt.store.get_session(conn.tenant_id, frame.session_id)
        if session is None:
            raise NotFound(f"Session not found: {frame.session_id}")
        if frame.after_seq is None:
            await rt.connections.subscribe(conn.connection_id, frame.session_id, known=conn)
        else:
            await subscribe_after(
                rt, conn.connection_id, session, frame.after_seq, batch=conn.batch, known=conn
            )
    except AgentVMError as exc:
        return _error_frames(rt, exc, request_type=None, request_id=None, data={})
    except Exception:
        log.exception("subscribe failed", extra={"session_id": frame.session_id})
        return _error_frames(rt, AgentVMError("internal error"), request_type=None, request_id=None, data={})
    return []


async def _request(rt: Runtime, conn: ConnectionInfo, frame: RequestFrame) -> list[str]:
    assert conn.tenant_id is not None
    ctx = CommandContext(
        rt=rt,
        tenant_id=conn.tenant_id,
        connection_id=conn.connection_id,
        request_id=frame.request_id,
        admin=await is_admin(rt, conn),
        key_id=conn.key_id,
        connection=conn,
    )
    payload = frame.payload.model_dump(exclude_none=True)
    try:
        data = await COMMANDS[frame.type](ctx, frame.payload)
    except AgentVMError as exc:
        out = [dumps(f) for f in ctx.before_response]
        return out + _error_frames(
            rt, exc, request_type=frame.type, request_id=frame.request_id, data=payload
        )
    except Exception:
        log.exception("command failed", extra={"request_type": frame.type, "request_id": frame.request_id})
        err = AgentVMError("internal error")
        return _error_frames(rt, err, request_type=frame.type, request_id=frame.request_id, data=payload)
    if frame.subscribe_listed and "__subscriptions" in data:
        data = await _subscribe_listed(ctx, data)
    out = [dumps(f) for f in ctx.before_response]
    out.append(dumps(response(frame.type, {"requestId": frame.request_id, **data}, now_ms=rt.clock.now_ms())))
    return out


async def _subscribe_listed(ctx: CommandContext, data: Json) -> Json:
    """Server-side subscriptions: the caller asked (``__subscribe``) to be subscribed to the
    sessions its response lists, as an AgentX v2 ``image.list`` is; the response then says so
    (``__subscribed``) and keeps ``__subscriptions``. If a subscription fails, the response goes
    without the mark and the client subscribes itself, as against a server without the feature."""
    try:
        for session_id in data["__subscriptions"]:
            await ctx.rt.connections.subscribe(ctx.connection_id, session_id, known=ctx.connection)
    except Exception:
        log.exception("server-side subscribe failed", extra={"request_id": ctx.request_id})
        return data
    return {**data, SUBSCRIBED_KEY: True}


def refuse_frame(rt: Runtime, raw: str | bytes, exc: AgentVMError) -> list[str]:
    """The answer to a frame the host refuses before handling it (its frame-rate limit): the
    error, with the frame's request type and id when they can be read without parsing it, in the
    frame's protocol (as it looks: a JSON-RPC frame gets a JSON-RPC error)."""
    if agentx_v2.looks_like_rpc(raw):
        return agentx_v2.refuse_rpc(raw, exc)
    request_type, request_id = peek_request(raw)
    return _error_frames(rt, exc, request_type=request_type, request_id=request_id, data={})


def _refused(
    rt: Runtime, connection_id: str, exc: AgentVMError, request_type: str | None, request_id: str | None
) -> list[str]:
    """The answer to a frame refused before any command ran (malformed, unauthenticated, over a
    limit), and one log line, rate-limited per client address (logs.log_refusal)."""
    log_refused_frame(log, connection_id, exc)
    return _error_frames(rt, exc, request_type=request_type, request_id=request_id, data={})


def _error_frames(
    rt: Runtime, exc: AgentVMError, *, request_type: str | None, request_id: str | None, data: Json
) -> list[str]:
    """A ``system_error``, then (for a request we can name) its ``*_response`` with ``data.error``."""
    failed(exc.code)
    now = rt.clock.now_ms()
    extra = exc.wire_fields()
    out = [dumps(system_error(exc.message, now_ms=now, code=exc.code, request_id=request_id, details=extra))]
    if request_type is not None and request_id is not None:
        body: Json = {"requestId": request_id, **FAILURE_DEFAULTS.get(request_type, {})}
        body.update({k: data[k] for k in ECHOED_FIELDS if isinstance(data.get(k), str)})
        body.update(extra)
        body["error"] = exc.message
        body["code"] = exc.code
        out.append(dumps(response(request_type, body, now_ms=now)))
    return out


__all__ = ["handle_frame", "refuse_frame"]
