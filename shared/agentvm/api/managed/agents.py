"""Agents: versioned configs (documents of the resource centre), create, list, retrieve (a version),
update (the next version), archive, and their versions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Request  # noqa: TC002 (FastAPI reads the annotations)

from agentvm.api.deps import RuntimeDep  # noqa: TC001
from agentvm.api.managed import documents, mapping
from agentvm.api.managed.common import (
    Caller,
    JSONBody,
    created_between,
    flag,
    managed_router,
    metadata,
    page,
    refuse_unserved,
    string_field,
)
from agentvm.errors import BadRequest, Conflict, NotFound

if TYPE_CHECKING:
    from agentvm.runtime import Runtime

router = managed_router()


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
    refuse_unserved(body, "skills", "multiagent", "execution_identity")
    now = mapping.iso(runtime.clock.now_ms())
    agent = {
        "id": runtime.ids.new("agent"),
        "type": "agent",
        "name": string_field(body, "name", required=True),
        "description": body.get("description"),
        "system": body.get("system"),
        "model": {"id": mapping.model_id(body.get("model"))},
        "tools": list(body.get("tools") or []),
        "mcp_servers": list(body.get("mcp_servers") or []),
        "skills": [],
        "metadata": metadata(body.get("metadata"), {}),
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
    if not flag(request, "include_archived"):
        agents = [a for a in agents if not a.get("archived_at")]
    return page(request, created_between(request, agents))


@router.get("/agents/{agent_id}")
async def retrieve_agent(
    runtime: RuntimeDep, caller: Caller, agent_id: str, version: int | None = None
) -> dict[str, Any]:
    return await agent_version(runtime, caller.tenant_id, agent_id, version)


@router.post("/agents/{agent_id}")
async def update_agent(runtime: RuntimeDep, caller: Caller, agent_id: str, body: JSONBody) -> dict[str, Any]:
    """A new version of the agent (``version``: the one this update was made from)."""
    refuse_unserved(body, "skills", "multiagent", "execution_identity")
    current = await agent_version(runtime, caller.tenant_id, agent_id, None)
    if current.get("archived_at"):
        raise BadRequest(f"agent {agent_id} is archived")
    if body.get("version") is not None and body["version"] != current["version"]:
        raise Conflict(f"agent {agent_id} is at version {current['version']}, not {body['version']}")
    updated = dict(current)
    for name in AGENT_FIELDS:
        if name not in body:
            continue
        if name == "metadata":
            updated["metadata"] = metadata(body["metadata"], current["metadata"])
        elif name == "model":
            updated["model"] = {"id": mapping.model_id(body["model"])}
        elif name == "name":
            updated["name"] = string_field(body, "name", required=True)
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
    agent = await agent_version(runtime, caller.tenant_id, agent_id, None)
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
    return page(request, [latest[v] for v in sorted(latest, reverse=True)])


async def agent_version(rt: Runtime, tenant_id: str, agent_id: str, version: int | None) -> dict[str, Any]:
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


__all__ = ["AGENT_FIELDS", "SESSION_AGENT_FIELDS", "agent_version", "router"]
