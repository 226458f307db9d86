"""The pieces of MCP elicitation a real server does not reach in the integration tests
(tests/integration/test_mcp_elicitation.py, test_serve_elicitation.py): a question with nobody
subscribed, one too large to show, a tenant's bound of open questions, the answer's checks
(jsonschema with formats), the tool's own timeout paused only while the user answers, and two
desks sharing one store as two processes of a host do (the answer given to the one that does not
hold the call, an answer racing the deadline, a wake-up, a Lambda's time budget)."""

from __future__ import annotations

import asyncio
import time

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
    await desk.answer("tenant-a", events[0][1]["elicitationId"], ElicitationAnswer("decline"))
    return (await running).result.content


async def test_the_tools_timeout_pauses_while_the_user_answers_and_counts_again_after():
    desk = ElicitationDesk()
    assert await _run(_AskingTool(after_s=0.1), desk, answer_after_s=1.0) == "got decline"
    # the time before and after the question still counts: 0.6 s of work past a 0.5 s timeout
    assert "timed out after 0.5 s" in await _run(_AskingTool(after_s=0.6), desk, answer_after_s=0.1)


# -- two processes on one shared store (tests/contract/test_elicitation_store_contract.py: the stores)


def _two_desks(tmp_path, **kw):
    from agentvm.adapters.local.sqlite.elicitations import SqliteElicitations

    path = tmp_path / "agentvm.db"  # each desk its own connection: two workers of one data dir
    return (
        ElicitationDesk(store=SqliteElicitations(path), poll_s=0.05, **kw),
        ElicitationDesk(store=SqliteElicitations(path), poll_s=0.05, **kw),
    )


async def _asked(asking, events):
    waiting = asyncio.create_task(asking(FORM))
    while not events:
        await asyncio.sleep(0.01)
    return waiting, events[0][1]["elicitationId"]


async def test_an_answer_given_to_another_process_reaches_the_waiting_call_once(tmp_path):
    holding, other = _two_desks(tmp_path)
    asking, events = _asking(holding)
    waiting, question = await _asked(asking, events)
    assert await other.get("tenant-b", question) is None
    assert (await other.get("tenant-a", question)).request.schema == FORM.schema
    assert await other.answer("tenant-a", question, ElicitationAnswer("accept", {"name": "Ada"})) is True
    assert await other.answer("tenant-a", question, ElicitationAnswer("decline")) is False  # once
    assert await asyncio.wait_for(waiting, 5) == ElicitationAnswer("accept", {"name": "Ada"})
    assert events[-1][1]["reason"] == "answered"
    assert await other.get("tenant-a", question) is None  # finished: a late answer is refused
    assert await other.answer("tenant-a", question, ElicitationAnswer("cancel")) is False


async def test_a_wake_reads_the_answer_before_the_next_poll(tmp_path):
    holding, other = _two_desks(tmp_path)
    holding.poll_s = 60.0  # only the wake-up can tell it in time (PostgreSQL's NOTIFY)
    asking, events = _asking(holding)
    waiting, question = await _asked(asking, events)
    await other.answer("tenant-a", question, ElicitationAnswer("decline"))
    holding.wake(question)
    assert await asyncio.wait_for(waiting, 5) == ElicitationAnswer("decline")


async def test_an_answer_stored_as_the_wait_ends_is_the_one_used(tmp_path):
    holding, other = _two_desks(tmp_path)
    holding.poll_s = 60.0
    asking, events = _asking(holding)

    async def answer_meanwhile() -> None:
        while not events:
            await asyncio.sleep(0.01)
        await other.answer("tenant-a", events[0][1]["elicitationId"], ElicitationAnswer("decline"))

    answering = asyncio.create_task(answer_meanwhile())
    holding.timeout_s = 0.3  # times out before its next read, after the answer was stored
    assert await asking(FORM) == ElicitationAnswer("decline")
    await answering
    question = events[0][1]["elicitationId"]
    assert await other.get("tenant-a", question) is None


async def test_an_interrupt_cancels_whatever_another_process_answers(tmp_path):
    holding, other = _two_desks(tmp_path)
    asking, events = _asking(holding)
    waiting, question = await _asked(asking, events)
    asking.close()
    assert await asyncio.wait_for(waiting, 5) == ElicitationAnswer("cancel")
    assert events[-1][1]["reason"] == "interrupted"
    assert await other.answer("tenant-a", question, ElicitationAnswer("decline")) is False


async def test_a_process_with_little_time_left_cuts_the_wait_or_declines():
    left = [200.0]
    desk = ElicitationDesk(timeout_s=300, wait_budget=lambda: left[0])
    assert desk.wait_s() == 200.0
    asking, events = _asking(desk)
    waiting, _ = await _asked(asking, events)
    assert 195_000 < events[0][1]["deadlineAt"] - int(time.time() * 1000) <= 200_000
    asking.close()
    await waiting
    left[0] = 5.0  # under MIN_WAIT_S: nobody can answer in time
    late, late_events = _asking(desk)
    assert await late(FORM) == ElicitationAnswer("decline") and late_events == []
