"""Tool declarations and MCP servers of the wrong shape are refused at image create and update,
with a ``bad_request`` naming the field; what is accepted is stored, and secrets stay references."""

from __future__ import annotations

import pytest

from agentvm.agent.tools.sources import ToolSources

WEATHER = {
    "type": "http",
    "name": "get_weather",
    "description": "Weather of a city",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "method": "GET",
    "url": "https://api.example.com/weather/{city}",
    "headers": {"X-Api-Key": {"secret": "WEATHER_KEY"}, "Accept": "application/json"},
}


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"tools": [{"type": "ftp", "name": "x"}]}, "config.tools.0"),
        ({"tools": [{"name": "x"}]}, "config.tools.0"),
        ({"tools": [{**WEATHER, "url": "file:///etc/passwd"}]}, "config.tools.0.http.url"),
        ({"tools": [{**WEATHER, "name": "has space"}]}, "config.tools.0.http.name"),
        ({"tools": [{**WEATHER, "inputSchema": {"type": "string"}}]}, "config.tools.0.http.inputSchema"),
        (
            {"tools": [{**WEATHER, "inputSchema": {"type": "object", "properties": 3}}]},
            "config.tools.0.http.inputSchema",
        ),
        ({"tools": [{**WEATHER, "headers": {"X": {"value": "s"}}}]}, "config.tools.0.http.headers.X"),
        ({"tools": [{**WEATHER, "surprise": 1}]}, "config.tools.0.http.surprise"),
        ({"tools": [{"type": "builtin", "name": "rm_rf"}]}, "config.tools.0.builtin.name"),
        ({"tools": [WEATHER, WEATHER]}, "config.tools"),
        ({"tools": {"get_weather": WEATHER}}, "config.tools"),
        ({"mcpServers": {"a": {"type": "http"}}}, "config.mcpServers"),
        ({"mcpServers": {"a": {"type": "websocket", "url": "ws://x"}}}, "config.mcpServers"),
        ({"mcpServers": {"a": {"command": ["python"]}}}, "config.mcpServers"),
        ({"mcpServers": {"a": "python server.py"}}, "config.mcpServers"),
        ({"mcpServers": {"bad name": {"command": "x"}}}, "config.mcpServers"),
        (
            {"mcpServers": {"a": {"type": "http", "url": "https://m.example.com", "auth": "basic"}}},
            "config.mcpServers",
        ),
        ({"maxSteps": 0}, "config.maxSteps"),
        ({"maxSteps": "5"}, "config.maxSteps"),
    ],
)
async def test_a_bad_tool_declaration_is_a_bad_request_naming_the_field(harness, config, field):
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    created = await c.request("image_create", containerId="u1", config={"name": "A", **config})
    assert created["code"] == "bad_request"
    assert f" {field}" in created["error"], created["error"]
    img = (await c.request("image_create", containerId="u1", config={"name": "B"}))["record"]
    updated = await c.request("image_update", imageId=img["imageId"], updates=config)
    assert updated["code"] == "bad_request"
    assert f" {field.replace('config', 'updates', 1)}" in updated["error"], updated["error"]


async def test_stdio_mcp_servers_are_refused_where_the_host_cannot_run_them(harness):
    harness.rt.tools = ToolSources(allow_stdio=False)  # as the AWS host wires it
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    created = await c.request(
        "image_create", containerId="u1", config={"mcpServers": {"files": {"command": "python"}}}
    )
    assert created["code"] == "bad_request"
    assert created["error"].startswith("config.mcpServers.files.command: stdio MCP servers run only")
    remote = {"search": {"type": "http", "url": "https://mcp.example.com/mcp"}}
    ok = await c.request("image_create", containerId="u1", config={"mcpServers": remote})
    assert "error" not in ok
    oauth = {"crm": {"type": "sse", "url": "https://mcp.example.com/sse", "auth": "oauth"}}
    ok = await c.request("image_create", containerId="u1", config={"mcpServers": oauth})
    assert "error" not in ok, ok
    stdio = {"files": {"command": "python", "auth": "oauth"}}  # OAuth is for a URL only
    refused = await c.request("image_create", containerId="u1", config={"mcpServers": stdio})
    assert (
        refused["code"] == "bad_request"
        and "files.auth: OAuth is for remote servers only" in refused["error"]
    )


async def test_accepted_declarations_are_stored_with_secret_references_not_values(harness):
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    config = {"tools": [WEATHER, {"type": "builtin", "name": "calculator"}], "maxSteps": 5}
    img = (await c.request("image_create", containerId="u1", config=config))["record"]
    assert "tools" not in img and "mcpServers" not in img
    stored = await harness.store.get_image("tenant-a", img["imageId"])
    assert stored.maxSteps == 5
    assert stored.tools[0]["headers"] == {
        "X-Api-Key": {"secret": "WEATHER_KEY"},
        "Accept": "application/json",
    }
    assert stored.tools[1] == {"type": "builtin", "name": "calculator"}
