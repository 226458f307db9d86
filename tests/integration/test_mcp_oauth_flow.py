"""The whole MCP OAuth flow against a loopback server built on the SDK's server-side auth (an
auto-approving authorization server on its provider interface): no tokens → the turn's connection
fails saying the server needs authorization; the SDK's flow (discovery, dynamic registration,
PKCE) run with the authorization URL followed by httpx stores tokens and client info sealed; a
turn's session then lists and calls the tool; an access token the server forgets is refreshed and
the new tokens are written back; another tenant has none."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import uvicorn
from mcp.client.auth import OAuthClientProvider
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from agentvm.adapters.mcp.client import McpUnavailable, SdkMcpSession
from agentvm.adapters.mcp.oauth import SealedTokenStorage, record_key, turn_auth
from agentvm.configcentre.sealing import SecretSealer
from tests.mcp_servers.fixtures import free_port
from tests.mcp_servers.oauth_provider import AutoApprove, DictRecords

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

REDIRECT = "http://127.0.0.1:9/v1/mcp/oauth/callback"
SEALER = SecretSealer(lambda: [b"k" * 32])


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, AutoApprove]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    provider = AutoApprove()
    mcp = MCPServer(
        "oauth-protected",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(enabled=True),
        ),
    )

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    web = uvicorn.Server(
        uvicorn.Config(mcp.streamable_http_app(), host="127.0.0.1", port=port, log_level="error")
    )
    task = asyncio.create_task(web.serve())
    while not web.started:
        await asyncio.sleep(0.02)
    yield f"{base}/mcp", provider
    web.should_exit = True
    await task


def _session(url: str, records: DictRecords, tenant: str, *, hours_later: float = 0) -> SdkMcpSession:
    storage = SealedTokenStorage(records, SEALER, tenant, url, clock=lambda: time.time() + hours_later * 3600)
    auth = turn_auth(storage, url, REDIRECT)
    return SdkMcpSession("remote", {"type": "http", "url": url}, connect_timeout_s=5, http_auth=auth)


async def _authorize(url: str, records: DictRecords, tenant: str) -> None:
    """The authorization as the admin route will run it: the SDK's flow, the URL followed by httpx."""
    landing: dict[str, str] = {}

    async def follow(authorization_url: str) -> None:
        async with httpx.AsyncClient() as browser:
            answer = await browser.get(authorization_url)
        assert answer.status_code == 302
        query = parse_qs(urlparse(answer.headers["location"]).query)
        landing.update(code=query["code"][0], state=query["state"][0])

    async def back() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=landing["code"], state=landing["state"])

    metadata = OAuthClientMetadata.model_validate(
        {
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }
    )
    storage = SealedTokenStorage(records, SEALER, tenant, url)
    provider = OAuthClientProvider(url, metadata, storage, redirect_handler=follow, callback_handler=back)
    async with create_mcp_http_client(auth=provider) as client:
        answer = await client.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert answer.status_code != 401


async def test_needs_authorization_then_authorized_then_refreshed(
    server: tuple[str, AutoApprove], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url, provider = server
    records = DictRecords()

    before = _session(url, records, "t1")
    with pytest.raises(McpUnavailable) as caught:
        await before.list_tools()
    assert "needs OAuth authorization" in str(caught.value)
    await before.aclose()

    await _authorize(url, records, "t1")
    at_rest = " ".join(records.values())
    assert provider.access and all(token not in at_rest for token in provider.access)
    assert all(token not in at_rest for token in provider.refresh)

    session = _session(url, records, "t1")
    assert "add" in [t.name for t in await session.list_tools()]
    await session.aclose()

    stored = records.rows[record_key("t1", url, "tokens")][1]
    issued = provider.issued
    provider.access.clear()  # as if they had expired on the server too
    again = _session(url, records, "t1", hours_later=2)  # the stored access token expired an hour ago
    assert "add" in [t.name for t in await again.list_tools()]
    await again.aclose()
    assert provider.issued == issued + 1  # refreshed, not authorized anew (that would need a person)
    assert records.rows[record_key("t1", url, "tokens")][1] != stored  # the new tokens written back

    other = _session(url, records, "t2")
    with pytest.raises(McpUnavailable) as refused:
        await other.list_tools()
    assert "needs OAuth authorization" in str(refused.value)
    await other.aclose()
    assert len(provider.every_token) == 4  # authorized once, refreshed once
    assert not any(token in caplog.text for token in provider.every_token)
    at_rest = " ".join(records.values())
    assert not any(token in at_rest for token in provider.every_token)
