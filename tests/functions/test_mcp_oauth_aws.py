"""MCP OAuth on the AWS host (moto): the authorization is started through the HTTP API Lambda, the
browser's landing on the callback reaches the HTTP API Lambda too (no key), and the turn worker
Lambda then calls the server's tool with the tokens, all through the DynamoDB table (sealed under
the server secret from SSM). The server is a loopback MCP server on the official SDK whose
authorization server approves at once (``tests/mcp_servers/oauth_provider.py``), run in a thread
with its own event loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from functions.turn_worker import app as turn_worker
from tests.functions.aws_stack import TABLE, Stack, moto_resources
from tests.mcp_servers.oauth_provider import AutoApprove, protected_server

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.aws

CONN = "conn-alice"


@contextlib.contextmanager
def server_in_a_thread() -> Iterator[tuple[str, AutoApprove]]:
    ready = threading.Event()
    held: dict[str, Any] = {}

    async def serve() -> None:
        held["stop"] = asyncio.Event()
        async with protected_server() as served:
            held["served"] = served
            ready.set()
            await held["stop"].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        yield held["served"]
    finally:
        loop.call_soon_threadsafe(held["stop"].set)
        thread.join(30)
        loop.close()


@pytest.fixture
def stack(monkeypatch, context, push):
    monkeypatch.setenv("AVM_TOOL_ALLOW_PRIVATE_NETWORKS", "true")  # the MCP server is on loopback
    monkeypatch.setattr(turn_worker, "run_sync", lambda coro: asyncio.run(coro))
    with moto_resources(monkeypatch) as resources, server_in_a_thread() as served:
        s = Stack(resources, context, push)
        s.served = served  # type: ignore[attr-defined]
        yield s


def _run_turns(stack: Stack) -> None:
    """The worker Lambda's invocation, in a thread of its own (its own event loop, as a Lambda)."""
    worker = threading.Thread(target=stack.run_turns)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()


def _failures(stack: Stack) -> list[dict[str, Any]]:
    return [f["data"] for f in stack.push.frames(CONN) if f["type"] == "mcp_server_failed"]


def test_authorized_through_the_http_api_lambda_then_used_by_the_turn_worker(stack):
    url, provider = stack.served  # type: ignore[attr-defined]
    acme = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    servers = {"crm": {"type": "http", "url": url, "auth": "oauth"}}
    image = stack.request(CONN, "image_create", "i", containerId="alice", config={"mcpServers": servers})
    image_id = image["record"]["imageId"]
    stack.model.add("Hello.")
    stack.request(CONN, "message_send", "m1", imageId=image_id, content="hi")
    _run_turns(stack)
    [failed] = _failures(stack)
    assert "POST /v1/mcp/oauth/authorizations" in failed["reason"]

    status, started = stack.http("POST", "/v1/mcp/oauth/authorizations", acme, {"server_url": url})
    assert status == 200, started
    approved = httpx.get(started["authorization_url"])
    landing = httpx.URL(approved.headers["location"])
    assert landing.path == "/v1/mcp/oauth/callback"
    landed = stack.http_raw("GET", f"{landing.path}?{landing.query.decode()}")  # no key: the state
    assert landed["statusCode"] == 200 and "You may close this window" in landed["body"]
    replayed = stack.http_raw("GET", f"{landing.path}?{landing.query.decode()}")
    assert replayed["statusCode"] == 400

    stack.model.add(Calls(("add", {"a": 40, "b": 2})), "Done.")
    stack.request(CONN, "message_send", "m2", imageId=image_id, content="add")
    _run_turns(stack)
    [result] = stack.model.requests[-1].messages[-1].tool_results
    assert result.content == "42" and not result.is_error
    assert len(_failures(stack)) == 1

    items = boto3.resource("dynamodb", region_name="us-east-1").Table(TABLE).scan()["Items"]
    at_rest = str(items)
    assert "MCPOAUTH#" in at_rest
    secrets_ = [*provider.every_token, *(str(c.client_secret) for c in provider.clients.values())]
    assert not any(secret in at_rest for secret in secrets_)
