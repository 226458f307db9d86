"""Where the Managed Agents API's own objects live: versioned JSON files of the tenant's resource
centre (``agentvm.resources``), named ``managed/agents/<id>``, ``managed/environments/<id>`` and
``managed/sessions/<sessionId>``. Each change publishes a new version of the file, so an agent's
versions (and the history of every object) are the centre's; tenancy is the centre's (another
tenant's object reads exactly like a missing one). No FastAPI in here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.errors import NotFound

if TYPE_CHECKING:
    from agentvm.ports import ResourceRegistry
    from agentvm.records import ResourceVersion
    from agentvm.runtime import Runtime

KIND = "file"
PREFIX = "managed"
LABELS = {"agents": "agent", "environments": "environment", "sessions": "session"}


def centre(rt: Runtime) -> ResourceRegistry:
    if rt.resources is None:
        raise NotFound("this server has no resource centre: the Managed Agents API needs one")
    return rt.resources


def _name(collection: str, object_id: str) -> str:
    return f"{PREFIX}/{collection}/{object_id}"


async def put(rt: Runtime, tenant_id: str, collection: str, doc: dict[str, Any], *, by: str | None) -> None:
    """Store ``doc`` as the object's newest version."""
    await centre(rt).publish(
        tenant_id, KIND, _name(collection, doc["id"]), spec={"type": "json", "content": doc}, by=by
    )


async def get(rt: Runtime, tenant_id: str, collection: str, object_id: str) -> dict[str, Any]:
    """The object as last stored; another tenant's, or an unknown id, is ``NotFound``."""
    history = await versions(rt, tenant_id, collection, object_id)
    return history[-1]


async def versions(rt: Runtime, tenant_id: str, collection: str, object_id: str) -> list[dict[str, Any]]:
    """Every stored state of the object, oldest first."""
    if "/" in object_id or not object_id or len(object_id) > 128:
        raise NotFound(f"{LABELS[collection]} {object_id} not found")
    try:
        _head, stored = await centre(rt).get_head(tenant_id, KIND, _name(collection, object_id))
    except NotFound:
        raise NotFound(f"{LABELS[collection]} {object_id} not found") from None
    own = [v for v in stored if v.tenantId == tenant_id]
    if not own:
        raise NotFound(f"{LABELS[collection]} {object_id} not found")
    return [_content(v) for v in sorted(own, key=lambda v: v.seq)]


async def list_all(rt: Runtime, tenant_id: str, collection: str) -> list[dict[str, Any]]:
    """The tenant's objects of the collection, each as last stored, oldest first."""
    prefix = f"{PREFIX}/{collection}/"
    out = []
    for head, platform in await centre(rt).heads(tenant_id, KIND):
        if platform or not head.name.startswith(prefix):
            continue
        out.append(await get(rt, tenant_id, collection, head.name[len(prefix) :]))
    return sorted(out, key=lambda d: (d.get("created_at", ""), d["id"]))


async def remove(rt: Runtime, tenant_id: str, collection: str, object_id: str) -> None:
    await centre(rt).delete(tenant_id, KIND, _name(collection, object_id))


def _content(version: ResourceVersion) -> dict[str, Any]:
    content = version.spec.get("content")
    return dict(content) if isinstance(content, dict) else {}


__all__ = ["get", "list_all", "put", "remove", "versions"]
