"""What every Managed Agents route shares: the caller (a bearer key or ``x-api-key``), a JSON body,
a router whose errors are the API's, and the list and body conventions (paging, filters, metadata).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request

from agentvm.api.deps import RuntimeDep, admit
from agentvm.api.managed import mapping
from agentvm.api.managed.errors import AnthropicRoute, NotServed
from agentvm.errors import BadRequest
from agentvm.security.auth import Principal  # noqa: TC001 (FastAPI reads the annotations)

MAX_LIMIT = 1000
DEFAULT_LIMIT = 20
JSONBody = Annotated[dict[str, Any], Body()]


async def managed_caller(request: Request, runtime: RuntimeDep) -> Principal:
    """The key's principal: ``Authorization: Bearer`` (what the official SDKs send) or ``x-api-key``."""
    headers = dict(request.headers)
    key = request.headers.get("x-api-key")
    if key and "authorization" not in headers:
        headers["authorization"] = f"Bearer {key}"
    return await admit(request, runtime, headers)


Caller = Annotated[Principal, Depends(managed_caller)]


def managed_router() -> APIRouter:
    """A router whose errors are answered in the API's shape (``errors.AnthropicRoute``)."""
    return APIRouter(route_class=AnthropicRoute)


# -- helpers -------------------------------------------------------------------------------------
def refuse_unserved(body: dict[str, Any], *names: str) -> None:
    for name in names:
        if body.get(name):
            raise NotServed(f"{name}: not served by AgentVM (docs/managed-agents.md)")


def string_field(body: dict[str, Any], name: str, *, required: bool = False) -> str:
    value = body.get(name)
    if isinstance(value, str) and value:
        return value
    if value is None and not required:
        return ""
    raise BadRequest(f"{name}: a non-empty string")


def metadata(given: Any, current: dict[str, str]) -> dict[str, str]:
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


def flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def many(request: Request, name: str) -> list[str]:
    values = request.query_params.getlist(f"{name}[]") + request.query_params.getlist(name)
    return [v for value in values for v in value.split(",") if v]


def created_between(
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


def page(request: Request, items: list[dict[str, Any]]) -> dict[str, Any]:
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


__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Caller",
    "JSONBody",
    "created_between",
    "flag",
    "managed_caller",
    "managed_router",
    "many",
    "metadata",
    "page",
    "refuse_unserved",
    "string_field",
]
