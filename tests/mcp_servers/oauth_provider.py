"""An in-memory authorization server on the MCP SDK's provider interface, for tests: it registers
any client, approves every authorization at once (redirecting with a code), and issues short-lived
access tokens with refresh tokens. ``issued`` counts access tokens (a refresh issues one more);
``token_requests`` counts requests its token endpoint answered. ``DictRecords``: the records port
in a dict."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from typing import TYPE_CHECKING

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from agentvm.errors import Conflict

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable


class DictRecords:
    """``ports.McpOAuthRecords`` in a dict, for tests: what a host's table holds, by key (the
    stores themselves have their contract tests)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.rows: dict[str, tuple[str, str, float | None]] = {}  # key -> (tenant, value, expires_at)

    def values(self) -> list[str]:
        return [value for _, value, _ in self.rows.values()]

    def _live(self, key: str) -> tuple[str, str, float | None] | None:
        row = self.rows.get(key)
        if row is not None and row[2] is not None and row[2] <= self.clock():
            del self.rows[key]
            return None
        return row

    async def get(self, tenant_id: str, key: str) -> str | None:
        row = self._live(key)
        return row[1] if row is not None and row[0] == tenant_id else None

    async def put(self, tenant_id: str, key: str, value: str, *, expires_at: float | None = None) -> None:
        row = self._live(key)
        if row is not None and row[0] != tenant_id:
            raise Conflict("this key belongs to another tenant")
        self.rows[key] = (tenant_id, value, expires_at)

    async def take(self, key: str) -> tuple[str, str] | None:
        row = self._live(key)
        if row is None:
            return None
        del self.rows[key]
        return row[0], row[1]

    async def delete(self, tenant_id: str, key: str) -> None:
        row = self._live(key)
        if row is not None and row[0] == tenant_id:
            del self.rows[key]

    async def delete_tenant(self, tenant_id: str) -> int:
        keys = [key for key, row in self.rows.items() if row[0] == tenant_id]
        for key in keys:
            del self.rows[key]
        return len(keys)


class AutoApprove:
    def __init__(self, access_ttl_s: int = 3600) -> None:
        self.access_ttl_s = access_ttl_s
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}
        self.issued = 0
        self.every_token: list[str] = []  # every access and refresh token ever issued

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=str(client.client_id),
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        self.issued += 1
        access, refresh = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        self.every_token += [access, refresh]
        expires = int(time.time()) + self.access_ttl_s
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(access_token=access, expires_in=self.access_ttl_s, refresh_token=refresh)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(str(client.client_id), authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        return self._issue(str(client.client_id), scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


@contextlib.asynccontextmanager
async def protected_server(provider: AutoApprove | None = None) -> AsyncIterator[tuple[str, AutoApprove]]:
    """An MCP server (an ``add`` tool) on one loopback port whose authorization server runs on
    another: the server's origin has no ``/token``, so a refresh that works went to the token
    endpoint of the authorization server's metadata. Yields the MCP URL and the provider."""
    import uvicorn
    from mcp.server.auth.provider import ProviderTokenVerifier
    from mcp.server.auth.routes import create_auth_routes
    from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
    from mcp.server.mcpserver import MCPServer
    from pydantic import AnyHttpUrl
    from starlette.applications import Starlette

    from tests.mcp_servers.fixtures import free_port

    provider = provider or AutoApprove()
    mcp_port, as_port = free_port(), free_port()
    issuer = f"http://127.0.0.1:{as_port}"
    registration = ClientRegistrationOptions(enabled=True)
    authorization_server = Starlette(
        routes=create_auth_routes(provider, AnyHttpUrl(issuer), client_registration_options=registration)
    )
    mcp = MCPServer(
        "oauth-protected",
        token_verifier=ProviderTokenVerifier(provider),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer),
            resource_server_url=AnyHttpUrl(f"http://127.0.0.1:{mcp_port}/mcp"),
            validate_token_resource=False,
            client_registration_options=registration,
        ),
    )

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    servers = [
        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
        for app, port in ((mcp.streamable_http_app(), mcp_port), (authorization_server, as_port))
    ]
    tasks = [asyncio.create_task(server.serve()) for server in servers]
    while not all(server.started for server in servers):
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{mcp_port}/mcp", provider
    finally:
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks)
