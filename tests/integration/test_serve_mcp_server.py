"""``/mcp`` of a real ``avm serve`` (a subprocess on loopback, the echo model), driven by MCP clients
nobody here wrote: the official MCP Python SDK's client (``mcp.client.streamable_http``) and the
MCP Inspector's CLI mode (``@modelcontextprotocol/inspector --cli``, from npm, installed on first use
into ``.artifacts/npm/``, git-ignored; skipped only when node or npm is missing)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from agentvm.client import AgentVMClient
from tests import npm_tools
from tests.integration.avm_process import avm_serve, free_port, run_avm

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from tests.integration.avm_process import AvmServer

CALC = {"type": "builtin", "name": "calculator"}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[AvmServer, str, str]]:
    """A real ``avm serve`` with an image ("calc helper", the calculator tool) in tenant default's
    container user-alice; its admin key, and a client key of another tenant (acme)."""
    data = tmp_path_factory.mktemp("avm")
    made = run_avm("keys", "create", "--tenant", "acme", "--scope", "client", "--data-dir", str(data))
    assert made.returncode == 0, made.stderr
    with avm_serve(data, free_port()) as server:
        yield server, server.admin_token(), made.stdout.strip()


@pytest.fixture(scope="module")
def calc_image(served) -> dict[str, Any]:
    server, token, _ = served

    async def create() -> dict[str, Any]:
        async with AgentVMClient.connect(server.url, token=token) as client:
            image = await client.create_image(
                "user-alice", name="calc helper", description="Does sums with its calculator.", tools=[CALC]
            )
        return {"imageId": image.imageId, "sessionId": image.sessionId}

    return asyncio.run(create())


@contextlib.asynccontextmanager
async def mcp_session(server: AvmServer, token: str) -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        http,
        streamable_http_client(f"{server.http}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_the_mcp_sdk_client_lists_and_calls_an_agent_with_progress(served, calc_image) -> None:
    server, token, _ = served
    async with mcp_session(server, token) as session:
        [tool] = (await session.list_tools()).tools
        assert (tool.name, tool.title) == ("calc_helper", "calc helper")
        assert tool.description is not None and tool.description.startswith("Does sums with its calculator.")
        progress: list[str | None] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message)

        message = '/tool calculator {"expression": "6*7"}'  # the echo model calls the tool
        result = await session.call_tool("calc_helper", {"message": message}, progress_callback=on_progress)
        assert not result.is_error, result
        assert result.content[0].text == "Echo: calculator returned: 42"  # type: ignore[union-attr]
        assert "calling tool calculator" in progress and progress[-1] == "turn completed", progress

        plain = await session.call_tool("calc_helper", {"message": "hello there"})
        assert plain.content[0].text == "Echo: hello there"  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="Unknown tool"):
            await session.call_tool("no_such_agent", {"message": "hi"})
        bad = await session.call_tool("calc_helper", {"text": "hi"})
        assert bad.is_error and "invalid arguments" in bad.content[0].text  # type: ignore[union-attr]
    # The calls are the image's turns: in its session, metered as usage of the key's tenant.
    usage = httpx.get(f"{server.http}/v1/usage", headers={"Authorization": f"Bearer {token}"}).json()
    assert usage["totals"]["turns"] >= 2


async def test_another_tenants_key_sees_nothing_and_no_key_is_401(served, calc_image) -> None:
    server, _, acme = served
    async with mcp_session(server, acme) as session:
        assert (await session.list_tools()).tools == []
        with pytest.raises(MCPError, match="Unknown tool: calc_helper"):
            await session.call_tool("calc_helper", {"message": "hijack"})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer avm_000000000000_wrong"}):
        refused = httpx.post(f"{server.http}/mcp", json=body, headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"


def inspector() -> Path:
    """The MCP Inspector's launcher (``tests/npm_tools.py``: installed from npm on first use)."""
    if not npm_tools.have_npm():
        pytest.skip("node and npm are needed to run the MCP Inspector")
    return npm_tools.installed(*npm_tools.INSPECTOR)


def inspect(server: AvmServer, token: str, *args: str) -> Any:
    done = subprocess.run(
        [
            str(inspector()),
            "--cli",
            f"{server.http}/mcp",
            "--transport",
            "http",
            "--header",
            f"Authorization: Bearer {token}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


async def test_the_mcp_inspector_cli_lists_and_calls_an_agent(served, calc_image) -> None:
    server, token, acme = served
    listed = inspect(server, token, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["calc_helper"]
    assert listed["tools"][0]["inputSchema"]["required"] == ["message"]
    called = inspect(
        server,
        token,
        "--method",
        "tools/call",
        "--tool-name",
        "calc_helper",
        "--tool-arg",
        "message=hi inspector",
    )
    assert called["content"] == [{"type": "text", "text": "Echo: hi inspector"}]
    assert not called.get("isError")
    assert inspect(server, acme, "--method", "tools/list")["tools"] == []


# -- which MCP revisions /mcp speaks ------------------------------------------------------------


def _initialize(server: AvmServer, token: str, revision: str) -> dict[str, Any]:
    """A raw ``initialize`` offering ``revision``, as a client of that revision sends it."""
    answer = httpx.post(
        f"{server.http}/mcp",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        },
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": revision,
                "capabilities": {},
                "clientInfo": {"name": "revision-probe", "version": "1"},
            },
        },
        timeout=20,
    )
    assert answer.status_code == 200, answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        data = [line[len("data: ") :] for line in answer.text.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])
    return answer.json()


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_mcp_speaks_every_handshake_revision_a_client_may_offer(served, revision) -> None:
    """Clients in the field still offer older revisions: each is accepted as offered (the MCP SDK's
    server negotiation; mcp_types.version lists what it knows)."""
    server, token, _ = served
    result = _initialize(server, token, revision)["result"]
    assert result["protocolVersion"] == revision
    assert "tools" in result["capabilities"]


def test_mcp_answers_an_unknown_revision_with_the_newest_it_speaks(served) -> None:
    from mcp_types.version import LATEST_HANDSHAKE_VERSION

    server, token, _ = served
    result = _initialize(server, token, "1999-01-01")["result"]
    assert result["protocolVersion"] == LATEST_HANDSHAKE_VERSION  # the client decides whether it can


async def test_the_sdk_clients_negotiate_the_newest_revisions(served, calc_image) -> None:
    """The SDK's ``ClientSession`` does the initialize handshake (its newest: 2025-11-25); its
    high-level ``Client`` probes ``server/discover`` first and gets the stateless 2026-07-28."""
    from mcp.client.client import Client
    from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

    server, token, _ = served
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        http,
        streamable_http_client(f"{server.http}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        assert (await session.initialize()).protocol_version == LATEST_HANDSHAKE_VERSION
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(f"{server.http}/mcp", http_client=http)) as client:
        assert client.protocol_version == LATEST_MODERN_VERSION
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names  # the tenant's images, over the stateless revision too
