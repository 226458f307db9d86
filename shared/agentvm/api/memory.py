"""Agent memory over HTTP (docs/memory.md): list, recall, read, write, edit, export and delete what
agents keep across sessions, per scope.

* ``/v1/memory/containers/{owner}``: one end user's memory (the container's). Any key of the
  tenant: an admin key, or the client key the end user's app holds (as for ``/v1/sessions/.../turns``).
  The container must exist in the caller's tenant: another tenant's reads exactly like a missing one.
* ``/v1/memory/images/{owner}``: what images of that name keep for all the tenant's end users.
  Admin keys only.

A write here is the item's ``source``: ``api`` with an admin key, ``user`` with a client key. What
the routes do is ``agentvm.agent.memory.Memory`` (limits, the tenant's storage account).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.agent.memory import Memory, memory_of
from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID
from agentvm.errors import NotFound
from agentvm.ports import MAX_RECALL_LIMIT, MAX_TEXT_CHARS, MAX_TOPIC_CHARS, container_scope, image_scope
from agentvm.runtime import Runtime  # noqa: TC001 (FastAPI reads annotations)
from agentvm.security.auth import Principal  # noqa: TC001

router = APIRouter(tags=["memory"])

Kind = Literal["containers", "images"]
KIND = Path(description="containers: an end user's memory; images: an image name's, for all its users")
OWNER = Path(min_length=1, max_length=200, description="the container id, or the image name")
MEMORY_ID = Path(min_length=1, max_length=MAX_ID)

_ITEM = {
    "id": "mem_4f1c2e9a0b7d5c3e1a2b3c4d",
    "scope": "container:user-alice",
    "topic": "coffee",
    "text": "Alice takes her coffee black",
    "source": "tool",
    "createdAt": 1767225600000,
    "updatedAt": 1767225600000,
}
_USAGE = {"items": 1, "bytes": 34, "maxItems": 500, "maxBytes": 262144}
_LIST = {"scope": "container:user-alice", "items": [_ITEM], "usage": _USAGE}
_EXPORT = {"scope": "container:user-alice", "exportedAt": 1767225600000, "items": [_ITEM]}
_CLEARED = {"scope": "container:user-alice", "deleted": 1}


class MemoryEntry(BaseModel):
    """One remembered item."""

    model_config = ConfigDict(json_schema_extra=examples(_ITEM))

    id: str
    scope: str = Field(description="container:<containerId> or image:<name>")
    topic: str | None
    text: str
    source: Literal["tool", "api", "user"] = Field(description="who wrote it")
    createdAt: int
    updatedAt: int


class MemoryUsage(BaseModel):
    items: int
    bytes: int
    maxItems: int
    maxBytes: int


class MemoryList(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_LIST))

    scope: str
    items: list[MemoryEntry] = Field(description="oldest first; with ?q=, the best matches first")
    usage: MemoryUsage


class MemoryExport(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_EXPORT))

    scope: str
    exportedAt: int
    items: list[MemoryEntry]


class MemoryCleared(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_CLEARED))

    scope: str
    deleted: int


class MemoryWrite(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra=examples({"text": "Prefers email", "topic": "contact"})
    )

    text: StrictStr = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    topic: StrictStr | None = Field(default=None, max_length=MAX_TOPIC_CHARS)


class MemoryEdit(BaseModel):
    """The fields to change: ``topic`` null removes it; a field left out is kept."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=examples({"text": "Prefers phone calls"}))

    text: StrictStr | None = Field(default=None, min_length=1, max_length=MAX_TEXT_CHARS)
    topic: StrictStr | None = Field(default=None, max_length=MAX_TOPIC_CHARS)


async def _scope_of(runtime: Runtime, caller: Principal, kind: Kind, owner: str) -> tuple[Memory, str]:
    """The memory and scope the caller names, if it may: its own tenant's container (any key), or
    an image name (admin keys)."""
    if kind == "images":
        admin(caller)
    memory = memory_of(runtime)
    if memory is None:
        raise NotFound("this server keeps no agent memory")
    if kind == "images":
        return memory, image_scope(owner)
    if await runtime.store.get_container(caller.tenant_id, owner) is None:
        raise NotFound(f"Container not found: {owner}")
    return memory, container_scope(owner)


def _source(caller: Principal) -> str:
    return "api" if caller.allows("admin") else "user"


_PATH = "/memory/{kind}/{owner}"


@router.get(
    _PATH,
    response_model=None,
    responses={**ok(200, MemoryList, _LIST, "the scope's items and usage"), **error_responses(400, 404)},
)
async def list_memory(
    runtime: RuntimeDep,
    caller: Caller,
    kind: Kind = KIND,
    owner: str = OWNER,
    q: str | None = Query(
        default=None, max_length=1000, description="recall: items holding any of its words"
    ),
    limit: int | None = Query(
        default=None, ge=1, le=MAX_RECALL_LIMIT, description="with q: at most this many"
    ),
) -> dict[str, Any]:
    """The scope's items (oldest first), or with ``q`` the best matches for its words."""
    memory, scope = await _scope_of(runtime, caller, kind, owner)
    if q is None:
        items = await memory.items(caller.tenant_id, scope)
    else:
        items = await memory.recall(caller.tenant_id, scope, q, limit=limit)
    return {
        "scope": scope,
        "items": [i.to_wire() for i in items],
        "usage": await memory.usage(caller.tenant_id, scope),
    }


@router.post(
    _PATH,
    status_code=201,
    response_model=None,
    responses={**ok(201, MemoryEntry, _ITEM, "the item stored"), **error_responses(400, 404, 409, 507)},
)
async def write_memory(
    runtime: RuntimeDep, caller: Caller, body: MemoryWrite, kind: Kind = KIND, owner: str = OWNER
) -> dict[str, Any]:
    """Remember something in the scope (``409 memory_full`` at the scope's limits, ``507`` when the
    tenant's storage is used up)."""
    memory, scope = await _scope_of(runtime, caller, kind, owner)
    item, _ = await memory.remember(
        caller.tenant_id, scope, body.text, topic=body.topic, source=_source(caller)
    )
    return item.to_wire()


@router.delete(
    _PATH,
    response_model=None,
    responses={
        **ok(200, MemoryCleared, _CLEARED, "how many items were deleted"),
        **error_responses(400, 404),
    },
)
async def clear_memory(
    runtime: RuntimeDep, caller: Caller, kind: Kind = KIND, owner: str = OWNER
) -> dict[str, Any]:
    """Forget everything the scope holds."""
    memory, scope = await _scope_of(runtime, caller, kind, owner)
    return {"scope": scope, "deleted": await memory.clear(caller.tenant_id, scope)}


@router.get(
    f"{_PATH}/export",
    response_model=None,
    responses={
        **ok(200, MemoryExport, _EXPORT, "every item of the scope, as JSON"),
        **error_responses(400, 404),
    },
)
async def export_memory(
    runtime: RuntimeDep, caller: Caller, kind: Kind = KIND, owner: str = OWNER
) -> dict[str, Any]:
    """Everything the scope holds, in one JSON document."""
    memory, scope = await _scope_of(runtime, caller, kind, owner)
    return await memory.export(caller.tenant_id, scope)


@router.get(
    f"{_PATH}/{{memory_id}}",
    response_model=None,
    responses={**ok(200, MemoryEntry, _ITEM, "the item"), **error_responses(400, 404)},
)
async def read_memory(
    runtime: RuntimeDep, caller: Caller, kind: Kind = KIND, owner: str = OWNER, memory_id: str = MEMORY_ID
) -> dict[str, Any]:
    """One item of the scope."""
    memory, scope = await _scope_of(runtime, caller, kind, owner)
    return (await memory.get(caller.tenant_id, scope, memory_id)).to_wire()


@router.patch(
    f"{_PATH}/{{memory_id}}",
    response_model=None,
    responses={**ok(200, MemoryEntry, _ITEM, "the item as edited"), **error_responses(400, 404, 409, 507)},
)
async def edit_memory(
    runtime: RuntimeDep,
    caller: Caller,
    body: MemoryEdit,
    kind: Kind = KIND,
    owner: str = OWNER,
    memory_id: str = MEMORY_ID,
) -> dict[str, Any]:
    """Change an item's text or topic."""
    memory, scope = await _scope_of(runtime, caller, kind, owner)
    topic: Any = body.topic if "topic" in body.model_fields_set else ...
    item = await memory.edit(caller.tenant_id, scope, memory_id, text=body.text, topic=topic)
    return item.to_wire()


@router.delete(
    f"{_PATH}/{{memory_id}}",
    response_model=None,
    responses={**ok(200, MemoryEntry, _ITEM, "the item deleted"), **error_responses(400, 404)},
)
async def delete_memory(
    runtime: RuntimeDep, caller: Caller, kind: Kind = KIND, owner: str = OWNER, memory_id: str = MEMORY_ID
) -> dict[str, Any]:
    """Forget one item."""
    memory, scope = await _scope_of(runtime, caller, kind, owner)
    return (await memory.forget(caller.tenant_id, scope, memory_id)).to_wire()


__all__ = ["router"]
