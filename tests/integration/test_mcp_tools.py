"""MCP tools through the official SDK, against a real MCP server (``tests/mcp_servers``) over stdio and
Streamable HTTP: the client on its own, then whole turns (discovery cached with the image, calls,
errors, a server that is down or hangs, and a crashed worker that must not run a tool twice)."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.mcp.client import McpUnavailable, SdkMcpConnector
from agentvm.agent.tools.sources import ToolSources
from agentvm.turns.worker import process_turn
from tests.mcp_servers.fixtures import http_server, stdio_config
from tests.tools import WorkerDied


@pytest.fixture(params=["stdio", "http"])
def server(request, tmp_path):
    counter = tmp_path / "calls.txt"
    if request.param == "stdio":
        yield stdio_config(counter), counter
    else:
        with http_server(counter) as config:
            yield config, counter


async def test_the_client_lists_and_calls_tools_concurrently(server):
    config, counter = server
    session = SdkMcpConnector().session("tools", config)
    try:
        specs = {s.name: s for s in await session.list_tools()}
        assert set(specs) == {"add", "echo", "fail", "slow", "counted", "env", "steps", "crash", "ask"}
        assert specs["add"].input_schema["properties"].keys() == {"a", "b"}
        assert (await session.call_tool("add", {"a": 2, "b": 3})).text == "5"
        failed = await session.call_tool("fail", {"message": "boom"})
        assert failed.is_error
        results = await asyncio.gather(*(session.call_tool("echo", {"text": str(i)}) for i in range(4)))
        assert [r.text for r in results] == ["0", "1", "2", "3"]
        assert (await session.call_tool("counted", {"label": "x"})).text == "1"
        assert counter.read_text() == "x\n"
    finally:
        await session.aclose()


async def test_a_hanging_call_is_cancelled_promptly_and_the_session_still_works(server):
    config, _ = server
    session = SdkMcpConnector().session("tools", config)
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(session.call_tool("slow", {"seconds": 30}), 1)
        assert time.monotonic() - started < 5
        assert (await session.call_tool("echo", {"text": "still here"})).text == "still here"
    finally:
        started = time.monotonic()
        await session.aclose()
        assert time.monotonic() - started < 6


@pytest.mark.parametrize(
    "config",
    [{"command": "/nonexistent/mcp-server"}, {"type": "http", "url": "http://127.0.0.1:9/mcp"}],
    ids=["stdio-missing-command", "http-nothing-listening"],
)
async def test_a_server_that_is_down_is_a_clear_error_at_once(config):
    session = SdkMcpConnector().session("down", config)
    started = time.monotonic()
    with pytest.raises(McpUnavailable, match="MCP server 'down' is unreachable"):
        await session.list_tools()
    assert time.monotonic() - started < 5
    await session.aclose()


# -- whole turns ---------------------------------------------------------------------------------


async def _image(harness, config, **extra):
    harness.rt.tools = ToolSources(
        mcp=SdkMcpConnector(connect_timeout_s=10), allow_private_networks=True, list_deadline_s=30
    )
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    img = (
        await c.request("image_create", containerId="u1", config={"mcpServers": {"calc": config}, **extra})
    )["record"]
    return c, img


async def test_a_turn_discovers_the_servers_tools_once_and_calls_them(harness, server):
    config, _ = server
    c, img = await _image(harness, config)
    harness.model.add(Calls(("add", {"a": 20, "b": 22}), ("fail", {"message": "nope"})), "It is 42.")
    await c.request("message_send", imageId=img["imageId"], content="add them")
    await harness.run_turns()

    assert {t.name for t in harness.model.requests[0].tools} == {
        "add",
        "echo",
        "fail",
        "slow",
        "counted",
        "env",
        "steps",
        "crash",
        "ask",
    }
    results = {r.name: r for r in harness.model.requests[1].messages[-1].tool_results}
    assert results["add"].content == "42" and not results["add"].is_error
    assert results["fail"].is_error
    types = [f["type"] for f in c.session_events()]
    assert types.count("tool_completed") == 1 and types.count("tool_failed") == 1
    assert types[-1] == "conversation_end"
    stored = await harness.store.get_image("tenant-a", img["imageId"])
    assert {t["name"] for t in stored.toolCatalog["servers"]["calc"]} >= {"add", "counted"}


async def test_an_unreachable_server_is_left_out_and_the_turn_still_answers(harness):
    c, img = await _image(harness, {"type": "http", "url": "http://127.0.0.1:9/mcp"})
    harness.model.add("I have no tools right now.")
    await c.request("message_send", imageId=img["imageId"], content="hi")
    await harness.run_turns()
    assert harness.model.requests[0].tools == ()
    assert [f["type"] for f in c.session_events()][-1] == "conversation_end"


async def test_a_hanging_mcp_tool_times_out_as_an_error_result(harness, tmp_path):
    c, img = await _image(harness, {**stdio_config(), "timeoutS": 1})
    harness.model.add(Calls(("slow", {"seconds": 30})), "That took too long.")
    await c.request("message_send", imageId=img["imageId"], content="wait")
    started = time.monotonic()
    await harness.run_turns()
    assert time.monotonic() - started < 15
    result = next(f["data"] for f in c.session_events() if f["type"] == "tool_result")
    assert result["isError"] and "timed out after 1 s" in result["result"]


async def test_a_worker_dying_after_an_mcp_tool_ran_does_not_run_it_again(harness, server):
    config, counter = server
    c, img = await _image(harness, config)
    harness.model.add(Calls(("counted", {"label": "once"})), WorkerDied(), "Done.")
    await c.request("message_send", imageId=img["imageId"], content="count")
    jobs = []

    async def collect(job):
        jobs.append(job)

    await harness.queue.drain(collect)
    with pytest.raises(WorkerDied):
        await process_turn(harness.rt, jobs[0])
    await process_turn(harness.rt, jobs[0])  # the redelivery
    assert counter.read_text().splitlines() == ["once"]  # the server saw one call
    history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "tool-call", "tool-result", "assistant"]


async def test_a_stdio_server_gets_a_minimal_environment_not_the_servers_secrets(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-of-the-host")
    config = {**stdio_config(), "env": {"DECLARED": "yes"}}
    session = SdkMcpConnector().session("tools", config)
    try:
        assert (await session.call_tool("env", {"name": "ANTHROPIC_API_KEY"})).text == ""
        assert (await session.call_tool("env", {"name": "DECLARED"})).text == "yes"
        assert (await session.call_tool("env", {"name": "PATH"})).text != ""
    finally:
        await session.aclose()
