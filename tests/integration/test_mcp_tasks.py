"""MCP Tasks (``adapters/mcp/tasks.py``), both wire forms, against real server processes.

2025-11-25, against a server nobody here wrote:
``@modelcontextprotocol/server-everything`` (the TypeScript SDK's task support, protocol 2025-11-25),
whose ``simulate-research-query`` tool has ``execution.taskSupport: "required"`` and moves through four
stages (about a second each) before its report is ready. Over stdio and Streamable HTTP, through whole
turns with the host's session pool: the call runs as a task, its stages reach the client as
``tool_progress`` and its report as the tool's result; an interrupt cancels the task on the server
(``tasks/cancel``: the server's own ``tasks/list`` says ``cancelled``); tools without task support on
the same server, and servers without the capability, are called as before.

2026-07-28 (the ``io.modelcontextprotocol/tasks`` extension), against ``tests/mcp_servers/tasks_server.py``
on the official Python SDK (its ``Extension`` interface), over stdio and Streamable HTTP: the server
answers ``survey`` with a task; its stages are progress, its result the tool's; a task that fails is
an error result naming the server's error; an interrupt sends ``tasks/cancel`` (the server logs the
task ``cancelled`` and its work stops); the server's ordinary tool answers directly.

Skipped without node and npm, except under ``CI=true``, where that fails.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import mcp_types as types
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.mcp.client import SdkMcpConnector, SdkMcpSession
from agentvm.adapters.mcp.pool import PooledMcpSessions
from agentvm.agent.tools.sources import ToolSources
from tests.integration.test_mcp_sessions import everything  # noqa: F401 (the stdio and http fixture)
from tests.mcp_servers.fixtures import free_port, served_over_http, stdio_config

TASKS_SERVER = Path(__file__).parents[1] / "mcp_servers" / "tasks_server.py"
RESEARCH = "simulate-research-query"
STAGES = ["Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."]


async def _image(harness, servers: dict) -> tuple[object, str, PooledMcpSessions]:
    pool = PooledMcpSessions(SdkMcpConnector(connect_timeout_s=30))
    harness.rt.tools = ToolSources(
        mcp=SdkMcpConnector(connect_timeout_s=30),
        mcp_pool=pool,
        allow_private_networks=True,
        list_deadline_s=30,
    )
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    record = await c.request("image_create", containerId="u1", config={"mcpServers": servers})
    return c, record["record"]["imageId"], pool


def _progress(c) -> list[dict]:
    return [f["data"] for f in c.session_events() if f["type"] == "tool_progress"]


def _results(c) -> list[dict]:
    return [f["data"] for f in c.session_events() if f["type"] == "tool_result"]


async def _tasks_on_the_server(pool: PooledMcpSessions) -> list[types.Task]:
    """The server's own ``tasks/list`` on the container's pooled session."""
    [entry] = pool._entries.values()
    assert entry.session is not None and entry.session._client is not None
    listed = await entry.session._client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    return listed.tasks


async def test_a_task_capable_tool_runs_as_a_task_its_stages_are_progress_and_its_report_the_result(
    harness,
    everything,  # noqa: F811
):
    c, image_id, pool = await _image(harness, {"everything": everything})
    try:
        harness.model.add(Calls((RESEARCH, {"topic": "tides"})), "done")
        await c.request("message_send", imageId=image_id, content="research tides")
        await harness.run_turns()

        [result] = _results(c)
        assert not result.get("isError") and "# Research Report: tides" in str(result["result"])
        progress = _progress(c)
        assert {p["toolName"] for p in progress} == {RESEARCH}
        # the stages the server set as the task's statusMessage, in order (rate-limited: some may be merged)
        messages = [p["message"] for p in progress]
        assert messages[0] == STAGES[0] and set(messages) <= {*STAGES, "task completed"}
        assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)
        [task] = await _tasks_on_the_server(pool)
        assert task.status == "completed"
    finally:
        await pool.aclose()


async def test_an_interrupt_cancels_the_task_on_the_server(harness, everything):  # noqa: F811
    c, image_id, pool = await _image(harness, {"everything": everything})
    try:
        harness.model.add(Calls((RESEARCH, {"topic": "tides"})), "done")
        await c.request("message_send", imageId=image_id, content="research tides")
        running = asyncio.create_task(harness.run_turns())
        deadline = time.monotonic() + 30
        while not _progress(c):  # the task exists and runs
            assert time.monotonic() < deadline, c.types()
            await asyncio.sleep(0.05)
        await c.request("agent_interrupt", imageId=image_id)
        await asyncio.wait_for(running, 30)

        assert c.session_events()[-1]["data"]["reason"] == "interrupted"
        [task] = await _tasks_on_the_server(pool)
        assert task.status == "cancelled", task
        await asyncio.sleep(4.5)  # past the time its last stage would have ended
        [task] = await _tasks_on_the_server(pool)
        assert task.status == "cancelled"
    finally:
        await pool.aclose()


async def test_a_tool_without_task_support_on_a_task_server_is_called_as_before(harness, everything):  # noqa: F811
    c, image_id, pool = await _image(harness, {"everything": everything})
    try:
        harness.model.add(Calls(("get-sum", {"a": 2, "b": 3})), "done")
        await c.request("message_send", imageId=image_id, content="add")
        await harness.run_turns()
        [result] = _results(c)
        assert "The sum of 2 and 3 is 5." in str(result["result"])
        assert await _tasks_on_the_server(pool) == []  # no task was made for it
    finally:
        await pool.aclose()


async def test_a_server_without_the_tasks_capability_is_unaffected(harness):
    c, image_id, pool = await _image(harness, {"tools": stdio_config()})
    try:
        harness.model.add(Calls(("add", {"a": 2, "b": 3})), "done")
        await c.request("message_send", imageId=image_id, content="add")
        await harness.run_turns()
        [result] = _results(c)
        assert str(result["result"]) == "5", result
    finally:
        await pool.aclose()


async def test_a_cancelled_call_sends_tasks_cancel_before_it_ends(everything):  # noqa: F811
    """The adapter alone: cancelling the calling coroutine (what an interrupt, a tool's timeout and
    the turn's deadline do) ends with the task cancelled on the server, not still running."""
    session = SdkMcpSession("everything", everything, connect_timeout_s=30)
    seen: list[str | None] = []
    try:
        call = asyncio.create_task(
            session.call_tool(
                RESEARCH, {"topic": "x"}, on_progress=lambda _p, _t, message: seen.append(message)
            )
        )
        deadline = time.monotonic() + 30
        while not seen:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        call.cancel()
        try:
            await call
        except asyncio.CancelledError:
            pass
        listed = await session._client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        assert [t.status for t in listed.tasks] == ["cancelled"]
    finally:
        await session.aclose()


# -- 2026-07-28: the tasks extension -------------------------------------------------------------


@pytest.fixture(params=["stdio", "http"])
def tasks_server(request, tmp_path):
    """The extension's test server; yields (its config, the file it logs each task's end to)."""
    log = tmp_path / "tasks.log"
    log.touch()
    env = {"MCP_TASKS_LOG": str(log)}
    if request.param == "stdio":
        yield {"command": sys.executable, "args": [str(TASKS_SERVER)], "env": env}, log
    else:
        port = free_port()
        argv = [sys.executable, str(TASKS_SERVER), "http", str(port)]
        with served_over_http(argv, port, env, "the tasks test server") as config:
            yield config, log


def _ends(log: Path) -> list[str]:
    return [line.split()[1] for line in log.read_text().splitlines()]


async def test_a_2026_task_reports_its_stages_and_returns_its_result(harness, tasks_server):
    config, log = tasks_server
    c, image_id, pool = await _image(harness, {"survey": config})
    try:
        harness.model.add(Calls(("survey", {"stages": 3, "seconds": 0.3})), "done")
        await c.request("message_send", imageId=image_id, content="survey")
        await harness.run_turns()
        [result] = _results(c)
        assert not result.get("isError") and "surveyed 3 stages" in str(result["result"])
        messages = [p["message"] for p in _progress(c)]
        assert messages[0] == "queued" and set(messages) <= {
            "queued",
            "stage 1 of 3",
            "stage 2 of 3",
            "stage 3 of 3",
            "done",
        }
        assert _ends(log) == ["completed"]
    finally:
        await pool.aclose()


async def test_a_2026_task_that_fails_is_an_error_result_naming_the_servers_error(harness, tasks_server):
    config, log = tasks_server
    c, image_id, pool = await _image(harness, {"survey": config})
    try:
        harness.model.add(Calls(("doomed", {})), "done")
        await c.request("message_send", imageId=image_id, content="survey")
        await harness.run_turns()
        [result] = _results(c)
        assert result.get("isError") and "the survey site is flooded" in str(result["result"]), result
        assert _ends(log) == ["failed"]
    finally:
        await pool.aclose()


async def test_an_interrupt_cancels_a_2026_task_on_the_server(harness, tasks_server):
    config, log = tasks_server
    c, image_id, pool = await _image(harness, {"survey": config})
    try:
        harness.model.add(Calls(("survey", {"stages": 20, "seconds": 0.5})), "done")
        await c.request("message_send", imageId=image_id, content="survey")
        running = asyncio.create_task(harness.run_turns())
        deadline = time.monotonic() + 30
        while not _progress(c):
            assert time.monotonic() < deadline, c.types()
            await asyncio.sleep(0.05)
        await c.request("agent_interrupt", imageId=image_id)
        await asyncio.wait_for(running, 30)
        assert c.session_events()[-1]["data"]["reason"] == "interrupted"
        assert _ends(log) == ["cancelled"]
    finally:
        await pool.aclose()


async def test_an_ordinary_tool_of_a_2026_task_server_answers_directly(harness, tasks_server):
    config, log = tasks_server
    c, image_id, pool = await _image(harness, {"survey": config})
    try:
        harness.model.add(Calls(("quick", {})), "done")
        await c.request("message_send", imageId=image_id, content="quick")
        await harness.run_turns()
        [result] = _results(c)
        assert "quick answer" in str(result["result"]) and not _progress(c)
        assert _ends(log) == []
    finally:
        await pool.aclose()


async def test_a_2026_tasks_question_reaches_the_user_and_the_answer_the_task(harness, tasks_server):
    """``input_required``: the task's ``elicitation/create`` is a ``tool_elicitation`` like any
    server's question; the user's answer goes back with ``tasks/update`` and the task completes."""
    from agentvm.agent.tools.elicitation import ElicitationDesk

    config, log = tasks_server
    c, image_id, pool = await _image(harness, {"survey": config})
    harness.rt.elicitations = ElicitationDesk(timeout_s=30)
    try:
        harness.model.add(Calls(("consent", {"question": "Deploy now?"})), "done")
        await c.request("message_send", imageId=image_id, content="ask")
        running = asyncio.create_task(harness.run_turns())
        deadline = time.monotonic() + 30
        while not (asked := [f["data"] for f in c.session_events() if f["type"] == "tool_elicitation"]):
            assert time.monotonic() < deadline, c.types()
            await asyncio.sleep(0.05)
        [question] = asked
        assert question["message"] == "Deploy now?" and question["toolName"] == "consent"
        await c.request(
            "elicitation_answer",
            elicitationId=question["elicitationId"],
            action="accept",
            content={"approve": True},
        )
        await asyncio.wait_for(running, 30)
        [result] = _results(c)
        assert "accept: {'approve': True}" in str(result["result"]), result
        assert _ends(log) == ["completed"]
    finally:
        await pool.aclose()


@pytest.mark.parametrize("tasks_server", ["http"], indirect=True)  # a stdio server is its session's
async def test_a_call_allowed_an_inline_follow_hands_its_task_off_and_another_session_follows_it(
    tasks_server,
):
    """Where turns suspend on tasks (AWS), ``MCP_TASK_INLINE_S`` bounds the call's follow: a task
    still working then ends the call with ``McpTaskHandedOff`` (not cancelled), and a new session, as
    the waits sweeper opens, reads it with ``tasks/get`` until it completes, or cancels it. (Over
    Streamable HTTP: a stdio server's process, and its tasks, are its session's.)"""
    from agentvm.ports import MCP_TASK_INLINE_S, McpTaskHandedOff

    config, log = tasks_server
    caller, follower = SdkMcpSession("lab", dict(config)), SdkMcpSession("lab", dict(config))
    reports: list[str | None] = []
    token = MCP_TASK_INLINE_S.set(0.5)
    try:
        with pytest.raises(McpTaskHandedOff) as handed:
            await caller.call_tool(
                "survey", {"stages": 2, "seconds": 1.0}, on_progress=lambda p, t, m: reports.append(m)
            )
        handoff = handed.value
        assert handoff.task_id not in repr(handoff) + str(handoff)
        assert handoff.poll_ms == 200 and handoff.reports == len(reports) and handoff.message == reports[-1]
        await caller.aclose()
        assert _ends(log) == []  # handed off, not cancelled

        deadline = time.monotonic() + 30
        while (state := await follower.get_task(handoff.task_id)).status == "working":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        assert state.status == "completed" and state.output is not None
        assert (state.output.text, state.output.is_error) == ("surveyed 2 stages", False)

        with pytest.raises(McpTaskHandedOff) as again:
            await follower.call_tool("survey", {"stages": 20, "seconds": 0.5})
        await follower.cancel_task(again.value.task_id)
        assert (await follower.get_task(again.value.task_id)).status == "cancelled"
        assert _ends(log) == ["completed", "cancelled"]
    finally:
        MCP_TASK_INLINE_S.reset(token)
        await caller.aclose()
        await follower.aclose()
