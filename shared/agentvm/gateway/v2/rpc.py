"""AgentX v2: JSON-RPC 2.0 on the same ``/ws`` as v1 (docs/protocol.md, "AgentX v2 (JSON-RPC 2.0)").

**Which protocol.** A frame that is a JSON object with ``"jsonrpc": "2.0"``, or an array (a batch),
is v2; anything else is v1 (``agentx_v1``). One connection speaks one protocol, chosen by its first
frame (``Connections.claim_protocol``): a frame of the other protocol is answered with an error in
the connection's own protocol and not handled. On AWS the choice lives on the connection's record
and its subscriptions (v1 is the unrecorded default, so v1 connections cost what they did).

**Methods.** The methods of AgentX 2.9.0 that map onto AgentVM, under their bare names
(``image.create``), and prefixed with ``runtime.`` (what 2.9.0+ clients send) or ``agentx.``:

* ``container.create|get|list`` (2.0–2.7; containers are the caller's tenant's);
* ``image.create|get|list|delete|run|stop|update|messages``. ``image.create`` takes the config
  flattened, as 2.x does (``{name, systemPrompt, model, tools, …}``; a 2.0-style ``config`` object is
  accepted too), plus an optional ``containerId``: without one the image goes to the caller's
  container ``"default"`` (2.8+ clients have no containers), created on first use;
* ``instance.get|list|destroy|destroyAll|interrupt`` (2.7+) and their 2.0–2.6 names ``agent.*``:
  an instance is AgentVM's agent (its id, ``agent_…``, is both ``instanceId`` and ``agentId``);
* ``message.send``: answered when the turn ends, as in 2.x (``status: "completed" | "failed" |
  "interrupted"``), or when it suspends on a tool call (``"suspended"``). The gateway never waits:
  the turn's worker posts the answer to the caller's connection (``TurnJob.rpcId``), on both hosts.
  ``options.ack: true`` answers at once instead (``status: "accepted"``). A ``requestId`` param
  makes a retried send (even on a new connection) append the message once, as in v1; without
  one, the JSON-RPC id on this connection does. A retry is answered at once with the turn's status.
* additive, under ``agentvm.``: ``agentvm.subscribe {sessionId, lastSeq?}`` (resume: every frame
  from ``lastSeq`` on, that seq's included, since two events made from one frame share it),
  ``agentvm.tool.approve``, ``agentvm.tool.result``, ``agentvm.tool.waits`` (suspended turns);
* notifications (no ``id``, no reply): ``auth {headers}`` (as v1's ``auth`` frame; a failed one
  *is* answered, with ``id: null``, or the client could not know), 2.0–2.8's ``subscribe {topic}``,
  ``control.ack``. Any method may be sent as a notification; its reply is not sent.

There is no ``__subscriptions`` in 2.x: ``image.create``, ``image.get``, ``image.list``,
``image.run`` and ``message.send`` subscribe the caller to the images' sessions themselves. Events
reach only the subscribers of a session (2.x broadcasts every event to every connection: not copied).

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

from pydantic import ValidationError

from agentvm import images
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
from agentvm.gateway.v1 import commands
from agentvm.gateway.v1.commands import COMMANDS, CommandContext
from agentvm.gateway.v1.frames import MAX_DEPTH, REQUEST_MODELS, describe_error, unsafe_content
from agentvm.ports import PROTOCOL_V1, PROTOCOL_V2
from agentvm.streaming.agentx_v2_events import render_frame, send_result_body, v2_history
from agentvm.streaming.resume import subscribe_after

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.events import Json
    from agentvm.ports import ConnectionInfo
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.gateway")

DEFAULT_CONTAINER = "default"  # image.create without a containerId (2.8+ clients have none)
MAX_BATCH = 50  # requests in one batch frame
PREFIXES = ("runtime.", "agentx.")  # method namespaces 2.9+ clients put before every name

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
# 2.x methods that AgentVM does not serve (answered "method not found", saying so)
UNSERVED_PREFIXES = ("llm.", "os.", "prototype.")
UNSERVED = frozenset({"runtime.rewind", "unsubscribe"})


class InvalidRequest(BadRequest):
    """Not a valid JSON-RPC request object (-32600)."""


class ParseError(BadRequest):
    """Not JSON (-32700)."""


class _Deferred:
    """A handler's result when the answer comes later (``message.send``: from the turn's worker)."""


DEFERRED = _Deferred()
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


def resolve(method: str) -> str | None:
    """The method's canonical name, its ``runtime.``/``agentx.`` prefix removed; None if unknown."""
    for candidate in (method, *(method.removeprefix(p) for p in PREFIXES if method.startswith(p))):
        if candidate in METHODS or candidate in UNSERVED or candidate.startswith(UNSERVED_PREFIXES):
            return candidate
    return None


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
    if isinstance(result, _Deferred) or not has_id:
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
def _validated(ctx: CommandContext, type_: str, data: Json, *, flat: bool = False) -> Any:
    """``data`` as the v1 command ``type_`` takes it, validated by its model (strict, as in v1)."""
    model = REQUEST_MODELS[f"{type_}_request"]
    try:
        return model.model_validate({**data, "requestId": ctx.request_id})
    except ValidationError as exc:
        raise BadRequest(_flat(f"invalid params: {describe_error(exc)}", flat)) from None


async def _v1(ctx: CommandContext, type_: str, data: Json, *, flat: bool = False) -> Json:
    """Run the v1 command ``type_`` with ``data``."""
    payload = _validated(ctx, type_, data, flat=flat)
    try:
        return await COMMANDS[f"{type_}_request"](ctx, payload)
    except BadRequest as exc:
        exc.message = _flat(exc.message, flat)
        raise


def _flat(message: str, flat: bool) -> str:
    """Field names as a flattened ``image.create`` got them (``name``, not ``config.name``)."""
    return message.replace("config.", "") if flat else message


def _ids(params: Json, *names: str) -> Json:
    """The params v1 reads, by their v1 names (``instanceId`` is v1's ``agentId``)."""
    out = {k: params[k] for k in names if k in params}
    if "agentId" in names and "instanceId" in params and "agentId" not in params:
        out["agentId"] = params["instanceId"]
    return out


def _agent_fields(agent_id: str | None) -> Json:
    return {} if agent_id is None else {"instanceId": agent_id, "agentId": agent_id}


def _record(record: Json | None) -> Json | None:
    """An image record the 2.x way: its running agent is also its ``instanceId``."""
    if record is None:
        return None
    out = dict(record)
    if out.get("agentId"):
        out["instanceId"] = out["agentId"]
    return out


async def _subscribe_all(ctx: CommandContext, session_ids: list[str]) -> None:
    for session_id in session_ids:
        await ctx.rt.connections.subscribe(ctx.connection_id, session_id)


async def container_create(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "container_create", _ids(p, "containerId"))


async def container_get(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "container_get", _ids(p, "containerId"))


async def container_list(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "container_list", {})


async def image_create(ctx: CommandContext, p: Json, _: Any) -> Json:
    nested = isinstance(p.get("config"), dict)  # 2.0-style {containerId, config}
    config = p["config"] if nested else {k: v for k, v in p.items() if k not in ("containerId", "requestId")}
    data = {"containerId": p.get("containerId", DEFAULT_CONTAINER), "config": config}
    out = await _v1(ctx, "image_create", data, flat=not nested)
    await _subscribe_all(ctx, out.pop("__subscriptions", []))
    return {"record": _record(out["record"])}


async def image_get(ctx: CommandContext, p: Json, _: Any) -> Json:
    out = await _v1(ctx, "image_get", _ids(p, "imageId"))
    await _subscribe_all(ctx, out.pop("__subscriptions", []))
    return {"record": _record(out["record"])}


async def image_list(ctx: CommandContext, p: Json, _: Any) -> Json:
    out = await _v1(ctx, "image_list", _ids(p, "containerId"))
    await _subscribe_all(ctx, out.pop("__subscriptions", []))
    return {"records": [_record(r) for r in out["records"]]}


async def image_delete(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "image_delete", _ids(p, "imageId"))


async def image_run(ctx: CommandContext, p: Json, _: Any) -> Json:
    out = await _v1(ctx, "image_run", _ids(p, "imageId"))  # subscribes the caller; instanceId is ours
    image = await images.image_of(ctx.rt, ctx.tenant_id, out["imageId"])
    return {
        "imageId": image.imageId,
        **_agent_fields(out["agentId"]),
        "sessionId": image.sessionId,
        "containerId": image.containerId,
        "reused": out["reused"],
    }


async def image_stop(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "image_stop", _ids(p, "imageId"))


async def image_update(ctx: CommandContext, p: Json, _: Any) -> Json:
    out = await _v1(ctx, "image_update", _ids(p, "imageId", "updates"))
    return {"record": _record(out["record"])}


async def image_messages(ctx: CommandContext, p: Json, _: Any) -> Json:
    out = await _v1(ctx, "image_messages", _ids(p, "imageId"))
    return {"imageId": out["imageId"], "messages": v2_history(out["messages"])}


def _instance(image: ImageRecord) -> Json:
    return {
        **_agent_fields(image.agentId),
        "imageId": image.imageId,
        "containerId": image.containerId,
        "sessionId": image.sessionId,
        "lifecycle": "running",
    }


async def instance_get(ctx: CommandContext, p: Json, _: Any) -> Json:
    req = _validated(ctx, "agent_get", _ids(p, "agentId"))
    image = await images.image_by_agent(ctx.rt, ctx.tenant_id, req.agentId)
    return {"agent": None if image is None else _instance(image), "exists": image is not None}


async def instance_list(ctx: CommandContext, p: Json, _: Any) -> Json:
    container = p.get("containerId")
    if container is not None:
        _validated(ctx, "agent_list", {"containerId": container})
    images = await ctx.rt.store.list_images(ctx.tenant_id, container)
    return {"agents": [_instance(i) for i in images if i.agentId]}


async def instance_destroy(ctx: CommandContext, p: Json, _: Any) -> Json:
    out = await _v1(ctx, "agent_destroy", _ids(p, "agentId"))
    return {**_agent_fields(out["agentId"]), "success": out["success"]}


async def instance_destroy_all(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "agent_destroy_all", _ids(p, "containerId"))


async def instance_interrupt(ctx: CommandContext, p: Json, _: Any) -> Json:
    out = await _v1(ctx, "agent_interrupt", _ids(p, "imageId", "agentId"))
    return {**_agent_fields(out.get("agentId")), "imageId": out["imageId"]}


async def message_send(ctx: CommandContext, p: Json, rpc_id: str | int | None) -> Json | _Deferred:
    options = p.get("options")
    ack = isinstance(options, dict) and options.get("ack") is True
    data = _ids(p, "imageId", "agentId", "content")
    if isinstance(options, dict):
        rest = {k: v for k, v in options.items() if k != "ack"}
        if rest:
            data["options"] = rest
    elif options is not None:
        data["options"] = options  # refused by the model, with its message
    req = _validated(ctx, "message_send", data)
    deferred = rpc_id is not None and not ack
    sent = await commands.send_message(ctx, req, rpc_id=rpc_id if deferred else None)  # type: ignore[arg-type]
    if deferred and sent.created:
        return DEFERRED  # the turn's worker answers (turns/status.py: answer_send)
    status = "accepted"
    if not sent.created:  # a retry: what became of the turn it started
        turn = await ctx.rt.store.get_turn(sent.turn_id)
        status = turn.status if turn is not None and turn.status != "queued" else "accepted"
    assert sent.image.agentId is not None  # send_message started the image's agent
    return send_result_body(
        instance_id=sent.image.agentId, image_id=sent.image.imageId, turn_id=sent.turn_id, status=status
    )


async def agentvm_subscribe(ctx: CommandContext, p: Json, _: Any) -> Json:
    """``{sessionId, lastSeq?}``: with ``lastSeq``, every frame from that seq on first (resume)."""
    session_id, last = p.get("sessionId"), p.get("lastSeq")
    if not isinstance(session_id, str) or not 0 < len(session_id) <= 128:
        raise BadRequest("invalid params: sessionId: a non-empty string is required")
    if last is not None and (not isinstance(last, int) or isinstance(last, bool) or last < 0):
        raise BadRequest("invalid params: lastSeq: must be a non-negative integer")
    session = await ctx.rt.store.get_session(ctx.tenant_id, session_id)
    if session is None:
        raise NotFound(f"Session not found: {session_id}")
    if last is None:
        await ctx.rt.connections.subscribe(ctx.connection_id, session_id)
    else:  # the frames of seq `last` again: two events made from one frame share it
        await subscribe_after(ctx.rt, ctx.connection_id, session, max(last - 1, 0), protocol=PROTOCOL_V2)
    return {"sessionId": session_id}


async def subscribe_topic(ctx: CommandContext, p: Json, rpc_id: Any) -> Json:
    """2.0–2.8's ``subscribe {topic}``: a session's id (``global``: every connection has it)."""
    topic = p.get("topic")
    if topic == "global":
        return {"topic": topic}
    await agentvm_subscribe(ctx, {"sessionId": topic}, rpc_id)
    return {"topic": topic}


async def tool_approve(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "tool_approval", _ids(p, "turnId", "toolCallId", "approved", "reason"))


async def tool_result(ctx: CommandContext, p: Json, _: Any) -> Json:
    if "output" not in p:
        raise BadRequest("invalid params: output: Field required")
    return await _v1(ctx, "tool_result", _ids(p, "turnId", "toolCallId", "output", "isError"))


async def tool_waits(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "tool_waits", _ids(p, "containerId", "imageId"))


async def _never(ctx: CommandContext, p: Json, _: Any) -> Json:  # handled in _call
    raise AssertionError("handled before dispatch")


METHODS: dict[str, Callable[[CommandContext, Json, Any], Awaitable[Any]]] = {
    "container.create": container_create,
    "container.get": container_get,
    "container.list": container_list,
    "image.create": image_create,
    "image.get": image_get,
    "image.list": image_list,
    "image.delete": image_delete,
    "image.run": image_run,
    "image.stop": image_stop,
    "image.update": image_update,
    "image.messages": image_messages,
    "instance.get": instance_get,
    "instance.list": instance_list,
    "instance.destroy": instance_destroy,
    "instance.destroyAll": instance_destroy_all,
    "instance.interrupt": instance_interrupt,
    # 2.0–2.6 names of the instance methods
    "agent.get": instance_get,
    "agent.list": instance_list,
    "agent.destroy": instance_destroy,
    "agent.destroyAll": instance_destroy_all,
    "agent.interrupt": instance_interrupt,
    "message.send": message_send,
    "subscribe": subscribe_topic,
    "auth": _never,
    "control.ack": _never,
    # additive (docs/protocol.md)
    "agentvm.subscribe": agentvm_subscribe,
    "agentvm.tool.approve": tool_approve,
    "agentvm.tool.result": tool_result,
    "agentvm.tool.waits": tool_waits,
}

__all__ = [
    "DEFAULT_CONTAINER",
    "METHODS",
    "PROTOCOL_V1",
    "handle_rpc",
    "looks_like_rpc",
    "peek_id",
    "refuse_rpc",
    "refused_v1_frame",
    "resolve",
    "rpc_code",
]
