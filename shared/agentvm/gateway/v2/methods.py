"""AgentX v2's methods: each JSON-RPC method of AgentX 2.9.0 that maps onto AgentVM, as a thin
call of the v1 commands (``gateway/v1/commands.py``) with 2.x's params and answers. The framing,
errors and dispatch are in ``gateway/v2/rpc.py``.

**Methods.** The methods of AgentX 2.9.0 that map onto AgentVM, under their bare names
(``image.create``), and prefixed with ``runtime.`` (what 2.9.0+ clients send) or ``agentx.``:

* ``container.create|get|list`` (2.0–2.7; containers are the caller's tenant's);
* ``image.create|get|list|delete|run|stop|update|messages``. ``image.create`` takes the config
  flattened, as 2.x does (``{name, systemPrompt, model, tools, …}``; a 2.0-style ``config`` object is
  accepted too), plus an optional ``containerId``: without one the image goes to the caller's
  container ``"default"`` (2.8+ clients have no containers), created on first use. A bare
  ``model`` (``claude-sonnet-4-6``, as 2.x names them) is that model on the provider of the server's
  default model; ``customData`` is stored and returned; ``thinking``, ``providerOptions`` and
  ``roleId`` are accepted and ignored;
* ``instance.get|list|destroy|destroyAll|interrupt`` (2.7+) and their 2.0–2.6 names ``agent.*``:
  an instance is AgentVM's agent (its id, ``agent_…``, is both ``instanceId`` and ``agentId``);
* ``message.send``: answered when the turn ends, as in 2.x (``status: "completed" | "failed" |
  "interrupted"``), or when it suspends on a tool call (``"suspended"``). The gateway never waits:
  the turn's worker posts the answer to the caller's connection (``TurnJob.rpcId``), on both hosts.
  ``options.ack: true`` answers at once instead (``status: "accepted"``). A ``requestId`` param
  makes a retried send (even on a new connection) append the message once, as in v1; without
  one, the JSON-RPC id on this connection does. A retry is answered at once with the turn's status.
* ``os.list|read``: the image's sandbox workspace, read-only (what its agent's own tools read; an
  image without sandbox tools lists no files), so 2.9's presentations work; ``os.write`` is not
  served;
* additive, under ``agentvm.``: ``agentvm.subscribe {sessionId, lastSeq?}`` (resume: every frame
  from ``lastSeq`` on, that seq's included, since two events made from one frame share it),
  ``agentvm.tool.approve``, ``agentvm.tool.result``, ``agentvm.tool.waits`` (suspended turns);
* notifications (no ``id``, no reply): ``auth {headers}`` (as v1's ``auth`` frame; a failed one
  *is* answered, with ``id: null``, or the client could not know), 2.0–2.8's ``subscribe {topic}``,
  ``control.ack``. Any method may be sent as a notification; its reply is not sent.

There is no ``__subscriptions`` in 2.x: ``image.create``, ``image.get``, ``image.list``,
``image.run`` and ``message.send`` subscribe the caller to the images' sessions themselves. Events
reach only the subscribers of a session (2.x broadcasts every event to every connection: not copied).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentvm import images
from agentvm.errors import (
    BadRequest,
    NotFound,
)
from agentvm.gateway.v1 import commands
from agentvm.gateway.v1.commands import COMMANDS, CommandContext
from agentvm.gateway.v1.frames import REQUEST_MODELS, describe_error
from agentvm.ports import PROTOCOL_V2
from agentvm.streaming.agentx_v2_events import send_result_body, v2_history
from agentvm.streaming.resume import subscribe_after

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.events import Json
    from agentvm.records import ImageRecord

log = logging.getLogger("agentvm.gateway")

DEFAULT_CONTAINER = "default"  # image.create without a containerId (2.8+ clients have none)
PREFIXES = ("runtime.", "agentx.")  # method namespaces 2.9+ clients put before every name
# 2.x methods that AgentVM does not serve (answered "method not found", saying so)
UNSERVED_PREFIXES = ("llm.", "prototype.")
UNSERVED = frozenset({"runtime.rewind", "unsubscribe", "os.write"})
MAX_OS_READ_BYTES = 1 << 20  # os.read's text, as the HTTP workspace file route's


class Deferred:
    """A handler's result when the answer comes later (``message.send``: from the turn's worker)."""


DEFERRED = Deferred()


def resolve(method: str) -> str | None:
    """The method's canonical name, its ``runtime.``/``agentx.`` prefix removed; None if unknown."""
    for candidate in (method, *(method.removeprefix(p) for p in PREFIXES if method.startswith(p))):
        if candidate in METHODS or candidate in UNSERVED or candidate.startswith(UNSERVED_PREFIXES):
            return candidate
    return None


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


def _qualified(ctx: CommandContext, config: Json) -> Json:
    """2.x names a model bare (``claude-sonnet-4-6``) and its server picks the provider: a bare
    ``model`` is that model on the provider of this server's default model."""
    model = config.get("model")
    if not isinstance(model, str) or not model or "/" in model:
        return config
    provider = ctx.rt.models.resolve(None)[2].partition("/")[0]
    return {**config, "model": f"{provider}/{model}"}


async def image_create(ctx: CommandContext, p: Json, _: Any) -> Json:
    nested = isinstance(p.get("config"), dict)  # 2.0-style {containerId, config}
    config = p["config"] if nested else {k: v for k, v in p.items() if k not in ("containerId", "requestId")}
    config = _qualified(ctx, config)
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
    data = _ids(p, "imageId", "updates")
    if isinstance(data.get("updates"), dict):
        data["updates"] = _qualified(ctx, data["updates"])
    out = await _v1(ctx, "image_update", data)
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


async def message_send(ctx: CommandContext, p: Json, rpc_id: str | int | None) -> Json | Deferred:
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
    sent = await commands.send_message(ctx, req, rpc_id=rpc_id if deferred else None)
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


def _workspace_path(p: Json, *, default: str | None) -> str:
    path = p.get("path", default)
    if not isinstance(path, str) or not 0 < len(path) <= 4096:
        raise BadRequest("invalid params: path: a non-empty string is required")
    return path


async def _workspace_image(ctx: CommandContext, p: Json) -> ImageRecord | None:
    """The image (the caller's tenant's), or None when it has no workspace: no sandbox tools, or a
    server without a sandbox. Its files are what its agent's own tools read, no more."""
    req = _validated(ctx, "image_get", _ids(p, "imageId"))
    image = await images.image_of(ctx.rt, ctx.tenant_id, req.imageId)
    has_sandbox = any(decl.get("type") == "sandbox" for decl in image.tools or [])
    return image if has_sandbox and ctx.rt.sandbox is not None else None


async def os_list(ctx: CommandContext, p: Json, _: Any) -> Json:
    """2.x's ``os.list {imageId, path?}``: a directory of the image's sandbox workspace (its
    container's), ``{files: [{name, path, type}]}``; an image without one has no files."""
    path = _workspace_path(p, default=".")
    image = await _workspace_image(ctx, p)
    if image is None:
        return {"files": []}
    assert ctx.rt.sandbox is not None
    try:
        entries = await ctx.rt.sandbox.list(ctx.tenant_id, image.containerId, path)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return {
        "files": [
            {
                "name": e.path.rsplit("/", 1)[-1],
                "path": e.path,
                "type": "directory" if e.kind == "dir" else "file",
            }
            for e in entries
            if e.kind in ("file", "dir")
        ]
    }


async def os_read(ctx: CommandContext, p: Json, _: Any) -> Json:
    """2.x's ``os.read {imageId, path}``: a file of the image's workspace as text (at most 1 MiB)."""
    path = _workspace_path(p, default=None)
    image = await _workspace_image(ctx, p)
    if image is None:
        raise NotFound(f"File not found: {path} (the image has no workspace)")
    assert ctx.rt.sandbox is not None
    try:
        data = await ctx.rt.sandbox.read(ctx.tenant_id, image.containerId, path, max_bytes=MAX_OS_READ_BYTES)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    except FileNotFoundError:
        raise NotFound(f"File not found: {path}") from None
    return {"content": data.decode("utf-8", "replace")}


async def elicitation_answer(ctx: CommandContext, p: Json, _: Any) -> Json:
    return await _v1(ctx, "elicitation_answer", _ids(p, "elicitationId", "action", "content"))


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
    "os.list": os_list,
    "os.read": os_read,
    "subscribe": subscribe_topic,
    "auth": _never,
    "control.ack": _never,
    # additive (docs/protocol.md)
    "agentvm.subscribe": agentvm_subscribe,
    "agentvm.tool.approve": tool_approve,
    "agentvm.tool.result": tool_result,
    "agentvm.tool.waits": tool_waits,
    "agentvm.elicitation.answer": elicitation_answer,
}

__all__ = ["DEFAULT_CONTAINER", "DEFERRED", "METHODS", "Deferred", "resolve"]
