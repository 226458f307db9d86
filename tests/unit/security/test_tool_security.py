"""What tools may not do: run commands for a non-admin caller, read another tenant's secrets, reach
private addresses, or put a secret where a client can see it."""

from __future__ import annotations

import json

import pytest

from agentvm.agent.tools.declarations import HttpToolDecl
from agentvm.agent.tools.egress import EgressRefused, check_public
from agentvm.agent.tools.sources import HttpTool, ToolSources, tenant_secrets
from agentvm.ports import HttpToolResponse
from tests.security_harness import keyed_client, new_key, secure

STDIO = {"files": {"command": "python", "args": ["server.py"]}}


async def test_only_an_admin_key_may_declare_a_stdio_mcp_server(harness):
    secure(harness)
    client = await keyed_client(harness, await new_key(harness.rt, "acme", "client"))
    admin = await keyed_client(harness, await new_key(harness.rt, "acme", "admin"))
    for c in (client, admin):
        await c.request("container_create", containerId="u1")
    refused = await client.request("image_create", containerId="u1", config={"mcpServers": STDIO})
    assert refused["code"] == "forbidden" and "only an admin key" in refused["error"]
    img = (await client.request("image_create", containerId="u1", config={"name": "x"}))["record"]
    updated = await client.request("image_update", imageId=img["imageId"], updates={"mcpServers": STDIO})
    assert updated["code"] == "forbidden"
    allowed = await admin.request("image_create", containerId="u1", config={"mcpServers": STDIO})
    assert "error" not in allowed


def test_a_tenant_sees_only_its_own_and_the_shared_secrets():
    secrets = {"*": {"SHARED": "s"}, "acme": {"KEY": "acme-key"}, "globex": {"KEY": "globex-key"}}
    assert tenant_secrets(secrets, "acme") == {"SHARED": "s", "KEY": "acme-key"}
    assert tenant_secrets(secrets, "initech") == {"SHARED": "s"}


class RecordingClient:
    def __init__(self) -> None:
        self.requests: list[dict] = []

    async def request(self, method, url, *, headers, json_body, timeout_s, max_bytes):
        self.requests.append({"method": method, "url": url, "headers": dict(headers), "body": json_body})
        return HttpToolResponse(200, json.dumps({"ok": True}))


def _tool(client, secrets, *, allow_private=True, url="https://api.example.com/w/{city}") -> HttpTool:
    decl = HttpToolDecl.model_validate(
        {
            "type": "http",
            "name": "w",
            "description": "d",
            "url": url,
            "method": "POST",
            "headers": {"X-Key": {"secret": "KEY"}, "Accept": "application/json"},
        }
    )
    return HttpTool(decl, client, secrets, 1000, allow_private)


async def test_an_http_tool_resolves_its_secret_header_at_call_time_and_fills_the_url():
    client = RecordingClient()
    out = await _tool(client, {"KEY": "s3cret"}).call({"city": "São Paulo", "days": 2})
    assert out.text == '{"ok": true}' and not out.is_error
    [sent] = client.requests
    assert sent["url"] == "https://api.example.com/w/S%C3%A3o%20Paulo"
    assert sent["headers"] == {"X-Key": "s3cret", "Accept": "application/json"}
    assert sent["body"] == {"days": 2}


async def test_a_secret_the_tenant_does_not_have_is_an_error_naming_it_not_a_value():
    with pytest.raises(ValueError, match="no tool secret named 'KEY'"):
        await _tool(RecordingClient(), {}).call({"city": "x"})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/x",
        "http://localhost/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/x",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
    ],
)
async def test_tools_may_not_reach_private_addresses_unless_allowed(url):
    with pytest.raises(EgressRefused, match="private, loopback or link-local"):
        await check_public(url)
    client = RecordingClient()
    with pytest.raises(EgressRefused):
        await _tool(client, {"KEY": "k"}, allow_private=False, url=url).call({"city": "x"})
    assert client.requests == []


async def test_public_addresses_pass_the_egress_check():
    await check_public("http://93.184.215.14/")  # a literal: no DNS lookup, no network


async def test_tool_sources_refuse_private_addresses_by_default():
    assert ToolSources().allow_private_networks is False
