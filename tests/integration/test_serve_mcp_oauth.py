"""MCP OAuth across processes: two real ``avm serve`` workers on one data dir (the local host's
SQLite records, sealed with its server secret) and a loopback MCP server on the official SDK whose
authorization server approves at once (``tests/mcp_servers/oauth_provider.py``). The authorization
starts on w0; the browser's landing on the callback is delivered to w1 (nothing of the flow lives
in w0's memory); then a turn on w0 calls the server's tool (the echo model's ``/tool``), where the
turn before authorization was told the server needs it. No token or client secret is in any file
the workers keep (database, WAL, logs)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx

from agentvm.client import AgentVMClient, McpServerFailedEvent
from tests.mcp_servers.oauth_provider import protected_server


async def test_authorized_on_one_worker_called_back_on_the_other_then_used_in_a_turn(tmp_path):
    from tests.integration.test_serve_workers import two_workers

    async with protected_server() as (url, provider):
        servers = {"crm": {"type": "http", "url": url, "auth": "oauth"}}
        with two_workers(tmp_path, AVM_TOOL_ALLOW_PRIVATE_NETWORKS="true") as (w0, w1):
            async with (
                AgentVMClient.connect(w0.url) as client,
                httpx.AsyncClient(base_url=w0.http, timeout=30) as on_w0,
                httpx.AsyncClient(base_url=w1.http, timeout=30) as on_w1,
            ):
                image = await client.create_image("u1", mcp_servers=servers)
                before = await client.send(image.imageId, "hello", timeout=60)
                [failed] = [e for e in before.events if isinstance(e, McpServerFailedEvent)]
                assert (
                    failed.data.server == "crm" and "POST /v1/mcp/oauth/authorizations" in failed.data.reason
                )

                started = await on_w0.post("/v1/mcp/oauth/authorizations", json={"server_url": url})
                assert started.status_code == 200, started.text
                async with httpx.AsyncClient() as browser:
                    approved = await browser.get(started.json()["authorization_url"])
                landing = urlsplit(approved.headers["location"])
                assert f"{landing.scheme}://{landing.netloc}" == w0.http  # the request's own base URL
                landed = await on_w1.get(f"{landing.path}?{landing.query}")
                assert landed.status_code == 200, landed.text
                again = await on_w0.get(f"{landing.path}?{landing.query}")
                assert again.status_code == 400  # taken on w1: gone for w0 too
                status = await on_w0.get("/v1/mcp/oauth/connections", params={"server_url": url})
                assert status.json()["connected"] is True

                turn = await client.send(image.imageId, '/tool add {"a": 20, "b": 22}', timeout=60)
                assert turn.end_reason == "completed", turn.events
                assert not [e for e in turn.events if isinstance(e, McpServerFailedEvent)]
                assert "42" in turn.text
        # at rest and in the log files: no token, no client secret (the database, its WAL, logs.db)
        files = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
        assert any(b"mcp-oauth" in kept for kept in files.values())  # the records are there, sealed
        secrets_ = {f"token {i}": token for i, token in enumerate(provider.every_token)}
        secrets_ |= {
            f"client secret {i}": str(c.client_secret) for i, c in enumerate(provider.clients.values())
        }
        assert len(secrets_) == 3
        secrets_ |= {f"{name} (callback)": value for name, [value] in parse_qs(landing.query).items()}
        found = {
            name: str(path)
            for name, secret in secrets_.items()
            for path, kept in files.items()
            if secret.encode() in kept
        }
        assert found == {}
