"""MCP OAuth end to end through the in-process host (``api/mcp_oauth.py``, ``adapters/mcp/oauth_flow.py``)
against a loopback MCP server on the official SDK whose authorization server runs on another port
(``tests/mcp_servers/oauth_provider.py``, approving at once):

a turn before authorization reports the server (``mcp_server_failed``, saying an admin must
authorize it) and goes on without it; ``POST /v1/mcp/oauth/authorizations``, the authorization URL
followed with httpx, the callback, and a turn now lists and calls the server's tool; an expired
access token is refreshed at the token endpoint of the stored metadata (the server's own origin
has none) and the new tokens written back; the connection routes; the callback's refusals (a
replayed state, the authorization server's ``error``, an unknown state) store nothing; and no
token, client secret or code verifier is in a response, a log line or a stored record."""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.mcp.client import SdkMcpConnector
from agentvm.adapters.mcp.oauth import StoredOAuth, record_key
from agentvm.adapters.mcp.oauth_flow import pending_key
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from tests.mcp_servers.oauth_provider import AutoApprove, DictRecords, protected_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from tests.harness import Harness, ProtocolClient

BASE = "http://avm"
CALLBACK = f"{BASE}/v1/mcp/oauth/callback"


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, AutoApprove]]:
    async with protected_server() as served:
        yield served


@pytest.fixture
def records(harness: Harness) -> DictRecords:
    rt = harness.rt
    assert rt.config is not None
    rt.config.settings = rt.config.settings.model_copy(update={"tool_allow_private_networks": True})
    rt.mcp_oauth = DictRecords()
    rt.tools = ToolSources(
        mcp=SdkMcpConnector(connect_timeout_s=10),
        allow_private_networks=True,
        list_deadline_s=10,
        oauth=StoredOAuth(CALLBACK),
    )
    return rt.mcp_oauth


def _http(harness: Harness, tenant: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(harness.rt, open_tenant=tenant))
    return httpx.AsyncClient(transport=transport, base_url=BASE)


async def _image(harness: Harness, url: str, tenant: str = "tenant-a") -> tuple[ProtocolClient, str]:
    c = await harness.client(tenant)
    await c.request("container_create", containerId="u1")
    servers = {"crm": {"type": "http", "url": url, "auth": "oauth"}}
    img = (await c.request("image_create", containerId="u1", config={"mcpServers": servers}))["record"]
    return c, img["imageId"]


async def _turn(harness: Harness, c: ProtocolClient, image_id: str, *calls: Any) -> None:
    if calls:
        harness.model.add(Calls(*calls), "Done.")
    else:
        harness.model.add("Hello.")
    await c.request("message_send", imageId=image_id, content="go")
    await harness.run_turns()


def _failures(c: ProtocolClient) -> list[dict[str, Any]]:
    return [f["data"] for f in c.session_events() if f["type"] == "mcp_server_failed"]


async def authorize(harness: Harness, tenant: str, url: str) -> tuple[httpx.Response, str]:
    """POST the authorization, follow its URL as a browser would (the test authorization server
    approves at once), and land on the callback: its answer, and the callback URL it was given."""
    async with _http(harness, tenant) as http:
        started = await http.post("/v1/mcp/oauth/authorizations", json={"server_url": url})
        assert started.status_code == 200, started.text
        body = started.json()
        assert set(body) == {"authorization_url", "expires_at"}
        assert body["expires_at"] > time.time() + 500
        async with httpx.AsyncClient() as browser:
            approved = await browser.get(body["authorization_url"])
        assert approved.status_code == 302
        landing = approved.headers["location"]
        assert landing.startswith(CALLBACK + "?")
        parts = urlsplit(landing)
        return await http.get(f"{parts.path}?{parts.query}"), landing


async def test_a_turn_reports_the_server_until_an_admin_authorizes_it_then_uses_and_refreshes_it(
    harness: Harness,
    records: DictRecords,
    server: tuple[str, AutoApprove],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    url, provider = server
    c, image_id = await _image(harness, url)

    await _turn(harness, c, image_id)  # (a) before: reported, and the turn goes on without it
    [failure] = _failures(c)
    assert (failure["server"], failure["stage"]) == ("crm", "start")
    assert "needs OAuth authorization" in failure["reason"]
    assert "POST /v1/mcp/oauth/authorizations" in failure["reason"]
    assert harness.model.requests[-1].tools == [] or not harness.model.requests[-1].tools
    assert provider.issued == 0 and not provider.clients  # no registration from a turn

    answers: list[str] = []
    landed, landing = await authorize(harness, "tenant-a", url)  # (b)
    answers += [landed.text, landing]
    assert landed.status_code == 200 and "You may close this window" in landed.text
    assert landed.headers["cache-control"] == "no-store"
    async with _http(harness, "tenant-a") as http:
        status = await http.get("/v1/mcp/oauth/connections", params={"server_url": url})
        answers.append(status.text)
        assert status.json()["connected"] is True and status.json()["expires_at"] > time.time()
        replayed = await http.get(urlsplit(landing).path + "?" + urlsplit(landing).query)
        answers.append(replayed.text)
    assert replayed.status_code == 400 and "already used" in replayed.text  # the state works once
    assert provider.issued == 1

    await _turn(harness, c, image_id, ("add", {"a": 2, "b": 3}))
    [result] = harness.model.requests[-1].messages[-1].tool_results
    assert result.content == "5" and not result.is_error
    assert len(_failures(c)) == 1  # none this time

    # (c) the access token expired (and the server forgot it): the turn refreshes it at the token
    # endpoint of the stored metadata (the MCP server's origin has no /token) and writes it back
    key = record_key("tenant-a", url, "tokens")
    tenant, sealed, _ = records.rows[key]
    sealer = harness.rt.config.sealer  # type: ignore[union-attr]
    stored = json.loads(sealer.open(key, sealed))
    stored["expiresAt"] = time.time() - 60
    records.rows[key] = (tenant, sealer.seal(key, json.dumps(stored)), None)
    provider.access.clear()
    await _turn(harness, c, image_id, ("add", {"a": 4, "b": 5}))
    [result] = harness.model.requests[-1].messages[-1].tool_results
    assert result.content == "9" and not result.is_error
    assert provider.issued == 2  # refreshed, not authorized anew
    renewed = json.loads(sealer.open(key, records.rows[key][1]))
    assert renewed["access_token"] != stored["access_token"] and renewed["expiresAt"] > time.time()

    # (e) no token, client secret or verifier in answers, log lines or records at rest
    secrets_ = [*provider.every_token]
    secrets_ += [str(client.client_secret) for client in provider.clients.values() if client.client_secret]
    assert len(secrets_) >= 5
    said = " ".join(answers) + json.dumps(c.frames)
    at_rest = " ".join(records.values())
    for secret in secrets_:
        assert secret not in caplog.text and secret not in said and secret not in at_rest
    assert url not in " ".join(records.rows)  # no URL in a key either


async def test_forgetting_the_connection_makes_the_server_need_authorization_again(
    harness: Harness, records: DictRecords, server: tuple[str, AutoApprove]
) -> None:
    url, _ = server
    landed, _ = await authorize(harness, "tenant-a", url)
    assert landed.status_code == 200
    async with _http(harness, "tenant-a") as http:
        forgotten = await http.delete("/v1/mcp/oauth/connections", params={"server_url": url})
        assert forgotten.json() == {"connected": False, "expires_at": None}
        status = await http.get("/v1/mcp/oauth/connections", params={"server_url": url})
    assert status.json() == {"connected": False, "expires_at": None}
    assert not [k for k in records.rows if not k.startswith("mcp-oauth-pending/")]
    c, image_id = await _image(harness, url)
    await _turn(harness, c, image_id)
    assert "needs OAuth authorization" in _failures(c)[0]["reason"]


async def test_refusals_store_nothing_and_say_so_on_a_page(
    harness: Harness, records: DictRecords, server: tuple[str, AutoApprove]
) -> None:
    url, provider = server
    async with _http(harness, "tenant-a") as http:
        unknown = await http.get("/v1/mcp/oauth/callback", params={"state": "made-up", "code": "x"})
        assert unknown.status_code == 400 and "unknown, expired or already used" in unknown.text
        started = (await http.post("/v1/mcp/oauth/authorizations", json={"server_url": url})).json()
        state = dict(httpx.URL(started["authorization_url"]).params)["state"]
        refused = await http.get("/v1/mcp/oauth/callback", params={"state": state, "error": "access_denied"})
        assert refused.status_code == 400 and "access_denied" in refused.text
        again = await http.get("/v1/mcp/oauth/callback", params={"state": state, "code": "x"})
        assert again.status_code == 400  # the refusal used the state up
        bad_code = (await http.post("/v1/mcp/oauth/authorizations", json={"server_url": url})).json()
        state = dict(httpx.URL(bad_code["authorization_url"]).params)["state"]
        exchange = await http.get("/v1/mcp/oauth/callback", params={"state": state, "code": "not-a-code"})
        assert exchange.status_code == 400 and "could not be exchanged" in exchange.text
        assert "not-a-code" not in exchange.text
        # A's pending authorization moved under tenant B (by someone who can write the table)
        # does not open: nothing is stored, for B or A
        moved = (await http.post("/v1/mcp/oauth/authorizations", json={"server_url": url})).json()
        state = dict(httpx.URL(moved["authorization_url"]).params)["state"]
        assert not [k for k in records.rows if state in k]  # kept under the state's hash only
        _, sealed, expires_at = records.rows[pending_key(state)]
        records.rows[pending_key(state)] = ("tenant-b", sealed, expires_at)
        async with httpx.AsyncClient() as browser:
            landing = httpx.URL((await browser.get(moved["authorization_url"])).headers["location"])
        hijacked = await http.get(f"{landing.path}?{landing.query.decode()}")
        assert hijacked.status_code == 400 and "could not be read" in hijacked.text
        not_oauth = await http.post(
            "/v1/mcp/oauth/authorizations", json={"server_url": "http://127.0.0.1:9/mcp"}
        )
        assert not_oauth.status_code == 400
    assert provider.issued == 0  # no code was exchanged
    assert not records.rows  # pending authorizations taken, no tokens


async def test_a_host_without_records_or_a_server_url_it_may_not_reach_is_refused(
    harness: Harness, server: tuple[str, AutoApprove]
) -> None:
    url, _ = server
    async with _http(harness, "tenant-a") as http:  # the harness keeps no OAuth records
        none = await http.post("/v1/mcp/oauth/authorizations", json={"server_url": url})
        assert none.status_code == 400 and "keeps no OAuth records" in none.json()["error"]["message"]
        harness.rt.mcp_oauth = DictRecords()  # private addresses are refused by default
        private = await http.post("/v1/mcp/oauth/authorizations", json={"server_url": url})
        assert private.status_code == 400 and "server_url" in private.json()["error"]["message"]


async def test_pooled_sessions_of_two_authorized_tenants_are_never_shared(
    harness: Harness, records: DictRecords, server: tuple[str, AutoApprove]
) -> None:
    from agentvm.adapters.mcp.pool import PooledMcpSessions

    url, provider = server
    pool = PooledMcpSessions(SdkMcpConnector(connect_timeout_s=10))
    assert isinstance(harness.rt.tools, ToolSources)
    harness.rt.tools.mcp_pool = pool
    try:
        for tenant in ("tenant-a", "tenant-b"):
            landed, _ = await authorize(harness, tenant, url)
            assert landed.status_code == 200
        for tenant, n in (("tenant-a", 1), ("tenant-b", 2), ("tenant-a", 3)):
            c, image_id = await _image(harness, url, tenant)  # each tenant's container "u1"
            await _turn(harness, c, image_id, ("add", {"a": n, "b": n}))
            [result] = harness.model.requests[-1].messages[-1].tool_results
            assert result.content == str(2 * n) and not result.is_error
        assert pool.open_sessions("tenant-a") == 1 and pool.open_sessions("tenant-b") == 1
        assert pool.counts["reused"] >= 1  # A's second turn took A's session back, not B's
        assert len(provider.access) == 2  # one token per tenant, each on its own session
    finally:
        await pool.aclose()


async def test_a_server_waiting_for_authorization_leaves_the_other_servers_lists_cached(
    harness: Harness, records: DictRecords, server: tuple[str, AutoApprove]
) -> None:
    """The other servers' lists are listed once and read from the image afterwards (their time
    kept: the TTL still runs), while the server without tokens is reported each turn."""
    from tests.mcp_servers.fixtures import stdio_config

    url, _ = server
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    servers = {"crm": {"type": "http", "url": url, "auth": "oauth"}, "people": stdio_config()}
    image_id = (await c.request("image_create", containerId="u1", config={"mcpServers": servers}))["record"][
        "imageId"
    ]
    listed_at = []
    for _ in range(2):
        await _turn(harness, c, image_id)
        image = await harness.rt.store.get_image("tenant-a", image_id)
        assert image is not None and image.toolCatalog is not None
        assert set(image.toolCatalog["servers"]) == {"people"}
        listed_at.append(image.toolCatalog["listedAt"])
    assert listed_at[0] == listed_at[1]
    assert [f["server"] for f in _failures(c)] == ["crm", "crm"]
    assert {t.name for t in harness.model.requests[-1].tools} >= {"ask"}  # people's tools are there


async def test_authorizing_again_reuses_the_tenants_registered_client(
    harness: Harness, records: DictRecords, server: tuple[str, AutoApprove]
) -> None:
    """A second authorization (a revoked token, new scopes) does not register another client at
    the server each time; another tenant registers its own."""
    url, provider = server
    for _ in range(2):
        landed, _ = await authorize(harness, "tenant-a", url)
        assert landed.status_code == 200
    assert len(provider.clients) == 1
    landed, _ = await authorize(harness, "tenant-b", url)
    assert landed.status_code == 200
    assert len(provider.clients) == 2
    async with _http(harness, "tenant-a") as http:
        status = await http.get("/v1/mcp/oauth/connections", params={"server_url": url})
    assert status.json()["connected"] is True


async def test_the_waits_sweepers_task_session_carries_the_tenants_oauth(
    harness: Harness, records: DictRecords, server: tuple[str, AutoApprove]
) -> None:
    """``ToolSources.task_session`` (the session the waits sweeper polls a suspended call's MCP task
    through, turns/mcp_tasks.py) authenticates as the turn did: refused, saying why, before the
    tenant authorized the server; its tools listed after."""
    from agentvm.ports import McpServerFailed

    url, _ = server
    c, image_id = await _image(harness, url)
    rt = harness.rt
    image = await rt.store.get_image("tenant-a", image_id)
    assert image is not None and rt.tools is not None
    with pytest.raises(McpServerFailed, match="needs OAuth authorization"):
        await rt.tools.task_session(image, "crm", mcp_oauth=rt.mcp_oauth_access())
    landed, _ = await authorize(harness, "tenant-a", url)
    assert landed.status_code == 200
    session = await rt.tools.task_session(image, "crm", mcp_oauth=rt.mcp_oauth_access())
    try:
        assert "add" in {spec.name for spec in await session.list_tools()}
    finally:
        await session.aclose()
