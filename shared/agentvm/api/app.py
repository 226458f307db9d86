"""``create_app(runtime)``: the FastAPI application both hosts serve, built from the routers.

Local: ``avm serve`` adds the ``/ws`` WebSocket route and the queue consumer around it.
Lambda: ``functions/http_api`` wraps the same object in Mangum.

``/mcp`` is AgentVM as an MCP server (Streamable HTTP, the same bearer key; ``api/mcp.py``).

Every ``/v1/...`` route needs ``Authorization: Bearer <API key>`` (``/health``, ``/docs`` and
``/openapi.json`` stay open; an unknown path is a 404 with or without a key) and counts against
the key's rate limit (``api/deps.py``). Errors always have one shape:
``{"error": {"code": "...", "message": "...", ...}}``, the status chosen by the error's type
(``api/errors.py``). Each domain's routes are in its own router module, at module level; they reach
the runtime and the caller through ``Depends`` (``api/deps.py``), which read what this factory keeps
on ``app.state``. Keys, budgets and usage are admin routes, and act on the caller's own tenant only.

``/openapi.json`` tells what the server really answers: each route's error statuses with the
error shape (``ErrorBody``), the bearer scheme on ``/v1``, and no 422 (validation errors are 400).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, FastAPI, Security
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.staticfiles import StaticFiles

from agentvm import __version__
from agentvm.api import (
    a2a,
    budgets,
    configcentre,
    docs_pages,
    elicitations,
    errors,
    health,
    http_turns,
    images,
    keys,
    knowledge,
    logs,
    managed,
    mcp,
    mcp_oauth,
    memory,
    metrics,
    registry,
    resources,
    schedules,
    sessions,
    tenants,
    turns,
    usage,
    webhooks,
    workspaces,
)
from agentvm.api.body_limit import BodyLimit, BodyTooLarge
from agentvm.api.deps import authenticate, bearer_scheme
from agentvm.api.openapi import openapi_document
from agentvm.errors import AgentVMError

if TYPE_CHECKING:
    from agentvm.runtime import Runtime

# Every /v1 route may answer these; each route adds what else it may (400, 404).
v1 = APIRouter(
    prefix="/v1",
    dependencies=[Security(bearer_scheme), Depends(authenticate)],
    responses=errors.error_responses(401, 403, 413, 429),
)
# One router per domain, in the order of /openapi.json (and of matching).
_DOMAINS = (
    keys,
    budgets,
    workspaces,
    memory,
    resources,
    knowledge,
    registry,
    images,
    configcentre,
    tenants,
    metrics,
    logs,
    usage,
    turns,
    sessions,
    http_turns,
    schedules,
    webhooks,
    elicitations,
    mcp_oauth,
)
for _domain in _DOMAINS:
    v1.include_router(_domain.router)
v1.include_router(http_turns.containers)  # POST /v1/containers/{id}/sessions: a session for HTTP turns


def create_app(runtime: Runtime, *, open_tenant: str | None = None, **fastapi_kwargs: object) -> FastAPI:
    """``open_tenant``: without an authenticator, every caller is this tenant (loopback dev mode only)."""
    assets = docs_pages.offline_assets()  # /docs without internet (api/docs_pages.py)
    app = FastAPI(
        title="AgentVM",
        version=__version__,
        description="AI agent runtime. WebSocket: AgentX v1 protocol at /ws (see docs/protocol.md).",
        docs_url=None if assets is not None else "/docs",
        redoc_url=None if assets is not None else "/redoc",
        **fastapi_kwargs,  # type: ignore[arg-type]
    )
    app.state.runtime = runtime
    app.state.open_tenant = open_tenant
    # Bodies over the limit are refused before they are read, authenticated or not.
    app.add_middleware(
        BodyLimit, max_bytes=runtime.turns.max_body_bytes, wider=knowledge.upload_limits(runtime)
    )
    app.add_middleware(metrics.RequestMetrics, runtime=runtime)  # outermost: counts refusals (413) too
    app.add_exception_handler(AgentVMError, errors.agentvm_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, errors.invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, errors.http_error)  # type: ignore[arg-type]
    app.add_exception_handler(BodyTooLarge, errors.body_too_large)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, errors.internal_error)
    app.include_router(health.router)
    if assets is not None:
        app.mount(docs_pages.ASSETS_URL, StaticFiles(directory=assets), name="docs-assets")
        app.include_router(docs_pages.router)
    app.include_router(mcp_oauth.callback)  # GET /v1/mcp/oauth/callback: no key (the state is the capability)
    app.include_router(v1)
    # Anthropic's Managed Agents API (api/managed/): the official SDK with base_url=<server>/anthropic
    app.include_router(managed.router)
    # AgentVM as an MCP server (api/mcp.py): the MCP SDK's ASGI transport, authenticated as /v1 is.
    app.router.routes.append(Route(mcp.MCP_PATH, mcp.McpEndpoint(), include_in_schema=False))
    # Each image as an A2A agent (api/a2a.py): the a2a-sdk's JSON-RPC handler, authenticated as /v1 is.
    a2a_endpoint = a2a.A2aEndpoint()
    app.router.routes.append(Route(a2a.A2A_PREFIX + "/{rest:path}", a2a_endpoint, include_in_schema=False))
    app.openapi = partial(openapi_document, app)  # type: ignore[method-assign]
    return app


__all__ = ["create_app", "v1"]
