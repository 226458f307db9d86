"""Environments: where sessions run (the AgentVM container named after the environment's id)."""

from __future__ import annotations

from typing import Any

from fastapi import Request  # noqa: TC002 (FastAPI reads the annotations)

from agentvm.api.deps import RuntimeDep  # noqa: TC001
from agentvm.api.managed import documents, mapping
from agentvm.api.managed.common import Caller, JSONBody, flag, managed_router, metadata, page, string_field
from agentvm.api.managed.errors import NotServed

router = managed_router()


# -- environments ------------------------------------------------------------------------------
@router.post("/environments")
async def create_environment(runtime: RuntimeDep, caller: Caller, body: JSONBody) -> dict[str, Any]:
    """A new environment: the AgentVM container its sessions run in (named after its id)."""
    config = _environment_config(body.get("config"))
    now = mapping.iso(runtime.clock.now_ms())
    env = {
        "id": runtime.ids.new("env"),
        "type": "environment",
        "name": string_field(body, "name", required=True),
        "description": body.get("description"),
        "config": config,
        "metadata": metadata(body.get("metadata"), {}),
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
    if not flag(request, "include_archived"):
        envs = [e for e in envs if not e.get("archived_at")]
    return page(request, envs)


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
        updated["metadata"] = metadata(body["metadata"], env["metadata"])
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


__all__ = ["router"]
