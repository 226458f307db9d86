"""MCP elicitation through whole turns of the in-process host: a server on the official SDK
(``tests/mcp_servers/tools_server.py``, its ``ask`` tool) asks the user for a name and an age during
a call; the client sees ``tool_elicitation`` and answers with ``elicitation_answer_request``, and the
tool's result says what the server received. Accept (content checked against the server's schema),
decline, the deadline, an interrupt, and another tenant's answer refused like a missing id."""

from __future__ import annotations

import asyncio
import time

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.mcp.client import SdkMcpConnector
from agentvm.adapters.mcp.pool import PooledMcpSessions
from agentvm.agent.tools.elicitation import ElicitationDesk
from agentvm.agent.tools.sources import ToolSources
from agentvm.client import ToolElicitationEndedEvent, ToolElicitationEvent, parse_frame
from tests.mcp_servers.fixtures import stdio_config

QUESTION = "Who are you?"


async def _start(harness, *, timeout_s=30.0, server=None, content="who?", pool=None):
    """A turn whose model calls ``ask`` (running in the background); returns the client, the
    running turns and the image."""
    harness.rt.tools = ToolSources(
        mcp=SdkMcpConnector(connect_timeout_s=30),
        mcp_pool=pool,
        allow_private_networks=True,
        list_deadline_s=30,
    )
    harness.rt.elicitations = ElicitationDesk(timeout_s=timeout_s)
    c = await harness.client()
    await c.request("container_create", containerId="u1")
    servers = {"people": server or stdio_config()}
    img = (await c.request("image_create", containerId="u1", config={"mcpServers": servers}))["record"]
    harness.model.add(Calls(("ask", {"question": QUESTION})), "Thanks.")
    await c.request("message_send", imageId=img["imageId"], content=content)
    return c, asyncio.create_task(harness.run_turns()), img


async def _question(c, timeout_s=30.0) -> ToolElicitationEvent:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for frame in c.session_events():
            if frame["type"] == "tool_elicitation":
                event = parse_frame(frame)
                assert isinstance(event, ToolElicitationEvent)
                return event
        await asyncio.sleep(0.02)
    raise AssertionError(f"no tool_elicitation: {c.types()}")


def _result(harness) -> str:
    [result] = harness.model.requests[1].messages[-1].tool_results
    return result.content


def _ended(c) -> ToolElicitationEndedEvent:
    [ended] = [parse_frame(f) for f in c.session_events() if f["type"] == "tool_elicitation_ended"]
    assert isinstance(ended, ToolElicitationEndedEvent)
    return ended


async def test_an_accepted_answer_reaches_the_server_and_its_result(harness):
    c, running, _ = await _start(harness)
    question = await _question(c)
    data = question.data
    assert data.message == QUESTION and data.mode == "form" and data.toolName == "ask"
    assert data.requestedSchema is not None
    assert set(data.requestedSchema["properties"]) == {"name", "age"}
    assert data.turnId and data.toolId and data.deadlineAt > 0

    answered = await c.request(
        "elicitation_answer",
        elicitationId=data.elicitationId,
        action="accept",
        content={"name": "Ada", "age": 36},
    )
    assert answered == {
        "requestId": answered["requestId"],
        "elicitationId": data.elicitationId,
        "action": "accept",
    }
    await asyncio.wait_for(running, 60)

    assert _result(harness) == "accepted: Ada, 36"
    ended = _ended(c)
    assert (ended.data.action, ended.data.reason, ended.data.toolId) == ("accept", "answered", data.toolId)
    types = [f["type"] for f in c.session_events()]
    assert (
        types.index("tool_executing")
        < types.index("tool_elicitation")
        < types.index("tool_elicitation_ended")
    )
    assert types.index("tool_elicitation_ended") < types.index("tool_completed")
    assert "Ada" not in str([f for f in c.session_events() if f["type"] == "tool_elicitation_ended"])


async def test_content_that_does_not_fit_the_schema_is_refused_and_the_question_stays_open(harness):
    c, running, _ = await _start(harness)
    data = (await _question(c)).data
    refused = await c.request(
        "elicitation_answer",
        elicitationId=data.elicitationId,
        action="accept",
        content={"name": "Ada", "age": -4},
    )
    assert refused["code"] == "bad_request" and "schema" in refused["error"], refused
    missing = await c.request(
        "elicitation_answer", elicitationId=data.elicitationId, action="accept", content={"age": 3}
    )
    assert missing["code"] == "bad_request" and "'name' is a required property" in missing["error"]
    await c.request(
        "elicitation_answer",
        elicitationId=data.elicitationId,
        action="accept",
        content={"name": "Bo", "age": 7},
    )
    await asyncio.wait_for(running, 60)
    assert _result(harness) == "accepted: Bo, 7"


async def test_a_declined_question_is_declined_at_the_server_and_a_second_answer_is_not_found(harness):
    c, running, _ = await _start(harness)
    data = (await _question(c)).data
    await c.request("elicitation_answer", elicitationId=data.elicitationId, action="decline")
    await asyncio.wait_for(running, 60)
    assert _result(harness) == "decline"
    again = await c.request("elicitation_answer", elicitationId=data.elicitationId, action="cancel")
    assert again["code"] == "not_found"
    assert _ended(c).data.reason == "answered"


async def test_an_unanswered_question_is_cancelled_at_its_deadline(harness):
    c, running, _ = await _start(harness, timeout_s=0.5)
    data = (await _question(c)).data
    await asyncio.wait_for(running, 60)
    assert _result(harness) == "cancel"
    ended = _ended(c)
    assert (ended.data.action, ended.data.reason) == ("cancel", "timed_out")
    late = await c.request(
        "elicitation_answer", elicitationId=data.elicitationId, action="accept", content={}
    )
    assert late["code"] == "not_found"


async def test_the_calls_own_timeout_waits_while_the_user_answers(harness):
    server = {**stdio_config(), "timeoutS": 3}  # the call may run 3 s; the user takes longer
    pool = PooledMcpSessions()  # the listing's session serves the call: no start-up inside its 3 s
    try:
        c, running, _ = await _start(harness, server=server, pool=pool)
        data = (await _question(c)).data
        await asyncio.sleep(4)
        content = {"name": "Cy", "age": 1}
        await c.request(
            "elicitation_answer", elicitationId=data.elicitationId, action="accept", content=content
        )
        await asyncio.wait_for(running, 60)
        assert _result(harness) == "accepted: Cy, 1"
    finally:
        await pool.aclose()


async def test_an_interrupt_cancels_the_question(harness):
    c, running, img = await _start(harness)
    data = (await _question(c)).data
    await c.request("agent_interrupt", imageId=img["imageId"])
    await asyncio.wait_for(running, 60)
    assert _ended(c).data.reason == "interrupted" and _ended(c).data.action == "cancel"
    assert c.session_events()[-1]["data"]["reason"] == "interrupted"
    gone = await c.request("elicitation_answer", elicitationId=data.elicitationId, action="decline")
    assert gone["code"] == "not_found"


async def test_another_tenants_answer_reads_like_a_missing_id_and_changes_nothing(harness):
    c, running, _ = await _start(harness)
    data = (await _question(c)).data
    b = await harness.client("tenant-b")
    foreign = await b.request("elicitation_answer", elicitationId=data.elicitationId, action="decline")
    absent = await b.request("elicitation_answer", elicitationId="elicit_missing", action="decline")
    assert foreign["code"] == absent["code"] == "not_found"
    assert foreign["error"].replace(data.elicitationId, "X") == absent["error"].replace("elicit_missing", "X")
    assert "tool_elicitation" not in b.types()
    await c.request(
        "elicitation_answer",
        elicitationId=data.elicitationId,
        action="accept",
        content={"name": "A", "age": 2},
    )
    await asyncio.wait_for(running, 60)
    assert _result(harness) == "accepted: A, 2"


async def test_without_a_desk_the_server_is_declined_at_once(harness):
    c, running, _ = await _start(harness)
    harness.rt.elicitations = None  # a host that keeps none (cluster nodes, AWS)
    await asyncio.wait_for(running, 60)
    assert _result(harness) == "decline", [f for f in c.session_events() if f["type"] == "mcp_server_failed"]
    assert "tool_elicitation" not in c.types()
