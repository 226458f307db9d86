"""MCP failures spoken and progress shown, through whole turns of the in-process host, read with
the SDK's typed events: the reference server ``@modelcontextprotocol/server-everything`` (from npm)
reports progress on a long call; a server that cannot start, crashes mid-call or hangs at listing
each becomes an ``mcp_server_failed`` event naming the server and the reason (never an env value)."""

from __future__ import annotations

import logging
import os
import time

import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.mcp.client import SdkMcpConnector
from agentvm.agent.tools.sources import ToolSources
from agentvm.client import McpServerFailedEvent, ToolProgressEvent, parse_frame
from tests.mcp_servers.fixtures import stdio_config
from tests.npm_tools import SERVER_EVERYTHING, have_npm, installed

SECRET = "s3cret-env-value-never-shown"


def everything_config() -> dict:
    if not have_npm():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("node and npm are required in CI (server-everything)", pytrace=False)
        pytest.skip("node and npm are needed to run @modelcontextprotocol/server-everything")
    return {"command": str(installed(*SERVER_EVERYTHING)), "args": ["stdio"], "timeoutS": 60}


async def _turn(harness, servers, *script, deadline_s=30.0, content="go"):
    """One turn on a new image with ``servers``; returns the client's typed session events."""
    sources = ToolSources(
        mcp=SdkMcpConnector(connect_timeout_s=30), allow_private_networks=True, list_deadline_s=deadline_s
    )
    harness.rt.tools = sources
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    img = (await c.request("image_create", containerId="u1", config={"mcpServers": servers}))["record"]
    harness.model.add(*script)
    await c.request("message_send", imageId=img["imageId"], content=content)
    await harness.run_turns()
    return [parse_frame(f) for f in c.session_events()], c, sources


def _failures(events):
    return [e for e in events if isinstance(e, McpServerFailedEvent)]


async def test_progress_of_a_long_call_of_server_everything_reaches_the_client(harness):
    servers = {"everything": everything_config()}
    call = Calls(("trigger-long-running-operation", {"duration": 2, "steps": 4}))
    events, _, _ = await _turn(harness, servers, call, "Done.")
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert progress, [e.type for e in events]
    assert {e.data.toolName for e in progress} == {"trigger-long-running-operation"}
    values = [e.data.progress for e in progress]
    assert values == sorted(values) and progress[-1].data.progress == progress[-1].data.total == 4
    types = [e.type for e in events]
    assert types.index("tool_executing") < types.index("tool_progress") < types.index("tool_result")
    assert "tool_completed" in types and not _failures(events)


async def test_a_flood_of_progress_is_rate_limited_and_the_last_one_always_sent(harness):
    events, _, _ = await _turn(harness, {"calc": stdio_config()}, Calls(("steps", {"count": 1000})), "Ok.")
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert 1 <= len(progress) <= 20, len(progress)  # 1,000 reports in well under 10 s
    assert progress[-1].data.progress == progress[-1].data.total == 1000
    assert progress[-1].data.message == "step 1000"


async def test_a_server_that_cannot_start_is_an_event_naming_it_without_its_env(harness, caplog):
    servers = {"broken": {"command": "/nonexistent/mcp-server", "env": {"API_KEY": SECRET}}}
    with caplog.at_level(logging.INFO):
        events, c, _ = await _turn(harness, servers, "No tools today.")
    [failure] = _failures(events)
    assert failure.data.server == "broken" and failure.data.stage == "start"
    assert failure.data.reason.startswith("is unreachable")
    assert "Traceback" not in failure.data.reason
    assert harness.model.requests[0].tools == ()
    assert events[-1].type == "conversation_end"
    assert SECRET not in str(c.frames) and SECRET not in caplog.text
    assert any(r.getMessage() == "MCP server failed" and r.server == "broken" for r in caplog.records)


async def test_a_server_that_crashes_mid_call_is_reported_as_a_crash_with_its_stderr_logged(harness, caplog):
    with caplog.at_level(logging.INFO, logger="agentvm.mcp"):
        events, _, _ = await _turn(harness, {"calc": stdio_config()}, Calls(("crash", {"code": 3})), "Oh.")
    [failure] = _failures(events)
    assert failure.data.server == "calc" and failure.data.stage == "call"
    assert failure.data.toolName == "crash" and "crashed during tool 'crash'" in failure.data.reason
    [result] = harness.model.requests[1].messages[-1].tool_results
    assert result.is_error and "crashed" in result.content and "refused" not in result.content
    [logged] = [r for r in caplog.records if r.getMessage() == "MCP server failed"]
    assert "crashing on purpose with code 3" in logged.stderr_tail


async def test_a_server_that_hangs_at_listing_costs_a_turn_the_deadline_not_the_hang(harness):
    deadline = 1.0
    started = time.monotonic()
    events, _, sources = await _turn(
        harness, {"hung": {"command": "sleep", "args": ["600"]}}, "No tools.", deadline_s=deadline
    )
    elapsed = time.monotonic() - started
    for listing in sources._listings.values():  # still listing in the background: ends with the test
        listing.task.cancel()
    # the turn went on without it: not the ~16 s a hanging server used to cost every turn
    assert elapsed < deadline + 10, elapsed
    [failure] = _failures(events)
    assert failure.data.server == "hung" and failure.data.stage == "list"
    assert "did not list its tools within 1 s" in failure.data.reason
    assert events[-1].type == "conversation_end"
