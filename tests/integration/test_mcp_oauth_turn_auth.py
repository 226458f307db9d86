"""A remote MCP server protected by the SDK's server-side auth, reached through ``turn_auth``:
without tokens the connection fails saying it needs authorization; with stored tokens the SDK's
provider attaches them and the tool runs."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthToken

from agentvm.adapters.mcp.client import McpUnavailable, SdkMcpSession
from agentvm.adapters.mcp.oauth import SealedTokenStorage, turn_auth
from agentvm.configcentre.sealing import SecretSealer
from tests.mcp_servers.fixtures import free_port
from tests.mcp_servers.oauth_provider import DictRecords

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

GOOD = "token-issued-by-the-test"


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        return AccessToken(token=token, client_id="c", scopes=[]) if token == GOOD else None


@pytest.fixture
async def protected_url() -> AsyncIterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = MCPServer(
        "oauth-protected",
        token_verifier=Verifier(),
        auth=AuthSettings(
            issuer_url=f"{base}/issuer",
            resource_server_url=f"{base}/mcp",
            validate_token_resource=False,
        ),
    )

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    web = uvicorn.Server(
        uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="error")
    )
    task = asyncio.create_task(web.serve())
    while not web.started:
        await asyncio.sleep(0.02)
    yield f"{base}/mcp"
    web.should_exit = True
    await task


def _session(url: str, records: DictRecords, tenant: str) -> SdkMcpSession:
    storage = SealedTokenStorage(records, SecretSealer(lambda: [b"k" * 32]), tenant, url)
    auth = turn_auth(storage, url, "http://127.0.0.1:1/v1/mcp/oauth/callback")
    return SdkMcpSession("remote", {"type": "http", "url": url}, connect_timeout_s=5, http_auth=auth)


async def test_without_tokens_the_sdk_starts_the_oauth_flow_and_the_connection_fails(
    protected_url: str,
) -> None:
    # This fixture has no authorization server (its issuer answers 404), so the SDK's flow stops at
    # dynamic client registration; with one, it would stop at the redirect (NeedsAuthorization).
    session = _session(protected_url, DictRecords(), "t1")
    with pytest.raises(McpUnavailable) as caught:
        await session.list_tools()
    assert "OAuth" in str(caught.value)
    await session.aclose()


async def test_with_stored_tokens_the_tool_runs_and_another_tenant_has_none(protected_url: str) -> None:
    records = DictRecords()
    seed = SealedTokenStorage(records, SecretSealer(lambda: [b"k" * 32]), "t1", protected_url)
    await seed.set_tokens(OAuthToken(access_token=GOOD, expires_in=3600))
    session = _session(protected_url, records, "t1")
    names = [t.name for t in await session.list_tools()]
    assert "add" in names
    await session.aclose()
    other = _session(protected_url, records, "t2")
    with pytest.raises(McpUnavailable):
        await other.list_tools()
    await other.aclose()
