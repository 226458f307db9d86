"""Anthropic's Managed Agents API at ``/anthropic/v1/...`` (docs/managed-agents.md): the official
``anthropic`` SDK, with ``base_url=<server>/anthropic`` and an AgentVM key, runs against AgentVM.

Thin handlers over what exists: agents and environments are versioned documents of the resource
centre (``managed.documents``); a session is an AgentVM image and its session in the container
named after the environment, configured from the agent version (``managed.mapping.image_config``);
``user.message`` is ``turns.submit.send_message``; ``user.interrupt`` the existing interrupt;
``user.tool_confirmation`` and ``user.custom_tool_result`` answer the turn's waits
(``turns.waits.answer``); the event stream is the session's frames through the same subscriber feed
as the plain-HTTP SSE routes (``api/http_turns.py``), mapped to session events, resumable with
``Last-Event-ID``. Errors are in the API's own shape (``managed.errors``).

Auth: ``x-api-key`` or ``Authorization: Bearer`` with an AgentVM key (any scope); the tenant is the
key's, and another tenant's ids answer exactly like missing ones.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Request
from fastapi.responses import StreamingResponse

from agentvm.api.deps import RuntimeDep, admit
from agentvm.api.http_turns import EVENT_STREAM, AttachablePush, Feed, stored_frames
from agentvm.api.managed import documents, mapping
from agentvm.api.managed.errors import AnthropicRoute, NotServed
from agentvm.errors import BadRequest, Conflict, NotFound
from agentvm.messages import UserMessage
from agentvm.security.auth import Principal  # noqa: TC001 (FastAPI reads the annotations)
from agentvm.streaming.frames import TURN_SPAN

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.records import ImageRecord, SessionRecord
    from agentvm.runtime import Runtime

MAX_LIMIT = 1000
DEFAULT_LIMIT = 20
JSONBody = Annotated[dict[str, Any], Body()]


async def managed_caller(request: Request, runtime: RuntimeDep) -> Principal:
    """The key's principal: ``x-api-key`` (what the SDK sends) or ``Authorization: Bearer``."""
    headers = dict(request.headers)
    key = request.headers.get("x-api-key")
    if key and "authorization" not in headers:
        headers["authorization"] = f"Bearer {key}"
    return await admit(request, runtime, headers)


Caller = Annotated[Principal, Depends(managed_caller)]
# Not in /openapi.json: the contract is Anthropic's published API (docs/managed-agents.md lists each
# route, served, mapped or not; tests/unit/api/test_managed_agents_docs.py keeps that list whole).
router = APIRouter(prefix="/anthropic/v1", route_class=AnthropicRoute, include_in_schema=False)


# -- agents ------------------------------------------------------------------------------------
# What a session shows of the agent version it runs (BetaManagedAgentsSessionAgent).
SESSION_AGENT_FIELDS = (
    "id",
    "name",
    "description",
    "model",
    "system",
    "tools",
    "mcp_servers",
    "skills",
    "execution_identity",
    "multiagent",
    "version",
)
AGENT_FIELDS = ("name", "description", "system", "model", "tools", "mcp_servers", "metadata")


@router.post("/agents")
async def create_agent(runtime: RuntimeDep, caller: Caller, body: JSONBody) -> dict[str, Any]:
    """A new agent, version 1."""
    _refuse_unserved(body, "skills", "multiagent", "execution_identity")
    now = mapping.iso(runtime.clock.now_ms())
    agent = {
        "id": runtime.ids.new("agent"),
        "type": "agent",
        "name": _string(body, "name", required=True),
        "description": body.get("description"),
        "system": body.get("system"),
        "model": {"id": mapping.model_id(body.get("model"))},
        "tools": list(body.get("tools") or []),
        "mcp_servers": list(body.get("mcp_servers") or []),
        "skills": [],
        "metadata": _metadata(body.get("metadata"), {}),
        "multiagent": None,
        "execution_identity": {"type": "service_account"},  # the server runs it, as the tenant
        "created_at": now,
        "updated_at": now,
        "archived_at": None,
        "version": 1,
    }
    _check_agent(agent)
    await documents.put(runtime, caller.tenant_id, "agents", agent, by=caller.key_id)
    return agent


@router.get("/agents")
async def list_agents(request: Request, runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    agents = await documents.list_all(runtime, caller.tenant_id, "agents")
    if not _flag(request, "include_archived"):
        agents = [a for a in agents if not a.get("archived_at")]
    return _page(request, _created_between(request, agents))


@router.get("/agents/{agent_id}")
async def retrieve_agent(
    runtime: RuntimeDep, caller: Caller, agent_id: str, version: int | None = None
) -> dict[str, Any]:
    return await _agent(runtime, caller.tenant_id, agent_id, version)


@router.post("/agents/{agent_id}")
async def update_agent(runtime: RuntimeDep, caller: Caller, agent_id: str, body: JSONBody) -> dict[str, Any]:
    """A new version of the agent (``version``: the one this update was made from)."""
    _refuse_unserved(body, "skills", "multiagent", "execution_identity")
    current = await _agent(runtime, caller.tenant_id, agent_id, None)
    if current.get("archived_at"):
        raise BadRequest(f"agent {agent_id} is archived")
    if body.get("version") is not None and body["version"] != current["version"]:
        raise Conflict(f"agent {agent_id} is at version {current['version']}, not {body['version']}")
    updated = dict(current)
    for name in AGENT_FIELDS:
        if name not in body:
            continue
        if name == "metadata":
            updated["metadata"] = _metadata(body["metadata"], current["metadata"])
        elif name == "model":
            updated["model"] = {"id": mapping.model_id(body["model"])}
        elif name == "name":
            updated["name"] = _string(body, "name", required=True)
        else:
            updated[name] = (
                body[name] if body[name] is not None else ([] if name in ("tools", "mcp_servers") else None)
            )
    if {k: v for k, v in updated.items() if k != "updated_at"} == {
        k: v for k, v in current.items() if k != "updated_at"
    }:
        return current  # nothing changed: no new version
    updated["version"] = current["version"] + 1
    updated["updated_at"] = mapping.iso(runtime.clock.now_ms())
    _check_agent(updated)
    await documents.put(runtime, caller.tenant_id, "agents", updated, by=caller.key_id)
    return updated


@router.post("/agents/{agent_id}/archive")
async def archive_agent(runtime: RuntimeDep, caller: Caller, agent_id: str) -> dict[str, Any]:
    agent = await _agent(runtime, caller.tenant_id, agent_id, None)
    if not agent.get("archived_at"):
        now = mapping.iso(runtime.clock.now_ms())
        agent = {**agent, "archived_at": now, "updated_at": now}
        await documents.put(runtime, caller.tenant_id, "agents", agent, by=caller.key_id)
    return agent


@router.get("/agents/{agent_id}/versions")
async def list_agent_versions(
    request: Request, runtime: RuntimeDep, caller: Caller, agent_id: str
) -> dict[str, Any]:
    history = await documents.versions(runtime, caller.tenant_id, "agents", agent_id)
    latest: dict[int, dict[str, Any]] = {}
    for state in history:
        latest[state["version"]] = state
    return _page(request, [latest[v] for v in sorted(latest, reverse=True)])


async def _agent(rt: Runtime, tenant_id: str, agent_id: str, version: int | None) -> dict[str, Any]:
    history = await documents.versions(rt, tenant_id, "agents", agent_id)
    if version is None:
        return history[-1]
    found = [s for s in history if s.get("version") == version]
    if not found:
        raise NotFound(f"agent {agent_id} has no version {version}")
    return found[-1]


def _check_agent(agent: dict[str, Any]) -> None:
    """The image config an agent makes must be valid now, not when a session is made."""
    from pydantic import ValidationError

    from agentvm.images import ImageConfig

    for tool in agent["tools"]:
        if not isinstance(tool, dict) or tool.get("type") not in ("custom", mapping.TOOLSET, "mcp_toolset"):
            raise BadRequest("tools: custom, agent_toolset_20260401 or mcp_toolset tools")
    try:
        ImageConfig.model_validate(mapping.image_config(agent))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise BadRequest(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None


# -- environments ------------------------------------------------------------------------------
@router.post("/environments")
async def create_environment(runtime: RuntimeDep, caller: Caller, body: JSONBody) -> dict[str, Any]:
    """A new environment: the AgentVM container its sessions run in (named after its id)."""
    config = _environment_config(body.get("config"))
    now = mapping.iso(runtime.clock.now_ms())
    env = {
        "id": runtime.ids.new("env"),
        "type": "environment",
        "name": _string(body, "name", required=True),
        "description": body.get("description"),
        "config": config,
        "metadata": _metadata(body.get("metadata"), {}),
        "scope": body.get("scope"),
        "created_at": now,
        "updated_at": now,
        "archived_at": None,
    }
    await documents.put(runtime, caller.tenant_id, "environments", env, by=caller.key_id)
    return env


@router.get("/environments")
async def list_environments(request: Request, runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    envs = await documents.list_all(runtime, caller.tenant_id, "environments")
    if not _flag(request, "include_archived"):
        envs = [e for e in envs if not e.get("archived_at")]
    return _page(request, envs)


@router.get("/environments/{environment_id}")
async def retrieve_environment(runtime: RuntimeDep, caller: Caller, environment_id: str) -> dict[str, Any]:
    return await documents.get(runtime, caller.tenant_id, "environments", environment_id)


@router.post("/environments/{environment_id}")
async def update_environment(
    runtime: RuntimeDep, caller: Caller, environment_id: str, body: JSONBody
) -> dict[str, Any]:
    env = await documents.get(runtime, caller.tenant_id, "environments", environment_id)
    updated = {**env}
    if body.get("config") is not None:
        updated["config"] = _environment_config(body["config"])
    for name in ("name", "description"):
        if name in body and body[name] is not None:
            updated[name] = body[name]
    if "metadata" in body:
        updated["metadata"] = _metadata(body["metadata"], env["metadata"])
    updated["updated_at"] = mapping.iso(runtime.clock.now_ms())
    await documents.put(runtime, caller.tenant_id, "environments", updated, by=caller.key_id)
    return updated


@router.post("/environments/{environment_id}/archive")
async def archive_environment(runtime: RuntimeDep, caller: Caller, environment_id: str) -> dict[str, Any]:
    env = await documents.get(runtime, caller.tenant_id, "environments", environment_id)
    if not env.get("archived_at"):
        now = mapping.iso(runtime.clock.now_ms())
        env = {**env, "archived_at": now, "updated_at": now}
        await documents.put(runtime, caller.tenant_id, "environments", env, by=caller.key_id)
    return env


PACKAGE_MANAGERS = ("apt", "cargo", "gem", "go", "npm", "pip")


def _environment_config(given: Any) -> dict[str, Any]:
    """A cloud config as the API shows it. Packages to install are refused (the sandbox installs
    none); ``networking`` is recorded as given, not applied."""
    given = given or {"type": "cloud"}
    if not isinstance(given, dict) or given.get("type") != "cloud":
        raise NotServed("config: only cloud environments are served (self-hosted ones are not)")
    packages = given.get("packages") or {}
    if any(packages.get(m) for m in PACKAGE_MANAGERS):
        raise NotServed("config.packages: installing packages is not served (the sandbox has what it has)")
    return {
        "type": "cloud",
        "networking": given.get("networking") or {"type": "unrestricted"},
        "packages": {"type": "packages", **dict.fromkeys(PACKAGE_MANAGERS, [])},
    }


# -- sessions ----------------------------------------------------------------------------------
@router.post("/sessions")
async def create_session(runtime: RuntimeDep, caller: Caller, body: JSONBody) -> dict[str, Any]:
    """A new session: an image of the environment's container, configured from the agent version."""
    from pydantic import ValidationError

    from agentvm.images import ImageConfig, create

    _refuse_unserved(body, "resources", "vault_ids", "budget")
    ref = body.get("agent")
    if isinstance(ref, str):
        agent_id, version = ref, None
    elif isinstance(ref, dict) and isinstance(ref.get("id"), str):
        if ref.get("type") not in (None, "agent"):
            raise NotServed(
                "agent: an agent id, or {type: 'agent', id, version} (inline agents are not served)"
            )
        agent_id, version = ref["id"], ref.get("version")
    else:
        raise BadRequest("agent: an agent id, or {type: 'agent', id, version}")
    agent = await _agent(runtime, caller.tenant_id, agent_id, version)
    if agent.get("archived_at"):
        raise BadRequest(f"agent {agent_id} is archived")
    env_id = _string(body, "environment_id", required=True)
    env = await documents.get(runtime, caller.tenant_id, "environments", env_id)
    if env.get("archived_at"):
        raise BadRequest(f"environment {env_id} is archived")
    model = agent["model"]["id"]
    try:
        config = ImageConfig.model_validate(
            {**mapping.image_config(agent), "model": model if "/" in model else f"anthropic/{model}"}
        )
    except ValidationError as exc:
        raise BadRequest(str(exc.errors()[0]["msg"])) from None
    image = await create(
        runtime,
        caller.tenant_id,
        env_id,
        config,
        admin=caller.allows("admin"),
        by=caller.key_id,
        notices=[],
    )
    now = mapping.iso(runtime.clock.now_ms())
    doc: dict[str, Any] = {
        "id": image.sessionId,
        "type": "session",
        "agent": {k: agent.get(k) for k in SESSION_AGENT_FIELDS} | {"type": "agent"},
        "environment_id": env_id,
        "title": body.get("title"),
        "metadata": _metadata(body.get("metadata"), {}),
        "resources": [],
        "vault_ids": [],
        "outcome_evaluations": [],
        "created_at": now,
        "updated_at": now,
        "archived_at": None,
    }
    await documents.put(runtime, caller.tenant_id, "sessions", doc, by=caller.key_id)
    for event in body.get("initial_events") or []:
        await _send_one(runtime, caller, doc, image, event)
    return await _session_wire(runtime, caller.tenant_id, doc)


@router.get("/sessions")
async def list_sessions(request: Request, runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    docs = await documents.list_all(runtime, caller.tenant_id, "sessions")
    query = request.query_params
    if not _flag(request, "include_archived"):
        docs = [d for d in docs if not d.get("archived_at")]
    if query.get("agent_id"):
        docs = [d for d in docs if d["agent"]["id"] == query["agent_id"]]
    if query.get("agent_version"):
        docs = [d for d in docs if str(d["agent"]["version"]) == query["agent_version"]]
    for unserved in ("deployment_id", "memory_store_id"):
        if query.get(unserved):
            raise NotServed(f"{unserved}: not served by AgentVM (docs/managed-agents.md)")
    sessions = [await _session_wire(runtime, caller.tenant_id, d) for d in _created_between(request, docs)]
    statuses = _many(request, "statuses")
    if statuses:
        unknown = set(statuses) - set(mapping.STATUSES)
        if unknown:
            raise BadRequest(f"statuses: {', '.join(sorted(unknown))} (one of {', '.join(mapping.STATUSES)})")
        sessions = [s for s in sessions if s["status"] in statuses]
    return _page(request, sessions)


@router.get("/sessions/{session_id}")
async def retrieve_session(runtime: RuntimeDep, caller: Caller, session_id: str) -> dict[str, Any]:
    doc = await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    return await _session_wire(runtime, caller.tenant_id, doc)


@router.post("/sessions/{session_id}")
async def update_session(
    runtime: RuntimeDep, caller: Caller, session_id: str, body: JSONBody
) -> dict[str, Any]:
    _refuse_unserved(body, "agent", "vault_ids", "budget")
    doc = await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    updated = dict(doc)
    if "title" in body:
        updated["title"] = body["title"]
    if "metadata" in body:
        updated["metadata"] = _metadata(body["metadata"], doc["metadata"])
    if updated != doc:
        updated["updated_at"] = mapping.iso(runtime.clock.now_ms())
        await documents.put(runtime, caller.tenant_id, "sessions", updated, by=caller.key_id)
    return await _session_wire(runtime, caller.tenant_id, updated)


@router.post("/sessions/{session_id}/archive")
async def archive_session(runtime: RuntimeDep, caller: Caller, session_id: str) -> dict[str, Any]:
    doc = await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    if not doc.get("archived_at"):
        now = mapping.iso(runtime.clock.now_ms())
        doc = {**doc, "archived_at": now, "updated_at": now}
        await documents.put(runtime, caller.tenant_id, "sessions", doc, by=caller.key_id)
    return await _session_wire(runtime, caller.tenant_id, doc)


@router.delete("/sessions/{session_id}")
async def delete_session(runtime: RuntimeDep, caller: Caller, session_id: str) -> dict[str, Any]:
    """The session, its image and its history are deleted (its running turn is stopped first)."""
    from agentvm.images import delete
    from agentvm.turns.interrupt import interrupt_image

    await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    found = await _image_of(runtime, caller.tenant_id, session_id)
    if found is not None:
        await interrupt_image(runtime, caller.tenant_id, found[1])
        await delete(runtime, caller.tenant_id, found[1].imageId, notices=[])
    await documents.remove(runtime, caller.tenant_id, "sessions", session_id)
    return {"id": session_id, "type": "session_deleted"}


async def _session_wire(rt: Runtime, tenant_id: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The session as the API shows it: its document, its status, its metered usage and its age."""
    from agentvm.turns.interrupt import active_turn

    found = await _image_of(rt, tenant_id, doc["id"])
    status, usage = "terminated", mapping.session_usage([])
    created = mapping.ms_of(doc["created_at"])
    if found is not None:
        session, image = found
        turn = await active_turn(rt, tenant_id, image)
        status = "running" if turn is not None and turn.status in ("queued", "running") else "idle"
        records = await rt.store.list_usage(tenant_id, image.containerId, since_ms=session.createdAt)
        usage = mapping.session_usage([r for r in records if r.sessionId == session.sessionId])
    stats = {
        "duration_seconds": max(rt.clock.now_ms() - created, 0) / 1000,
        "active_seconds": usage["active_seconds"],
    }
    return {**doc, "status": status, "usage": usage, "stats": stats}


async def _image_of(rt: Runtime, tenant_id: str, session_id: str) -> tuple[SessionRecord, ImageRecord] | None:
    session = await rt.store.get_session(tenant_id, session_id)
    image = None if session is None else await rt.store.get_image(tenant_id, session.imageId)
    return None if session is None or image is None else (session, image)


async def _live_session(
    rt: Runtime, tenant_id: str, session_id: str
) -> tuple[dict[str, Any], SessionRecord, ImageRecord]:
    doc = await documents.get(rt, tenant_id, "sessions", session_id)
    found = await _image_of(rt, tenant_id, session_id)
    if found is None:
        raise NotFound(f"session {session_id} not found")
    return doc, found[0], found[1]


# -- events ------------------------------------------------------------------------------------
@router.post("/sessions/{session_id}/events")
async def send_events(runtime: RuntimeDep, caller: Caller, session_id: str, body: JSONBody) -> dict[str, Any]:
    """``user.message``, ``user.interrupt``, ``user.tool_confirmation``, ``user.custom_tool_result``."""
    events = body.get("events")
    if not isinstance(events, list) or not events:
        raise BadRequest("events: a list of at least one event")
    doc, _session, image = await _live_session(runtime, caller.tenant_id, session_id)
    if doc.get("archived_at"):
        raise BadRequest(f"session {session_id} is archived")
    return {"data": [await _send_one(runtime, caller, doc, image, event) for event in events]}


async def _send_one(
    rt: Runtime, caller: Principal, doc: dict[str, Any], image: ImageRecord, event: Any
) -> dict[str, Any]:
    from agentvm.turns.submit import Sender, send_message
    from agentvm.turns.waits import answer, find_wait

    if not isinstance(event, dict):
        raise BadRequest("events: each event is an object with a type")
    kind = event.get("type")
    now = mapping.iso(rt.clock.now_ms())
    if kind == "user.message":
        text = mapping.user_text(event.get("content"))
        sent = await send_message(
            rt,
            caller.tenant_id,
            image,
            text,
            request_id=f"managed:{secrets.token_hex(8)}",
            sender=Sender(connection_id=f"http_{secrets.token_hex(8)}"),
            notices=[],
        )
        return {"id": sent.message_id, "type": kind, "content": event["content"], "processed_at": now}
    if kind == "user.interrupt":
        from agentvm.turns.interrupt import interrupt_image

        await interrupt_image(rt, caller.tenant_id, image)
        return {"id": rt.ids.new("sevt"), "type": kind, "processed_at": now}
    if kind in ("user.tool_confirmation", "user.custom_tool_result"):
        field = "tool_use_id" if kind == "user.tool_confirmation" else "custom_tool_use_id"
        turn_id, call_id = mapping.split_tool_use_id(_string(event, field, required=True))
        wait = await find_wait(rt, caller.tenant_id, turn_id, call_id)
        if wait.sessionId != doc["id"]:
            raise NotFound(f"No tool call {call_id} is waiting in turn {turn_id}")
        if kind == "user.tool_confirmation":
            result = event.get("result")
            if result not in ("allow", "deny"):
                raise BadRequest("result: allow or deny")
            await answer(
                rt,
                caller.tenant_id,
                turn_id,
                call_id,
                kind="approval",
                status="approved" if result == "allow" else "denied",
                by=caller.key_id,
                reason=event.get("deny_message"),
            )
        else:
            await answer(
                rt,
                caller.tenant_id,
                turn_id,
                call_id,
                kind="client",
                status="answered",
                by=caller.key_id,
                output=mapping.result_text(event.get("content")),
                is_error=bool(event.get("is_error")),
            )
        return {**event, "id": rt.ids.new("sevt"), "processed_at": now}
    raise NotServed(
        f"events: {kind!r} is not served (user.message, user.interrupt, user.tool_confirmation and "
        "user.custom_tool_result are)"
    )


@router.get("/sessions/{session_id}/events")
async def list_events(
    request: Request, runtime: RuntimeDep, caller: Caller, session_id: str
) -> dict[str, Any]:
    """The session's events (of its ended or suspended turns, within the history window)."""
    _doc, session, image = await _live_session(runtime, caller.tenant_id, session_id)
    view = await _view(runtime, session, image)
    events = [
        e for frame in await stored_frames(runtime, session, after=0) for e in mapping.events_of(frame, view)
    ]
    types = _many(request, "types")
    if types:
        events = [e for e in events if e["type"] in types]
    events = _created_between(request, events, field="processed_at")
    return _page(request, events)


@router.get("/sessions/{session_id}/events/stream")
async def stream_events(
    request: Request,
    runtime: RuntimeDep,
    caller: Caller,
    session_id: str,
    last_event_id: Annotated[str | None, Header(max_length=20)] = None,
) -> StreamingResponse:
    """The session's events as server-sent events, from now (or after ``Last-Event-ID``) on, until
    the client closes the stream (at most an hour: resume with ``Last-Event-ID``)."""
    from agentvm.streaming.resume import subscribe_after

    _doc, session, image = await _live_session(runtime, caller.tenant_id, session_id)
    cursor = _cursor(last_event_id) if last_event_id is not None else await _now_cursor(runtime, image)
    view = await _view(runtime, session, image)
    view.deltas = frozenset(_many(request, "event_deltas"))
    if not isinstance(runtime.push, AttachablePush):  # AWS: what is stored, as one body
        frames = await stored_frames(runtime, session, after=cursor)
        return _sse(runtime, session, view, _listed(frames))
    feed = await Feed.open(runtime, caller)
    try:
        await subscribe_after(runtime, feed.connection_id, session, cursor)
    except BaseException:
        await feed.close(runtime)
        raise
    return _sse(runtime, session, view, feed.events(runtime, image, after=cursor, band=None, follow=True))


async def _listed(frames: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for frame in frames:
        yield frame


def _sse(
    rt: Runtime, session: SessionRecord, view: mapping.SessionView, frames: AsyncIterator[dict[str, Any]]
) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        async for frame in frames:
            if not frame:
                yield b": keep-alive\n\n"
                continue
            if frame.get("type") == "message_persisted":
                await _learn_user_text(rt, session, view, frame)
            seq = frame.get("seq")
            for event in mapping.events_of(frame, view):
                # a preview is never resumed to (a reconnect gets the final event instead)
                preview = event["type"] in ("event_start", "event_delta")
                head = f"id: {seq}\n" if isinstance(seq, int) and not preview else ""
                data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
                yield f"{head}event: {event['type']}\ndata: {data}\n\n".encode()

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(body(), media_type=EVENT_STREAM, headers=headers)


async def _view(rt: Runtime, session: SessionRecord, image: ImageRecord) -> mapping.SessionView:
    view = mapping.SessionView.of(image.tools, image.approval)
    for message in await rt.store.recent_messages(session.sessionId, rt.turns.history_window):
        if isinstance(message, UserMessage):
            view.user_texts[message.id] = _plain(message.content)
    return view


async def _learn_user_text(
    rt: Runtime, session: SessionRecord, view: mapping.SessionView, frame: dict[str, Any]
) -> None:
    message_id = (frame.get("data") or {}).get("messageId")
    if message_id and message_id not in view.user_texts:
        for message in await rt.store.recent_messages(session.sessionId, 8):
            if isinstance(message, UserMessage):
                view.user_texts[message.id] = _plain(message.content)


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


async def _now_cursor(rt: Runtime, image: ImageRecord) -> int:
    """Where a stream opened now starts: the live turn's first frame, else after every frame so far."""
    from agentvm.turns.interrupt import active_turn

    turn = await active_turn(rt, image.tenantId, image)
    if turn is not None:
        return turn.userSeq * TURN_SPAN
    last = await rt.store.recent_messages_after(image.sessionId, 0, 1)
    return (last[-1].seq + 1) * TURN_SPAN - 1 if last else 0


def _cursor(header: str) -> int:
    try:
        value = int(header.strip())
    except ValueError:
        raise BadRequest("Last-Event-ID: an event's id (a number)") from None
    if value < 0:
        raise BadRequest("Last-Event-ID: an event's id (a number)")
    return value


# -- what is not served ----------------------------------------------------------------------------
@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def not_served(rest: str, caller: Caller) -> None:
    """Every other path of the API (files, skills, vaults, memory stores, deployments, ...)."""
    raise NotServed(f"/v1/{rest} is not served by AgentVM (docs/managed-agents.md lists what is)")


# -- helpers -------------------------------------------------------------------------------------
def _refuse_unserved(body: dict[str, Any], *names: str) -> None:
    for name in names:
        if body.get(name):
            raise NotServed(f"{name}: not served by AgentVM (docs/managed-agents.md)")


def _string(body: dict[str, Any], name: str, *, required: bool = False) -> str:
    value = body.get(name)
    if isinstance(value, str) and value:
        return value
    if value is None and not required:
        return ""
    raise BadRequest(f"{name}: a non-empty string")


def _metadata(given: Any, current: dict[str, str]) -> dict[str, str]:
    """Metadata after a change: a key set to null is removed."""
    if given is None:
        return dict(current)
    if not isinstance(given, dict) or len(given) > 16:
        raise BadRequest("metadata: an object of at most 16 string values")
    out = dict(current)
    for key, value in given.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, str) and len(key) <= 64 and len(value) <= 512:
            out[key] = value
        else:
            raise BadRequest(f"metadata.{key}: a string of at most 512 characters")
    return out


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _many(request: Request, name: str) -> list[str]:
    values = request.query_params.getlist(f"{name}[]") + request.query_params.getlist(name)
    return [v for value in values for v in value.split(",") if v]


def _created_between(
    request: Request, items: list[dict[str, Any]], *, field: str = "created_at"
) -> list[dict[str, Any]]:
    out = items
    for op, keep in (
        ("gt", lambda a, b: a > b),
        ("gte", lambda a, b: a >= b),
        ("lt", lambda a, b: a < b),
        ("lte", lambda a, b: a <= b),
    ):
        bound = request.query_params.get(f"created_at[{op}]")
        if bound is not None:
            limit = mapping.ms_of(bound)
            out = [i for i in out if keep(mapping.ms_of(i[field]), limit)]
    return out


def _page(request: Request, items: list[dict[str, Any]]) -> dict[str, Any]:
    """One page: ``limit`` items from the opaque ``page`` cursor (an offset), ``order`` asc or desc."""
    query = request.query_params
    try:
        limit = int(query.get("limit", DEFAULT_LIMIT))
        start = int(query.get("page") or 0)
    except ValueError:
        raise BadRequest("limit and page: numbers (page: a previous answer's next_page)") from None
    if not 1 <= limit <= MAX_LIMIT or start < 0:
        raise BadRequest(f"limit: 1 to {MAX_LIMIT}")
    order = query.get("order", "asc")
    if order not in ("asc", "desc"):
        raise BadRequest("order: asc or desc")
    ordered = items if order == "asc" else list(reversed(items))
    page = ordered[start : start + limit]
    more = start + limit < len(ordered)
    return {"data": page, "next_page": str(start + limit) if more else None}


__all__ = ["router"]
