"""A tenant's OAuth authorization of remote MCP servers (docs/mcp.md, "OAuth"):

- ``POST /v1/mcp/oauth/authorizations`` ``{"server_url": ...}`` (admin key): discovery, client
  registration and PKCE; answers the ``authorization_url`` an admin opens in a browser;
- ``GET /v1/mcp/oauth/callback?code=&state=`` (no key: the browser comes back from the
  authorization server; the state is a single-use capability): stores the tokens, answers a page;
- ``GET`` / ``DELETE /v1/mcp/oauth/connections?server_url=`` (any key / admin key): whether the
  caller's tenant holds tokens for the server; forget them.

The caller's tenant only: another tenant's connection reads like none. The flow is
``adapters.mcp.oauth_flow``; the redirect URI is ``AVM_PUBLIC_URL`` + the callback path (else the
request's own base URL). A host that keeps no OAuth records, or seals no secrets, answers ``400``.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin  # noqa: TC001 (FastAPI reads annotations)
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.errors import BadRequest

if TYPE_CHECKING:
    from agentvm.ports import McpOAuthAccess
    from agentvm.runtime import Runtime

router = APIRouter(prefix="/mcp/oauth", tags=["mcp"])
callback = APIRouter(prefix="/v1/mcp/oauth", tags=["mcp"])  # outside /v1's authentication

SERVER_URL = Query(min_length=1, max_length=2000, description="the remote MCP server's URL, as in mcpServers")
_STARTED = {
    "authorization_url": "https://auth.example.com/authorize?response_type=code&client_id=...&state=...",
    "expires_at": 1767200600.0,
}


class AuthorizationRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra=examples({"server_url": "https://mcp.example.com/mcp"})
    )

    server_url: StrictStr = Field(min_length=1, max_length=2000, pattern=r"^https?://[^\s/]+")


class AuthorizationStarted(BaseModel):
    authorization_url: str = Field(description="open it in a browser; it works once, until expires_at")
    expires_at: float = Field(description="epoch seconds")


class ConnectionStatus(BaseModel):
    connected: bool
    expires_at: float | None = Field(description="when the access token expires (refreshed then), if said")


def _access(runtime: Runtime) -> McpOAuthAccess:
    access = runtime.mcp_oauth_access()
    if access is None:
        raise BadRequest("this server keeps no OAuth records of MCP servers (no records store or no sealer)")
    return access


def _allow_private(runtime: Runtime) -> bool:
    return runtime.config is not None and runtime.config.settings.tool_allow_private_networks


@router.post(
    "/authorizations",
    response_model=None,
    responses={
        **ok(200, AuthorizationStarted, _STARTED, "open authorization_url in a browser"),
        **error_responses(400),
    },
)
async def authorize(
    runtime: RuntimeDep, caller: Caller, body: AuthorizationRequest, request: Request
) -> dict[str, Any]:
    """Start the tenant's authorization of an MCP server that requires OAuth."""
    from agentvm.adapters.mcp.oauth_flow import AuthorizationFailed, callback_url, start_authorization

    tenant_id = admin(caller).tenant_id
    access = _access(runtime)
    assert runtime.config is not None
    redirect_uri = callback_url(runtime.config.settings.public_url, str(request.base_url))
    try:
        started = await start_authorization(
            access, tenant_id, body.server_url, redirect_uri, allow_private=_allow_private(runtime)
        )
    except AuthorizationFailed as exc:
        raise BadRequest(f"server_url: {exc}") from None
    return {"authorization_url": started.authorization_url, "expires_at": started.expires_at}


@router.get(
    "/connections",
    response_model=None,
    responses={
        **ok(200, ConnectionStatus, {"connected": True, "expires_at": 1767203600.0}, "the tenant's tokens"),
        **error_responses(400),
    },
)
async def connection_status(
    runtime: RuntimeDep, caller: Caller, server_url: str = SERVER_URL
) -> dict[str, Any]:
    """Whether the caller's tenant has authorized the server."""
    from agentvm.adapters.mcp.oauth_flow import connection

    found = await connection(_access(runtime), caller.tenant_id, server_url)
    return {"connected": found.connected, "expires_at": found.expires_at}


@router.delete(
    "/connections",
    response_model=None,
    responses={
        **ok(200, ConnectionStatus, {"connected": False, "expires_at": None}, "forgotten"),
        **error_responses(400),
    },
)
async def forget_connection(
    runtime: RuntimeDep, caller: Caller, server_url: str = SERVER_URL
) -> dict[str, Any]:
    """Forget the tenant's tokens for the server (a turn reports it needs authorization again)."""
    from agentvm.adapters.mcp.oauth_flow import forget

    await forget(_access(runtime), admin(caller).tenant_id, server_url)
    return {"connected": False, "expires_at": None}


@callback.get("/callback", response_class=HTMLResponse, include_in_schema=False)  # a page, not an API
async def finish(
    runtime: RuntimeDep,
    state: str = Query(default="", max_length=256),
    code: str | None = Query(default=None, max_length=4096),
    error: str | None = Query(default=None, max_length=256),
    iss: str | None = Query(default=None, max_length=2000),
) -> HTMLResponse:
    """Where the authorization server sends the browser back (no API key: the state is the
    capability, usable once)."""
    from agentvm.adapters.mcp.oauth_flow import AuthorizationFailed, finish_authorization

    try:
        await finish_authorization(
            _access(runtime), state, code, error=error, iss=iss, allow_private=_allow_private(runtime)
        )
    except (AuthorizationFailed, BadRequest) as exc:
        return _page("Authorization failed", str(exc), 400)
    return _page("Connected", "The MCP server is authorized. You may close this window.", 200)


def _page(title: str, text: str, status: int) -> HTMLResponse:
    body = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></body></html>"
    )
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


__all__ = ["callback", "router"]
