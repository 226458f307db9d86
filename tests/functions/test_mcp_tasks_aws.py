"""An MCP task that outlives the inline follow on the AWS host (moto): the turn suspends on it.

The real handlers (``$default``, the turn worker, the wait sweeper) run against
``tests/mcp_servers/tasks_server.py`` (a 2026-07-28 Tasks extension server on the official SDK) over
Streamable HTTP on loopback, with ``AVM_MCP_TASK_INLINE_S=1``. A ``survey`` whose stages take longer
than that: the worker follows its task for a second, records an ``mcp_task`` wait and returns (the
turn is ``suspended``); each run of the wait sweeper afterwards asks the server (``tasks/get``),
pushes the new stages to the session as ``tool_progress``, and once the task completed answers the
wait, which queues the continuation: the model reads the task's result. The task id (the server's
bearer token for the task) is in no frame, response or log line. An interrupt while suspended sends
``tasks/cancel`` (the server logs the task ``cancelled``); a wait past the tool's deadline is
answered ``timed_out`` by the sweeper, which cancels the task too.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentvm.adapters.aws.dynamodb.waits import DynamoDbToolWaits
from agentvm.adapters.llm.scripted import Calls
from agentvm.hosts.aws import run_sync
from agentvm.runtime import TurnSettings
from functions.wait_sweeper import app as wait_sweeper
from tests.functions.aws_stack import TABLE, Stack, moto_resources
from tests.functions.conftest import FakeLambdaContext
from tests.mcp_servers.fixtures import free_port, served_over_http

pytestmark = pytest.mark.aws

CONN = "conn-alice"
TASKS_SERVER = Path(__file__).parents[1] / "mcp_servers" / "tasks_server.py"


@pytest.fixture
def stack(monkeypatch, context, push, tmp_path):
    monkeypatch.setenv("AVM_TOOL_ALLOW_PRIVATE_NETWORKS", "true")  # the MCP server is on loopback
    monkeypatch.setenv("AVM_MCP_TASK_INLINE_S", "1")
    log = tmp_path / "tasks.log"
    log.touch()
    port = free_port()
    argv = [sys.executable, str(TASKS_SERVER), "http", str(port)]
    with (
        moto_resources(monkeypatch) as resources,
        served_over_http(argv, port, {"MCP_TASKS_LOG": str(log)}, "the tasks test server") as config,
    ):
        s = Stack(resources, context, push, turns=TurnSettings(flush_s=0.01, cancel_poll_s=0.2))
        s.tasks = config  # type: ignore[attr-defined]
        s.tasks_log = log  # type: ignore[attr-defined]
        yield s


def _start(stack: Stack, arguments: dict[str, Any], *, timeout_s: float | None = None) -> dict[str, Any]:
    """An image with the tasks server, a message whose model calls ``survey``, and the worker's run
    of the turn (it returns once the turn suspends). Returns the image."""
    acme = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    server = dict(stack.tasks)  # type: ignore[attr-defined]
    if timeout_s is not None:
        server["timeoutS"] = timeout_s
    image = stack.request(
        CONN, "image_create", "i", containerId="alice", config={"mcpServers": {"lab": server}}
    )
    assert "error" not in image, image
    stack.model.add(Calls(("survey", arguments)), "The survey is done.")
    sent = stack.request(CONN, "message_send", "m", imageId=image["record"]["imageId"], content="survey it")
    assert "error" not in sent, sent
    started = time.monotonic()
    stack.run_turns()
    assert time.monotonic() - started < 10  # the worker did not follow the task to its end
    return image["record"]


def _frames(stack: Stack, kind: str) -> list[dict[str, Any]]:
    return [f["data"] for f in stack.push.frames(CONN) if f["type"] == kind]


def _ends(stack: Stack) -> dict[str, str]:
    log: Path = stack.tasks_log  # type: ignore[attr-defined]
    return dict(line.split() for line in log.read_text().splitlines())


def _sweep(stack: Stack) -> dict[str, Any]:
    stack.clock.advance(1.0)  # past the task's poll interval (the sweeper's clock)
    if "wait_sweeper" not in stack.runtimes:
        stack.sweeper = stack.function(wait_sweeper)  # type: ignore[attr-defined]
    return stack.sweeper({"source": "agentvm.wait-sweeper"}, FakeLambdaContext())  # type: ignore[attr-defined]


def _waits(stack: Stack) -> list[dict[str, Any]]:
    return stack.request(CONN, "tool_waits", "w")["waits"]


def _sweep_until_the_turn_ends(stack: Stack) -> None:
    """Run the sweeper every 0.3 s, and the worker on what it queued, until the turn ended."""
    deadline = time.monotonic() + 30
    while not _frames(stack, "conversation_end"):
        assert time.monotonic() < deadline, stack.push.frames(CONN)
        _sweep(stack)
        stack.run_turns()  # the continuation, once the sweeper answered the wait
        time.sleep(0.3)


def test_a_long_task_suspends_the_turn_and_the_sweeper_delivers_its_progress_and_result(
    stack, caplog, capsys
):
    caplog.set_level(logging.DEBUG, logger="agentvm")
    _start(stack, {"stages": 3, "seconds": 1.5})

    [wait] = _waits(stack)  # the worker returned: the turn waits for its task
    assert (wait["kind"], wait["status"], wait["toolName"]) == ("mcp_task", "pending", "survey")
    assert wait["input"] == {"stages": 3, "seconds": 1.5} and "task" not in wait
    assert _frames(stack, "conversation_end") == []
    [suspended] = _frames(stack, "turn_suspended")
    assert [(w["kind"], w["toolCallId"]) for w in suspended["waitingFor"]] == [
        ("mcp_task", wait["toolCallId"])
    ]
    assert len(stack.model.requests) == 1
    stored = run_sync(DynamoDbToolWaits(TABLE).list_waits("acme"))
    assert stored[0].task is not None and stored[0].task["sealedTaskId"].startswith("avm-sealed:v1:")

    _sweep_until_the_turn_ends(stack)

    [task_id] = _ends(stack)
    assert _ends(stack)[task_id] == "completed"
    [result] = stack.model.requests[1].messages[-1].tool_results
    assert (result.content, result.is_error) == ("surveyed 3 stages", False)
    assert _frames(stack, "conversation_end")[-1]["reason"] == "completed"
    messages = [p["message"] for p in _frames(stack, "tool_progress")]
    assert "stage 3 of 3" in messages  # a stage only the sweeper saw (the worker left during stage 1)
    progress = [p["progress"] for p in _frames(stack, "tool_progress")]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert _waits(stack) == []
    # the task id, the server's bearer token for the task, went nowhere
    assert task_id not in json.dumps(stack.push.frames(CONN))
    assert task_id not in caplog.text
    printed = capsys.readouterr()  # the functions' JSON log lines (Powertools)
    assert "turn suspends on an MCP task" in caplog.text + printed.out + printed.err
    assert task_id not in printed.out + printed.err


def test_an_interrupt_while_suspended_cancels_the_task_on_the_server(stack):
    image = _start(stack, {"stages": 10, "seconds": 2})
    assert [w["kind"] for w in _waits(stack)] == ["mcp_task"]

    stack.request(CONN, "agent_interrupt", "x", imageId=image["imageId"])
    [(task_id, end)] = _ends(stack).items()  # the interrupt's tasks/cancel reached the server
    assert end == "cancelled"
    stack.run_turns()
    assert _frames(stack, "conversation_end")[-1]["reason"] == "interrupted"
    assert len(stack.model.requests) == 1
    assert task_id not in json.dumps(stack.push.frames(CONN))


def test_a_task_past_the_tools_deadline_times_out_and_is_cancelled(stack):
    _start(stack, {"stages": 10, "seconds": 2}, timeout_s=5)
    assert _ends(stack) == {}
    [wait] = _waits(stack)  # what is left of the call's 5 s after its 1 s inline follow
    assert 2_000 <= wait["deadlineAt"] - wait["createdAt"] <= 4_000

    stack.clock.advance(10)  # past the wait's deadline (the call's 5 s, counted from its start)
    assert _sweep(stack)["waits"] == 1
    [end] = _ends(stack).values()
    assert end == "cancelled"
    stack.run_turns()
    [result] = stack.model.requests[1].messages[-1].tool_results
    assert result.is_error and "timed out after" in result.content
    assert _frames(stack, "conversation_end")[-1]["reason"] == "completed"


def test_a_server_the_sweeper_cannot_reach_leaves_the_wait_pending_until_its_deadline(stack, tmp_path):
    port = free_port()
    argv = [sys.executable, str(TASKS_SERVER), "http", str(port)]
    with served_over_http(argv, port, {}, "a second tasks server") as config:
        stack.tasks = config  # type: ignore[attr-defined]
        _start(stack, {"stages": 10, "seconds": 2}, timeout_s=60)
    # the server is gone: the sweeper cannot ask it, and the wait waits
    assert _sweep(stack)["waits"] == 1  # polled, not answered
    [wait] = _waits(stack)
    assert wait["status"] == "pending"
    stack.run_turns()
    assert _frames(stack, "conversation_end") == [] and len(stack.model.requests) == 1

    stack.clock.advance(60)
    assert _sweep(stack)["waits"] == 1  # timed out (its tasks/cancel finds no server: best effort)
    stack.run_turns()
    [result] = stack.model.requests[1].messages[-1].tool_results
    assert result.is_error and "timed out after" in result.content


def test_a_task_that_fails_while_the_turn_waits_is_the_calls_error_result(stack):
    stack.model.add(Calls(("doomed", {"seconds": 2})), "It failed.")
    acme = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    config = {"mcpServers": {"lab": stack.tasks}}  # type: ignore[attr-defined]
    image = stack.request(CONN, "image_create", "i", containerId="alice", config=config)["record"]
    stack.request(CONN, "message_send", "m", imageId=image["imageId"], content="survey it")
    stack.run_turns()
    assert [w["kind"] for w in _waits(stack)] == ["mcp_task"]

    _sweep_until_the_turn_ends(stack)
    assert list(_ends(stack).values()) == ["failed"]
    [result] = stack.model.requests[1].messages[-1].tool_results
    assert result.is_error and result.content == "Error: the MCP task failed: the survey site is flooded"


def test_a_suspended_tasks_image_and_structured_content_reach_the_model_and_the_store(stack):
    """The sweeper keeps the task's rich result as a call followed inline does: the image is a media
    block of the result the model reads, and the stored result has it and ``structuredContent``."""
    from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
    from agentvm.llm import Attachment
    from agentvm.messages import ToolResultMessage
    from tests.mcp_servers.tasks_server import MAP_PNG

    image = _start(stack, {"stages": 2, "seconds": 1.5, "map": True})
    _sweep_until_the_turn_ends(stack)

    [result] = stack.model.requests[1].messages[-1].tool_results
    assert result.blocks == ("surveyed 2 stages", Attachment("image", "image/png", MAP_PNG))
    assert not result.is_error
    history = run_sync(DynamoDbStore(TABLE).list_messages(image["sessionId"]))
    [stored] = [m for m in history if isinstance(m, ToolResultMessage)]
    output = stored.toolResult.output
    assert output.type == "content" and output.structuredContent == {"result": "surveyed 2 stages"}
    assert output.value == [
        {"type": "text", "text": "surveyed 2 stages"},
        {"type": "media", "data": MAP_PNG, "mediaType": "image/png"},
    ]
    assert _frames(stack, "conversation_end")[-1]["reason"] == "completed"


def _start_consent(stack: Stack) -> tuple[str, dict[str, Any]]:
    """A ``consent`` task that works 2 s (past the 1 s inline follow: the turn suspends), then asks."""
    acme = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    config = {"mcpServers": {"lab": stack.tasks}}  # type: ignore[attr-defined]
    image = stack.request(CONN, "image_create", "i", containerId="alice", config=config)["record"]
    stack.model.add(Calls(("consent", {"question": "Delete the old logs?", "after": 2})), "Done.")
    stack.request(CONN, "message_send", "m", imageId=image["imageId"], content="clean up")
    stack.run_turns()
    assert [w["kind"] for w in _waits(stack)] == ["mcp_task"]
    return acme, image


def _sweep_until_asked(stack: Stack) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while not _frames(stack, "tool_elicitation"):
        assert time.monotonic() < deadline, stack.push.frames(CONN)
        _sweep(stack)
        time.sleep(0.3)
    [asked] = _frames(stack, "tool_elicitation")
    return asked


def test_a_question_a_suspended_task_asks_reaches_the_client_and_its_answer_the_task(stack):
    acme, _ = _start_consent(stack)
    globex = stack.new_key("globex", "admin")

    asked = _sweep_until_asked(stack)

    assert (asked["toolName"], asked["message"]) == ("consent", "Delete the old logs?")
    assert asked["toolId"] == _waits(stack)[0]["toolCallId"].removesuffix("#task")
    assert set(asked["requestedSchema"]["properties"]) == {"approve"}
    url = f"/v1/elicitations/{asked['elicitationId']}"
    assert stack.http("POST", url, globex, {"action": "decline"})[0] == 404  # another tenant's
    _sweep(stack)  # not answered yet: the question stays open, asked once
    assert len(_frames(stack, "tool_elicitation")) == 1
    status, body = stack.http("POST", url, acme, {"action": "accept", "content": {"approve": True}})
    assert (status, body) == (200, {"elicitationId": asked["elicitationId"], "action": "accept"})

    _sweep_until_the_turn_ends(stack)

    [result] = stack.model.requests[1].messages[-1].tool_results
    assert (result.content, result.is_error) == ("accept: {'approve': True}", False)
    [ended] = _frames(stack, "tool_elicitation_ended")
    assert (ended["elicitationId"], ended["action"], ended["reason"]) == (
        asked["elicitationId"],
        "accept",
        "answered",
    )
    assert list(_ends(stack).values()) == ["completed"]
    assert stack.http("POST", url, acme, {"action": "decline"})[0] == 404  # answered once


def test_a_question_a_suspended_task_asks_with_nobody_subscribed_is_declined(stack):
    from tests.functions.aws_stack import load_event

    _start_consent(stack)
    event = load_event("apigw-ws-disconnect.json")
    event["requestContext"]["connectionId"] = CONN
    assert stack.ws_disconnect(event, stack.context) == {"statusCode": 200}  # nobody could answer

    deadline = time.monotonic() + 30
    while _waits_of_acme():
        assert time.monotonic() < deadline
        _sweep(stack)
        stack.run_turns()
        time.sleep(0.3)

    assert _frames(stack, "tool_elicitation") == []
    assert list(_ends(stack).values()) == ["completed"]
    [result] = stack.model.requests[1].messages[-1].tool_results
    assert result.content == "decline"


def _waits_of_acme() -> list[Any]:
    return [w for w in run_sync(DynamoDbToolWaits(TABLE).list_waits("acme")) if not w.consumed]


def test_an_interrupt_while_a_suspended_task_asks_closes_the_question_and_cancels_the_task(stack):
    acme, image = _start_consent(stack)
    asked = _sweep_until_asked(stack)

    stack.request(CONN, "agent_interrupt", "x", imageId=image["imageId"])

    url = f"/v1/elicitations/{asked['elicitationId']}"
    assert stack.http("POST", url, acme, {"action": "accept", "content": {"approve": True}})[0] == 404
    assert list(_ends(stack).values()) == ["cancelled"]
    stack.run_turns()
    assert _frames(stack, "conversation_end")[-1]["reason"] == "interrupted"
