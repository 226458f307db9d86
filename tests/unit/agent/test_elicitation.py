"""The pieces of MCP elicitation a real server does not reach in the integration tests
(tests/integration/test_mcp_elicitation.py, test_serve_elicitation.py): a question with nobody
subscribed, one too large to show, a tenant's bound of open questions, the answer's checks
(jsonschema with formats), and the tool's own timeout paused only while the user answers."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.agent.tools.elicitation import (
    MAX_SCHEMA_BYTES,
    CallElicitation,
    ElicitationDesk,
    ElicitationScope,
    content_problem,
)
from agentvm.agent.tools.reports import ToolReports
from agentvm.agent.tools.toolbox import Toolbox
from agentvm.errors import BadRequest, NotFound
from agentvm.llm import ToolCall, ToolSpec
from agentvm.ports import ElicitationAnswer, ElicitationOwner, ElicitationRequest, ToolOutput
from agentvm.turns.elicitations import answer_elicitation

OWNER = ElicitationOwner("tenant-a", "u1", "sess_1", "turn_1")
FORM = ElicitationRequest(
    "Your name?",
    schema={
        "type": "object",
        "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
        "required": ["name"],
    },
)


def _asking(desk, *, has_client=True, reports=None):
    async def listening() -> bool:
        return has_client

    reports = reports or ToolReports()
    events: list[tuple[str, dict]] = []
    reports.attach(lambda kind, data: events.append((kind, data)))
    return CallElicitation(ElicitationScope(desk, OWNER, listening), reports, "call_1", "ask"), events


async def test_nobody_subscribed_is_a_decline_at_once_with_no_event():
    desk = ElicitationDesk()
    asking, events = _asking(desk, has_client=False)
    assert await asking(FORM) == ElicitationAnswer("decline")
    assert events == [] and desk.open_count("tenant-a") == 0


async def test_a_schema_too_large_to_show_is_declined_at_once():
    asking, events = _asking(ElicitationDesk())
    huge = {
        "type": "object",
        "properties": {f"f{i}": {"type": "string"} for i in range(MAX_SCHEMA_BYTES // 20)},
    }
    assert await asking(ElicitationRequest("?", schema=huge)) == ElicitationAnswer("decline")
    assert events == []


async def test_past_the_tenants_bound_of_open_questions_the_next_is_declined():
    desk = ElicitationDesk(max_per_tenant=1)
    first, _ = _asking(desk)
    waiting = asyncio.create_task(first(FORM))
    while desk.open_count("tenant-a") == 0:
        await asyncio.sleep(0)
    second, events = _asking(desk)
    assert await second(FORM) == ElicitationAnswer("decline") and events == []
    first.close()  # the first call ended: its question answers cancel
    assert (await waiting).action == "cancel"


async def test_an_answer_is_checked_and_only_the_owner_tenant_reaches_the_question(harness):
    desk = harness.rt.elicitations = ElicitationDesk()
    rt = harness.rt
    asking, events = _asking(desk)
    waiting = asyncio.create_task(asking(FORM))
    while not events:
        await asyncio.sleep(0)
    kind, data = events[0]
    question = data["elicitationId"]
    assert (
        kind == "tool_elicitation" and data["requestedSchema"] == FORM.schema and data["toolId"] == "call_1"
    )
    with pytest.raises(NotFound):
        await answer_elicitation(rt, "tenant-b", question, "decline")
    with pytest.raises(BadRequest, match="is not a 'email'"):
        await answer_elicitation(rt, "tenant-a", question, "accept", {"name": "A", "email": "nope"})
    with pytest.raises(BadRequest, match="carries no content"):
        await answer_elicitation(rt, "tenant-a", question, "decline", {"name": "A"})
    done = await answer_elicitation(rt, "tenant-a", question, "accept", {"name": "A", "email": "a@b.co"})
    assert done == {"elicitationId": question, "action": "accept"}
    assert await waiting == ElicitationAnswer("accept", {"name": "A", "email": "a@b.co"})
    assert events[-1] == (
        "tool_elicitation_ended",
        {
            "elicitationId": question,
            "toolId": "call_1",
            "toolName": "ask",
            "action": "accept",
            "reason": "answered",
        },
    )
    with pytest.raises(NotFound):  # answered: gone
        await answer_elicitation(rt, "tenant-a", question, "cancel")


def test_content_problems_name_the_field_and_a_broken_schema_is_said_so():
    assert content_problem(FORM.schema, {"name": "x"}) is None
    assert "'name' is a required property" in (content_problem(FORM.schema, {}) or "")
    assert "not valid JSON Schema" in (content_problem({"type": "no-such-type"}, {}) or "")


class _AskingTool:
    """A tool that asks the user (as an MCP tool's server would), then works ``after_s``."""

    spec = ToolSpec("ask", "asks", {"type": "object"})
    timeout_s = 0.5
    idempotent = False

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s

    async def call(self, arguments):
        from agentvm.agent.tools.elicitation import current_elicitation

        asking = current_elicitation()
        assert asking is not None
        answer = await asking(FORM)
        await asyncio.sleep(self.after_s)
        return ToolOutput(f"got {answer.action}")


async def _run(tool, desk, *, answer_after_s: float):
    box = Toolbox([tool])
    events: list[tuple[str, dict]] = []
    box.reports.attach(lambda kind, data: events.append((kind, data)))

    async def listening() -> bool:
        return True

    box.elicitation = ElicitationScope(desk, OWNER, listening)
    running = asyncio.create_task(box.run(ToolCall("call_1", "ask", {})))
    while not events:
        await asyncio.sleep(0.01)
    await asyncio.sleep(answer_after_s)
    desk.answer("tenant-a", events[0][1]["elicitationId"], ElicitationAnswer("decline"))
    return (await running).result.content


async def test_the_tools_timeout_pauses_while_the_user_answers_and_counts_again_after():
    desk = ElicitationDesk()
    assert await _run(_AskingTool(after_s=0.1), desk, answer_after_s=1.0) == "got decline"
    # the time before and after the question still counts: 0.6 s of work past a 0.5 s timeout
    assert "timed out after 0.5 s" in await _run(_AskingTool(after_s=0.6), desk, answer_after_s=0.1)
