"""AgentX v2: JSON-RPC 2.0 on the same ``/ws`` as v1 (docs/protocol.md, "AgentX v2 (JSON-RPC 2.0)").

**Which protocol.** A frame that is a JSON object with ``"jsonrpc": "2.0"``, or an array (a batch),
is v2; anything else is v1 (``agentx_v1``). One connection speaks one protocol, chosen by its first
frame (``Connections.claim_protocol``): a frame of the other protocol is answered with an error in
the connection's own protocol and not handled. On AWS the choice lives on the connection's record
and its subscriptions (v1 is the unrecorded default, so v1 connections cost what they did).

**Methods** are in ``gateway/v2/methods.py`` (which ones, and how each maps onto AgentVM).

**Events** are 2.x ``stream.event`` notifications ``{topic, event}``, rendered from the turn's
frames (``streaming.agentx_v2_events``), with our ``seq``.

**Errors** are JSON-RPC errors: -32700 parse error (``id: null``), -32600 invalid request (also an
oversized frame, a too deep one, a v1 frame on a v2 connection), -32601 method not found (also
2.x methods AgentVM does not serve: ``llm.*``, ``os.*``, ``runtime.rewind``), -32602 invalid params
(our ``bad_request``), 401 / 403 / 404 / 409 / 429 (unauthorized, forbidden, not_found, conflicts,
quota and rate limits), 503 / 507 (storage), -32603 internal. ``error.data.code`` is always our
stable code (``data.limit``/``resetAt`` as in v1).

Auth, tenancy, rate limits, budgets, resume and exactly-once are v1's, through the same commands
(``commands``, validated by ``agentx_v1``'s request models).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from agentvm.errors import (
    AgentVMError,
    BadRequest,
    Conflict,
    Forbidden,
    FrameTooLarge,
    NotFound,
    QuotaExceeded,
    StorageQuotaExceeded,
    StorageUnavailable,
    Unauthorized,
    UnknownRequest,
)
from agentvm.events import dumps, system_error
from agentvm.gateway.access import admit, authenticate, is_admin, log_refused_frame
from agentvm.gateway.tally import counted_for, failed
from agentvm.gateway.v1.commands import CommandContext
from agentvm.gateway.v1.frames import MAX_DEPTH, unsafe_content
from agentvm.ports import PROTOCOL_V1, PROTOCOL_V2
from agentvm.streaming.agentx_v2_events import render_frame

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.ports import ConnectionInfo
    from agentvm.runtime import Runtime

from agentvm.gateway.v2.methods import METHODS, UNSERVED, UNSERVED_PREFIXES, Deferred, resolve

log = logging.getLogger("agentvm.gateway")

MAX_BATCH = 50  # requests in one batch frame

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
# JSON-RPC error code by error type (the most specific class in the MRO wins); AgentX 2.x uses
# HTTP-like codes for its own errors (401, 403, 404, 408).
RPC_CODES: dict[type[AgentVMError], int] = {
    UnknownRequest: METHOD_NOT_FOUND,
    FrameTooLarge: INVALID_REQUEST,
    BadRequest: INVALID_PARAMS,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    QuotaExceeded: 429,
    StorageUnavailable: 503,
    StorageQuotaExceeded: 507,
}


class InvalidRequest(BadRequest):
    """Not a valid JSON-RPC request object (-32600)."""


class ParseError(BadRequest):
    """Not JSON (-32700)."""


_BRACKET = re.compile(r"\s*\[")
_BRACKET_B = re.compile(rb"\s*\[")
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]{1,128})"|-?\d{1,16})\s*[,}]')


# -- recognising and refusing frames --------------------------------------------------------------
def looks_like_rpc(raw: str | bytes) -> bool:
    """Cheap: a batch (``[`` first), or ``"jsonrpc"`` somewhere. Only then is the frame parsed here;
    a v1 frame that merely contains the word goes on to the v1 parser (``handle_rpc`` says None)."""
    if isinstance(raw, bytes):
        return _BRACKET_B.match(raw) is not None or b'"jsonrpc"' in raw
    return _BRACKET.match(raw) is not None or '"jsonrpc"' in raw


def peek_id(raw: str | bytes) -> str | int | None:
    """The request id of a frame we will not parse (too large, too deep, over a rate limit)."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    match = _ID.search(data)
    if match is None:
        return None
    token = match.group(1).decode("utf-8", "replace")
    return token[1:-1] if token.startswith('"') else int(token)


def rpc_code(exc: AgentVMError) -> int:
    if isinstance(exc, ParseError):
        return PARSE_ERROR
    if isinstance(exc, InvalidRequest):
        return INVALID_REQUEST
    return next((RPC_CODES[c] for c in type(exc).__mro__ if c in RPC_CODES), INTERNAL_ERROR)


def error_object(exc: AgentVMError) -> Json:
    """A JSON-RPC ``error``: its code, our message, and our stable code in ``data.code``."""
    failed(exc.code)
    return {"code": rpc_code(exc), "message": exc.message, "data": {"code": exc.code, **exc.wire_fields()}}


def error_response(rpc_id: str | int | None, exc: AgentVMError) -> Json:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": error_object(exc)}


def refuse_rpc(raw: str | bytes, exc: AgentVMError) -> list[str]:
    """A JSON-RPC frame the host refuses before handling it (the local frame-rate limit)."""
    return [dumps(error_response(peek_id(raw), exc))]


def refused_v1_frame(exc: AgentVMError | None) -> list[str]:
    """A v1 frame (or a frame that is not JSON-RPC) on a connection that speaks v2."""
    if isinstance(exc, BadRequest) and exc.message == "frame is not valid JSON":
        return [dumps(error_response(None, ParseError("Parse error: the frame is not valid JSON")))]
    why = InvalidRequest(
        "this connection speaks JSON-RPC 2.0 (AgentX v2), chosen by its first frame; "
        "send JSON-RPC requests, or open another connection for AgentX v1"
        + (f" ({exc.message})" if exc is not None else "")
    )
    return [dumps(error_response(None, why))]


def _refused_v2_frame(rt: Runtime) -> list[str]:
    """A JSON-RPC frame on a connection that speaks v1: a v1 ``system_error``."""
    exc = BadRequest(
        "this connection speaks AgentX v1, chosen by its first frame (or a subscribe before any "
        "JSON-RPC frame); open another connection for JSON-RPC 2.0 (AgentX v2)"
    )
    return [dumps(system_error(exc.message, now_ms=rt.clock.now_ms(), code=exc.code))]


# -- one frame ------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Caller:
    rt: Runtime
    connection_id: str
    conn: ConnectionInfo | None

    @property
    def authenticated(self) -> bool:
        return self.conn is not None and self.conn.tenant_id is not None


async def handle_rpc(rt: Runtime, connection_id: str, raw: str | bytes) -> list[str] | None:
    """Handle one frame that looks like JSON-RPC (``looks_like_rpc``); returns the payloads for
    the caller, or None when the frame is not JSON-RPC after all (the v1 gateway takes it)."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    limit = rt.turns.max_frame_bytes
    # A frame refused before it is parsed is answered in JSON-RPC on a connection that chose v2 (read
    # on this rare path only), else as v1 answers it: a connection without a record may be a v1
    # one (AWS records v1 nowhere), and the frame chose nothing.
    if len(data) > limit:
        if not await _speaks_v2(rt, connection_id):
            return None
        too_large = FrameTooLarge(f"frame of {len(data)} bytes exceeds the limit of {limit} bytes")
        return _refused(connection_id, peek_id(data), too_large)
    try:
        doc = json.loads(raw)
    except RecursionError:
        if not await _speaks_v2(rt, connection_id):
            return None
        too_deep = InvalidRequest(f"frame is nested more than {MAX_DEPTH} levels deep")
        return _refused(connection_id, peek_id(data), too_deep)
    except (ValueError, UnicodeDecodeError):
        if not await _speaks_v2(rt, connection_id):
            return None
        return _refused(connection_id, None, ParseError("Parse error: the frame is not valid JSON"))
    if not (isinstance(doc, list) or (isinstance(doc, dict) and doc.get("jsonrpc") == "2.0")):
        return None
    conn = await rt.connections.get(connection_id)
    counted_for(conn.tenant_id if conn is not None else None)
    if conn is not None and conn.protocol != PROTOCOL_V2:
        protocol = conn.protocol or await rt.connections.claim_protocol(connection_id, PROTOCOL_V2)
        if protocol != PROTOCOL_V2:
            return _refused_v2_frame(rt)
        conn = dataclasses.replace(conn, protocol=PROTOCOL_V2)
    caller = _Caller(rt, connection_id, conn)
    if isinstance(doc, dict):
        events, reply = await _message(caller, doc)
        return events + ([dumps(reply)] if reply is not None else [])
    if not doc:
        return _refused(connection_id, None, InvalidRequest("an empty batch"))
    if len(doc) > MAX_BATCH:
        return _refused(connection_id, None, InvalidRequest(f"a batch of more than {MAX_BATCH} requests"))
    out: list[str] = []
    replies: list[Json] = []
    for item in doc:
        events, reply = await _message(caller, item)
        out += events
        if reply is not None:
            replies.append(reply)
    return out + ([dumps(replies)] if replies else [])  # all notifications: nothing, per JSON-RPC


async def _speaks_v2(rt: Runtime, connection_id: str) -> bool:
    conn = await rt.connections.get(connection_id)
    return conn is not None and conn.protocol == PROTOCOL_V2


def _refused(connection_id: str, rpc_id: str | int | None, exc: AgentVMError) -> list[str]:
    """The answer to a frame refused before any method ran, and one (rate-limited) log line."""
    _log_refusal(connection_id, exc)
    return [dumps(error_response(rpc_id, exc))]


def _log_refusal(connection_id: str, exc: AgentVMError) -> None:
    log_refused_frame(log, connection_id, exc)


def _valid_id(value: Any) -> bool:
    """An id we can answer with: null, a string, or an integer every JSON client reads exactly."""
    if isinstance(value, str):
        return unsafe_content(value) is None  # no lone surrogate
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53)


async def _message(caller: _Caller, msg: Any) -> tuple[list[str], Json | None]:
    """One request or notification: the notifications to send first, and the response (None: none)."""
    if not isinstance(msg, dict):
        return [], error_response(None, InvalidRequest("a request must be a JSON object"))
    has_id = "id" in msg
    rpc_id = msg.get("id")
    if not _valid_id(rpc_id):
        why = InvalidRequest("'id' must be a string, an integer (|n| < 2**53) or null")
        return [], error_response(None, why)
    if msg.get("jsonrpc") != "2.0":
        return [], error_response(rpc_id, InvalidRequest("'jsonrpc' must be \"2.0\""))
    problem = unsafe_content(msg)  # too deep, a lone surrogate, an integer past 2**53
    if problem is not None:
        return [], error_response(rpc_id, InvalidRequest(problem.message))
    method = msg.get("method")
    if method is None and ("result" in msg or "error" in msg):
        return [], None  # a response from the client: nothing to do (as v1 ignores *_response)
    if not isinstance(method, str) or not method:
        return [], error_response(rpc_id, InvalidRequest("'method' must be a non-empty string"))
    params = msg.get("params", {})
    if params is None:
        params = {}
    if isinstance(params, list):
        exc: AgentVMError = BadRequest(f"{method}: params are by name (an object), not by position")
        return [], error_response(rpc_id, exc) if has_id else None
    if not isinstance(params, dict):
        return [], error_response(rpc_id, InvalidRequest("'params' must be an object"))
    name = resolve(method)
    try:
        return await _call(
            caller, name or method, known=name is not None, params=params, rpc_id=rpc_id, has_id=has_id
        )
    except AgentVMError as exc:
        if has_id or name == "auth":
            return [], error_response(rpc_id if has_id else None, exc)
        return [], None  # a notification is never answered (JSON-RPC)


async def _call(
    caller: _Caller, name: str, *, known: bool, params: Json, rpc_id: str | int | None, has_id: bool
) -> tuple[list[str], Json | None]:
    rt, conn = caller.rt, caller.conn
    try:
        await admit(rt, caller.connection_id, conn)
    except AgentVMError as exc:
        _log_refusal(caller.connection_id, exc)
        raise
    if name == "auth":
        headers = params.get("headers")
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise BadRequest("auth needs 'headers': an object of strings")
        try:
            counted_for(await authenticate(rt, caller.connection_id, conn, headers, protocol=PROTOCOL_V2))
        except AgentVMError as exc:
            _log_refusal(caller.connection_id, exc)
            raise
        caller.conn = await rt.connections.get(caller.connection_id)
        return [], _result(rpc_id, {"authenticated": True}) if has_id else None
    if name == "control.ack":
        return [], _result(rpc_id, {}) if has_id else None
    if not caller.authenticated:
        raise Unauthorized("connection is not authenticated")
    if not known:
        raise UnknownRequest(f"Method not found: {name}")
    if name in UNSERVED or name.startswith(UNSERVED_PREFIXES):
        raise UnknownRequest(f"Method not found: {name} is an AgentX method AgentVM does not serve")
    assert conn is not None and conn.tenant_id is not None
    ctx = CommandContext(
        rt=rt,
        tenant_id=conn.tenant_id,
        connection_id=caller.connection_id,
        request_id=_request_id(rt, caller.connection_id, params, rpc_id if has_id else None),
        admin=await is_admin(rt, conn),
        key_id=conn.key_id,
    )
    try:
        result = await METHODS[name](ctx, params, rpc_id if has_id else None)
    except AgentVMError as exc:
        events = _events(ctx)
        return events, error_response(rpc_id, exc) if has_id else None
    except Exception:
        log.exception("rpc method failed", extra={"method": name})
        return _events(ctx), error_response(rpc_id, AgentVMError("internal error")) if has_id else None
    if isinstance(result, Deferred) or not has_id:
        return _events(ctx), None
    return _events(ctx), _result(rpc_id, result)


def _events(ctx: CommandContext) -> list[str]:
    """The frames the caller gets before the answer (``agent_created``, ``container_created``…)."""
    return [payload for frame in ctx.before_response for payload in render_frame(frame)]


def _result(rpc_id: str | int | None, result: Json) -> Json:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def _request_id(rt: Runtime, connection_id: str, params: Json, rpc_id: str | int | None) -> str:
    """What makes a retried ``message.send`` append its message once: the ``requestId`` param
    (any connection), else the JSON-RPC id on this connection, else (a notification) nothing."""
    given = params.get("requestId")
    if isinstance(given, str) and 0 < len(given) <= 128:
        return given
    if rpc_id is None:
        return rt.ids.new("req")
    key = f"rpc:{connection_id}:{rpc_id}"
    return key if len(key) <= 128 else "rpc:" + hashlib.sha256(key.encode()).hexdigest()


# -- methods ----------------------------------------------------------------------------------------
__all__ = [
    "PROTOCOL_V1",
    "handle_rpc",
    "looks_like_rpc",
    "peek_id",
    "refuse_rpc",
    "refused_v1_frame",
    "rpc_code",
]
