"""Sessions: an AgentVM image and its session in the environment's container, configured from the
agent version; create, list (with filters), retrieve (status and usage now), update, archive, delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Request  # noqa: TC002 (FastAPI reads the annotations)

from agentvm.api.deps import RuntimeDep  # noqa: TC001
from agentvm.api.managed import documents, mapping
from agentvm.api.managed.agents import SESSION_AGENT_FIELDS, agent_version
from agentvm.api.managed.common import (
    Caller,
    JSONBody,
    created_between,
    flag,
    managed_router,
    many,
    metadata,
    page,
    refuse_unserved,
    string_field,
)
from agentvm.api.managed.errors import NotServed
from agentvm.api.managed.inputs import check_event, send_event
from agentvm.errors import BadRequest, NotFound

if TYPE_CHECKING:
    from agentvm.records import ImageRecord, SessionRecord
    from agentvm.runtime import Runtime

router = managed_router()


# -- sessions ----------------------------------------------------------------------------------
@router.post("/sessions")
async def create_session(runtime: RuntimeDep, caller: Caller, body: JSONBody) -> dict[str, Any]:
    """A new session: an image of the environment's container, configured from the agent version."""
    from pydantic import ValidationError

    from agentvm.images import ImageConfig, create

    refuse_unserved(body, "resources", "vault_ids", "budget")
    initial = body.get("initial_events") or []
    for event in initial:  # refused before anything is made
        if not isinstance(event, dict) or event.get("type") != "user.message":
            raise NotServed("initial_events: user.message events only")
        check_event(event)
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
    agent = await agent_version(runtime, caller.tenant_id, agent_id, version)
    if agent.get("archived_at"):
        raise BadRequest(f"agent {agent_id} is archived")
    env_id = string_field(body, "environment_id", required=True)
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
        "metadata": metadata(body.get("metadata"), {}),
        "resources": [],
        "vault_ids": [],
        "outcome_evaluations": [],
        "created_at": now,
        "updated_at": now,
        "archived_at": None,
    }
    await documents.put(runtime, caller.tenant_id, "sessions", doc, by=caller.key_id)
    for event in initial:
        await send_event(runtime, caller, doc, image, event)
    return await session_wire(runtime, caller.tenant_id, doc)


@router.get("/sessions")
async def list_sessions(request: Request, runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    docs = await documents.list_all(runtime, caller.tenant_id, "sessions")
    query = request.query_params
    if not flag(request, "include_archived"):
        docs = [d for d in docs if not d.get("archived_at")]
    if query.get("agent_id"):
        docs = [d for d in docs if d["agent"]["id"] == query["agent_id"]]
    if query.get("agent_version"):
        docs = [d for d in docs if str(d["agent"]["version"]) == query["agent_version"]]
    for unserved in ("deployment_id", "memory_store_id"):
        if query.get(unserved):
            raise NotServed(f"{unserved}: not served by AgentVM (docs/managed-agents.md)")
    sessions = [await session_wire(runtime, caller.tenant_id, d) for d in created_between(request, docs)]
    statuses = many(request, "statuses")
    if statuses:
        unknown = set(statuses) - set(mapping.STATUSES)
        if unknown:
            raise BadRequest(f"statuses: {', '.join(sorted(unknown))} (one of {', '.join(mapping.STATUSES)})")
        sessions = [s for s in sessions if s["status"] in statuses]
    return page(request, sessions)


@router.get("/sessions/{session_id}")
async def retrieve_session(runtime: RuntimeDep, caller: Caller, session_id: str) -> dict[str, Any]:
    doc = await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    return await session_wire(runtime, caller.tenant_id, doc)


@router.post("/sessions/{session_id}")
async def update_session(
    runtime: RuntimeDep, caller: Caller, session_id: str, body: JSONBody
) -> dict[str, Any]:
    refuse_unserved(body, "agent", "vault_ids", "budget")
    doc = await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    updated = dict(doc)
    if "title" in body:
        updated["title"] = body["title"]
    if "metadata" in body:
        updated["metadata"] = metadata(body["metadata"], doc["metadata"])
    if updated != doc:
        updated["updated_at"] = mapping.iso(runtime.clock.now_ms())
        await documents.put(runtime, caller.tenant_id, "sessions", updated, by=caller.key_id)
    return await session_wire(runtime, caller.tenant_id, updated)


@router.post("/sessions/{session_id}/archive")
async def archive_session(runtime: RuntimeDep, caller: Caller, session_id: str) -> dict[str, Any]:
    doc = await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    if not doc.get("archived_at"):
        now = mapping.iso(runtime.clock.now_ms())
        doc = {**doc, "archived_at": now, "updated_at": now}
        await documents.put(runtime, caller.tenant_id, "sessions", doc, by=caller.key_id)
    return await session_wire(runtime, caller.tenant_id, doc)


@router.delete("/sessions/{session_id}")
async def delete_session(runtime: RuntimeDep, caller: Caller, session_id: str) -> dict[str, Any]:
    """The session, its image and its history are deleted (its running turn is stopped first)."""
    from agentvm.images import delete
    from agentvm.turns.interrupt import interrupt_image

    await documents.get(runtime, caller.tenant_id, "sessions", session_id)
    found = await image_of(runtime, caller.tenant_id, session_id)
    if found is not None:
        await interrupt_image(runtime, caller.tenant_id, found[1])
        await delete(runtime, caller.tenant_id, found[1].imageId, notices=[])
    await documents.remove(runtime, caller.tenant_id, "sessions", session_id)
    return {"id": session_id, "type": "session_deleted"}


async def session_wire(rt: Runtime, tenant_id: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The session as the API shows it: its document, its status, its metered usage and its age."""
    from agentvm.turns.interrupt import active_turn

    found = await image_of(rt, tenant_id, doc["id"])
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


async def image_of(rt: Runtime, tenant_id: str, session_id: str) -> tuple[SessionRecord, ImageRecord] | None:
    session = await rt.store.get_session(tenant_id, session_id)
    image = None if session is None else await rt.store.get_image(tenant_id, session.imageId)
    return None if session is None or image is None else (session, image)


async def live_session(
    rt: Runtime, tenant_id: str, session_id: str
) -> tuple[dict[str, Any], SessionRecord, ImageRecord]:
    doc = await documents.get(rt, tenant_id, "sessions", session_id)
    found = await image_of(rt, tenant_id, session_id)
    if found is None:
        raise NotFound(f"session {session_id} not found")
    return doc, found[0], found[1]


__all__ = ["image_of", "live_session", "router", "session_wire"]
