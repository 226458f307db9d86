"""The pieces of a turn suspended on an MCP task (``turns/mcp_tasks.py``): how long a call follows
its task inline, the sealed task id (bound to its tenant, turn and call; never on the wire), what the
model reads when the wait times out, and that nobody answers such a wait but the task itself. The
whole flow, on the AWS handlers against a real server: ``tests/functions/test_mcp_tasks_aws.py``."""

from __future__ import annotations

import base64

import pytest

from agentvm.configcentre.sealing import SecretSealer, SecretUnreadable
from agentvm.errors import BadRequest
from agentvm.llm import Attachment, blocks_text
from agentvm.ports import ElicitationAnswer, McpTaskHandedOff, McpTaskSuspension
from agentvm.records import TASK_SUFFIX, ToolWait, TurnJob
from agentvm.turns.mcp_tasks import sealed_name, task_of_wait
from agentvm.turns.waits import answer, resolution_of

TASK_ID = "tk_0123456789abcdefghij"
SEALER = SecretSealer(lambda: [b"a-server-secret-of-enough-length-0123456789"])


def _job(turn_id: str = "turn_1", tenant: str = "acme") -> TurnJob:
    return TurnJob(
        turnId=turn_id,
        tenantId=tenant,
        containerId="alice",
        imageId="img_1",
        sessionId="sess_1",
        agentId="agent_1",
        userMessageId="msg_1",
        requestId="req_1",
        enqueuedAt=0,
    )


def _handoff() -> McpTaskHandedOff:
    handoff = McpTaskHandedOff(TASK_ID, poll_ms=5000, message="stage 1 of 3", reports=2)
    handoff.server, handoff.remaining_s = "lab", 40.0
    return handoff


def _wait(job: TurnJob, task: dict, status: str = "pending") -> ToolWait:
    return ToolWait(
        tenantId=job.tenantId,
        containerId=job.containerId,
        imageId=job.imageId,
        sessionId=job.sessionId,
        turnId=job.turnId,
        toolCallId="call_1" + TASK_SUFFIX,
        toolName="survey",
        input={"stages": 3},
        kind="mcp_task",
        status=status,
        createdAt=1_000,
        deadlineAt=61_000,
        checkAt=6_000,
        job=job,
        task=task,
    )


def test_a_call_follows_its_task_the_setting_or_what_the_invocation_has_left_whichever_is_less():
    assert McpTaskSuspension(SEALER, 20.0).follow_for_s() == 20.0  # not in an invocation
    assert McpTaskSuspension(SEALER, 20.0, lambda: None).follow_for_s() == 20.0
    assert McpTaskSuspension(SEALER, 20.0, lambda: 7.5).follow_for_s() == 7.5
    assert McpTaskSuspension(SEALER, 20.0, lambda: 0.0).follow_for_s() == 0.0


def test_the_task_id_is_sealed_on_the_wait_bound_to_its_call_and_never_on_the_wire():
    job = _job()
    task = task_of_wait(McpTaskSuspension(SEALER), job, "call_1" + TASK_SUFFIX, _handoff(), now_ms=1_000)
    assert TASK_ID not in str(task) and task["sealedTaskId"].startswith("avm-sealed:v1:")
    assert (task["server"], task["pollMs"], task["pollAt"]) == ("lab", 5000, 6_000)
    assert (task["reports"], task["message"]) == (2, "stage 1 of 3")
    wait = _wait(job, task)
    assert SEALER.open(sealed_name("acme", "turn_1", wait.toolCallId), task["sealedTaskId"]) == TASK_ID
    # moved to another call, turn or tenant, it does not open
    for name in (
        sealed_name("acme", "turn_1", "call_2" + TASK_SUFFIX),
        sealed_name("acme", "turn_2", wait.toolCallId),
        sealed_name("globex", "turn_1", wait.toolCallId),
    ):
        with pytest.raises(SecretUnreadable):
            SEALER.open(name, task["sealedTaskId"])
    wire = wait.to_wire()
    assert "task" not in wire and task["sealedTaskId"] not in str(wire)
    assert wait.callId == "call_1"  # the model's call id, as a sandbox job's wait keeps it
    assert TASK_ID not in repr(_handoff()) and TASK_ID not in str(_handoff())


def test_a_task_wait_past_its_deadline_is_a_timeout_result_for_the_model():
    task = task_of_wait(McpTaskSuspension(SEALER), _job(), "call_1#task", _handoff(), now_ms=1_000)
    resolution = resolution_of(_wait(_job(), task, status="timed_out"))
    assert resolution.action == "result" and resolution.run is not None
    result = resolution.run.result
    assert (result.call_id, result.is_error) == ("call_1", True)
    assert result.content == "Error: survey timed out after 60 s (its MCP task was cancelled)"


async def test_nobody_answers_a_task_wait_but_its_task(harness):
    job = _job(tenant="default")
    task = task_of_wait(McpTaskSuspension(SEALER), job, "call_1#task", _handoff(), now_ms=1_000)
    assert harness.rt.waits is not None
    await harness.rt.waits.put_wait(_wait(job, task))
    for kind in ("client", "approval"):
        with pytest.raises(BadRequest, match="its result comes from the tool itself"):
            await answer(
                harness.rt,
                "default",
                "turn_1",
                "call_1#task",
                kind=kind,
                status="answered",
                by=None,
                output="x",
            )
    [wait] = await harness.rt.waits.turn_waits("turn_1")
    assert wait.status == "pending"


def test_a_call_hands_its_task_off_before_the_turns_own_deadline():
    from types import SimpleNamespace

    from agentvm.runtime import TurnSettings
    from agentvm.turns.worker import _inline_follow
    from tests.security_harness import ManualClock

    clock = ManualClock()
    rt = SimpleNamespace(turns=TurnSettings(turn_deadline_s=60), clock=clock)
    follow = _inline_follow(rt, McpTaskSuspension(SEALER, 20.0))  # type: ignore[arg-type]
    assert follow() == 20.0
    clock.advance(40)  # 20 s of the turn left, less the 5 s margin
    assert follow() == 15.0
    clock.advance(30)
    assert follow() == 0.0
    unbounded = SimpleNamespace(turns=TurnSettings(turn_deadline_s=0), clock=clock)
    assert _inline_follow(unbounded, McpTaskSuspension(SEALER, 20.0))() == 20.0  # type: ignore[arg-type]


def test_a_task_waits_rich_result_is_the_continuations_result_media_and_structured_content():
    png = "iVBORw0KGgo="
    content = [{"type": "text", "text": "surveyed"}, {"type": "media", "data": png, "mediaType": "image/png"}]
    task = task_of_wait(McpTaskSuspension(SEALER), _job(), "call_1#task", _handoff(), now_ms=1_000)
    answered = _wait(_job(), task, status="answered").model_copy(
        update={"output": "surveyed [image]", "content": content, "structured": {"sites": 3}}
    )
    resolution = resolution_of(answered)
    assert resolution.run is not None
    result = resolution.run.result
    assert result.blocks == ("surveyed", Attachment("image", "image/png", png))
    assert result.content == blocks_text(result.blocks) and not result.is_error
    assert resolution.run.structured == {"sites": 3}
    assert "content" not in answered.to_wire() and png not in str(answered.to_wire())


def test_a_tasks_media_is_held_to_the_hosts_limits_when_its_wait_is_answered():
    from types import SimpleNamespace

    from agentvm.ports import ToolOutput
    from agentvm.turns.mcp_tasks import _content

    small = Attachment("image", "image/png", base64.b64encode(b"x" * 30).decode())
    large = Attachment("image", "image/png", base64.b64encode(b"x" * 300).decode())
    limits = SimpleNamespace(max_output_chars=100, max_media_block_bytes=100, max_media_result_bytes=1000)
    rt = SimpleNamespace(tools=limits)
    parts = _content(rt, ToolOutput("t", blocks=("map:", small, large)))  # type: ignore[arg-type]
    assert parts[:2] == [
        {"type": "text", "text": "map:"},
        {"type": "media", "data": small.data, "mediaType": "image/png"},
    ]
    assert parts[2]["type"] == "text" and "not sent: over the" in parts[2]["text"]
    assert _content(rt, ToolOutput("t", is_error=True, blocks=("x", small))) == []  # type: ignore[arg-type]


class _AnsweringSession:
    """The ``tasks/update`` calls a sweep makes (``McpSession.answer_task``)."""

    def __init__(self) -> None:
        self.updates: list[dict[str, str]] = []

    async def answer_task(self, task_id: str, answers: dict) -> None:
        self.updates.append({key: answer.action for key, answer in answers.items()})


async def test_a_suspended_task_asking_without_end_gets_a_bounded_number_of_questions(harness):
    from agentvm.adapters.local.sqlite.elicitations import SqliteElicitations
    from agentvm.agent.tools.elicitation import ElicitationDesk
    from agentvm.ports import ConnectionInfo, ElicitationRequest, McpTaskState
    from agentvm.turns.mcp_tasks import MAX_QUESTION_KEY_CHARS, MAX_QUESTIONS, _questions

    rt = harness.rt
    store = SqliteElicitations(":memory:")
    rt.elicitations = ElicitationDesk(store=store, now_ms=rt.clock.now_ms)
    await rt.connections.register(ConnectionInfo("c", "default", 0))
    await rt.connections.subscribe("c", "sess_1")
    frames: list[str] = []

    async def receive(payload: str) -> None:
        frames.append(payload)

    harness.push.attach("c", receive)
    job = _job(tenant="default")
    wait = _wait(job, {"server": "lab"})
    wait.deadlineAt = rt.clock.now_ms() + 60_000
    asked = {f"q{i}": ElicitationRequest(f"question {i}") for i in range(MAX_QUESTIONS + 5)}
    asked["k" * (MAX_QUESTION_KEY_CHARS + 1)] = ElicitationRequest("a key too long to keep")
    session = _AnsweringSession()

    task = await _questions(rt, wait, session, TASK_ID, McpTaskState("input_required", questions=asked), {})

    assert (len(task["asked"]), task["answered"], session.updates) == (
        MAX_QUESTIONS,
        [],
        [],
    )  # the rest: left
    assert await store.open_count("default", rt.clock.now_ms()) == MAX_QUESTIONS
    assert sum("tool_elicitation" in f for f in frames) == MAX_QUESTIONS
    assert session.updates == []  # nothing answered yet
    first = task["asked"]["q0"]
    assert await rt.elicitations.answer("default", first, ElicitationAnswer("decline"))
    wait.task = task
    again = await _questions(
        rt, wait, session, TASK_ID, McpTaskState("input_required", questions=asked), task
    )
    assert session.updates == [{"q0": "decline"}]  # one tasks/update with the answer given
    assert "q0" not in again["asked"] and again["answered"] == ["q0"]
    assert len(again["asked"]) == MAX_QUESTIONS - 1  # and still no more questions than the bound


async def test_an_answer_the_server_could_not_take_is_sent_again_at_the_next_sweep(harness):
    from agentvm.adapters.local.sqlite.elicitations import SqliteElicitations
    from agentvm.agent.tools.elicitation import ElicitationDesk
    from agentvm.ports import ElicitationRequest, McpTaskState
    from agentvm.turns.mcp_tasks import _questions

    class Unreachable(_AnsweringSession):
        async def answer_task(self, task_id: str, answers: dict) -> None:
            raise OSError("the server is away")

    rt = harness.rt
    rt.elicitations = ElicitationDesk(store=SqliteElicitations(":memory:"), now_ms=rt.clock.now_ms)
    wait = _wait(_job(tenant="default"), {"server": "lab"})  # nobody subscribed: declined at once
    state = McpTaskState("input_required", questions={"q": ElicitationRequest("OK?")})

    task = await _questions(rt, wait, Unreachable(), TASK_ID, state, {})
    assert (task["asked"], task["answered"]) == ({}, [])  # not recorded: decided again next sweep
    session = _AnsweringSession()
    task = await _questions(rt, wait, session, TASK_ID, state, task)
    assert (session.updates, task["answered"]) == ([{"q": "decline"}], ["q"])
