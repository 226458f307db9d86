"""Workspaces over HTTP: ``/v1/containers/{containerId}/workspace`` lists a directory of a
container's sandbox workspace, ``.../workspace/file`` reads a file (as text, at most 1 MiB).

Admin keys only, the caller's tenant only: another tenant's container reads as one that does not
exist (404), and so does every container of a server that runs no sandbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query

from agentvm.api import examples as doc
from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import ok
from agentvm.api.params import CONTAINER_ID
from agentvm.errors import BadRequest, NotFound

if TYPE_CHECKING:
    from agentvm.ports import Sandbox
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

MAX_WORKSPACE_PATH = 4096  # Linux's PATH_MAX: a longer path names no file of a workspace

router = APIRouter(tags=["workspaces"])


async def workspace_of(runtime: Runtime, principal: Principal, container_id: str) -> Sandbox:
    if await runtime.store.get_container(principal.tenant_id, container_id) is None:
        raise NotFound(f"Container not found: {container_id}")
    if runtime.sandbox is None:
        raise NotFound("this server runs no sandbox, so containers have no workspace")
    return runtime.sandbox


@router.get(
    "/containers/{container_id}/workspace",
    response_model=None,
    responses={
        **ok(200, "WorkspaceListing", doc.WORKSPACE, "the directory's entries"),
        **error_responses(400, 404),
    },
)
async def list_workspace(
    runtime: RuntimeDep,
    caller: Caller,
    container_id: str = CONTAINER_ID,
    path: str = Query(default=".", min_length=1, max_length=MAX_WORKSPACE_PATH),
) -> dict[str, Any]:
    """The entries of a directory of the container's sandbox workspace (its root by default)."""
    principal = admin(caller)
    sandbox = await workspace_of(runtime, principal, container_id)
    try:
        entries = await sandbox.list(principal.tenant_id, container_id, path)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return {"path": path, "entries": [{"path": e.path, "kind": e.kind, "size": e.size} for e in entries]}


@router.get(
    "/containers/{container_id}/workspace/file",
    response_model=None,
    responses={
        **ok(200, "WorkspaceFile", doc.WORKSPACE_FILE, "the file's text"),
        **error_responses(400, 404),
    },
)
async def read_workspace_file(
    runtime: RuntimeDep,
    caller: Caller,
    container_id: str = CONTAINER_ID,
    path: str = Query(min_length=1, max_length=MAX_WORKSPACE_PATH),
) -> dict[str, Any]:
    """A file of the container's workspace as text (UTF-8; at most 1 MiB, ``truncated`` says so)."""
    principal = admin(caller)
    sandbox = await workspace_of(runtime, principal, container_id)
    limit = 1 << 20
    try:
        data = await sandbox.read(principal.tenant_id, container_id, path, max_bytes=limit + 1)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return {
        "path": path,
        "content": data[:limit].decode("utf-8", "replace"),
        "truncated": len(data) > limit,
    }


__all__ = ["router"]
