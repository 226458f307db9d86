"""HTTP tools in a turn, against a real loopback server: the declaration's URL, method and headers
reach the server (the secret resolved at call time), the body reaches the model, an error status
is an error result, and the secret never shows in frames, stored messages or logs."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentvm.adapters.http.tools import HttpxToolClient
from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources

SECRET = "s3cret-weather-key-0123456789"


class _Weather(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        _Weather.seen.append({"path": self.path, "key": self.headers.get("X-Api-Key")})
        if self.path.startswith("/weather/Atlantis"):
            body, status = b'{"error": "no such city"}', 404
        else:
            body, status = json.dumps({"city": self.path.split("/")[2], "sky": "sunny"}).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def weather_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Weather)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Weather.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_an_http_tool_turn_calls_the_server_and_keeps_the_secret_out_of_sight(
    harness, weather_url, caplog
):
    caplog.set_level(logging.DEBUG)
    harness.rt.tools = ToolSources(
        http=HttpxToolClient(), secrets={"tenant-a": {"WEATHER_KEY": SECRET}}, allow_private_networks=True
    )
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    tool = {
        "type": "http",
        "name": "get_weather",
        "description": "The weather of a city",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "method": "GET",
        "url": weather_url + "/weather/{city}",
        "headers": {"X-Api-Key": {"secret": "WEATHER_KEY"}},
    }
    img = (await c.request("image_create", containerId="u1", config={"name": "W", "tools": [tool]}))["record"]
    harness.model.add(
        Calls(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Atlantis"})), "Paris is sunny."
    )
    await c.request("message_send", imageId=img["imageId"], content="Weather in Paris and Atlantis?")
    await harness.run_turns()

    assert sorted(s["path"] for s in _Weather.seen) == ["/weather/Atlantis", "/weather/Paris"]
    assert {s["key"] for s in _Weather.seen} == {SECRET}
    results = {r.call_id: r for r in harness.model.requests[1].messages[-1].tool_results}
    assert json.loads(results["call_1_0"].content) == {"city": "Paris", "sky": "sunny"}
    assert results["call_1_1"].is_error and results["call_1_1"].content.startswith("HTTP 404:")

    everything = json.dumps(c.frames) + json.dumps(await c.request("image_messages", imageId=img["imageId"]))
    everything += json.dumps((await harness.store.get_image("tenant-a", img["imageId"])).model_dump())
    assert SECRET not in everything and SECRET not in caplog.text


async def test_an_http_tool_may_not_reach_loopback_by_default(harness, weather_url):
    harness.rt.tools = ToolSources(http=HttpxToolClient())
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    tool = {
        "type": "http",
        "name": "w",
        "description": "d",
        "method": "GET",
        "url": weather_url + "/weather/x",
    }
    img = (await c.request("image_create", containerId="u1", config={"tools": [tool]}))["record"]
    harness.model.add(Calls(("w", {})), "ok")
    await c.request("message_send", imageId=img["imageId"], content="go")
    await harness.run_turns()
    assert _Weather.seen == []
    [result] = harness.model.requests[1].messages[-1].tool_results
    assert result.is_error and "loopback" in result.content
