"""An MCP server's question on the AWS host (moto): the turn worker Lambda holds the MCP call (the
test server's ``ask`` tool, official SDK, over Streamable HTTP on loopback) while the answer arrives
at the HTTP API Lambda. The two share nothing in memory: the question and its answer are an item of
the DynamoDB table, which the worker reads every 0.5 s. A worker with too little of its invocation
left declines the question at once.

The worker runs in a thread with its own event loop (a Lambda of its own), as in
``test_interrupt_aws.py``; the answer is posted from the test's thread through the HTTP API handler.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentvm.adapters.llm.scripted import Calls
from functions.turn_worker import app as turn_worker
from tests.functions.aws_stack import Stack, moto_resources
from tests.functions.conftest import FakeLambdaContext
from tests.mcp_servers.fixtures import http_server

pytestmark = pytest.mark.aws

CONN = "conn-alice"
CONTENT = {"name": "Ada", "age": 36}


class EndingContext(FakeLambdaContext):
    """An invocation with 15 s left: less than the reserve a question's wait keeps for the turn."""

    def get_remaining_time_in_millis(self) -> int:
        return 15_000


@pytest.fixture
def stack(monkeypatch, context, push):
    from agentvm.runtime import TurnSettings

    monkeypatch.setenv("AVM_TOOL_ALLOW_PRIVATE_NETWORKS", "true")  # the MCP server is on loopback
    monkeypatch.setattr(turn_worker, "run_sync", lambda coro: asyncio.run(coro))
    with moto_resources(monkeypatch) as resources, http_server() as people:
        s = Stack(resources, context, push, turns=TurnSettings(flush_s=0.01))
        s.people = people  # type: ignore[attr-defined]
        yield s


def _ask(stack: Stack, token: str) -> tuple[dict[str, Any], threading.Thread]:
    servers = {"people": stack.people}  # type: ignore[attr-defined]
    image = stack.request(CONN, "image_create", "i", containerId="alice", config={"mcpServers": servers})
    assert "error" not in image, image
    stack.model.add(Calls(("ask", {"question": "Who are you?"})), "Thanks.")
    sent = stack.request(CONN, "message_send", "m", imageId=image["record"]["imageId"], content="ask me")
    assert "error" not in sent, sent
    worker = threading.Thread(target=stack.run_turns)
    worker.start()
    return image["record"], worker


def _frames(stack: Stack, kind: str) -> list[dict[str, Any]]:
    return [f["data"] for f in stack.push.frames(CONN) if f["type"] == kind]


def _tool_result(stack: Stack) -> str:
    [result] = stack.model.requests[1].messages[-1].tool_results
    return result.content


def test_the_answer_posted_to_the_http_api_reaches_the_workers_pending_call(stack):
    acme, globex = stack.new_key("acme", "admin"), stack.new_key("globex", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    _, worker = _ask(stack, acme)
    deadline = time.monotonic() + 60
    while not _frames(stack, "tool_elicitation"):
        assert time.monotonic() < deadline and worker.is_alive(), stack.push.frames(CONN)
        time.sleep(0.05)
    [asked] = _frames(stack, "tool_elicitation")
    assert asked["toolName"] == "ask" and set(asked["requestedSchema"]["properties"]) == {"name", "age"}
    url = f"/v1/elicitations/{asked['elicitationId']}"

    # another tenant: exactly as an id that does not exist
    foreign = stack.http("POST", url, globex, {"action": "decline"})
    missing = stack.http("POST", "/v1/elicitations/elicit_missing_0000", globex, {"action": "decline"})
    assert foreign[0] == missing[0] == 404
    assert str(foreign[1]).replace(asked["elicitationId"], "X") == str(missing[1]).replace(
        "elicit_missing_0000", "X"
    )
    # content the server's schema refuses: 400, and the question stays open
    assert (
        stack.http("POST", url, acme, {"action": "accept", "content": {"name": "Ada", "age": -1}})[0] == 400
    )

    status, body = stack.http("POST", url, acme, {"action": "accept", "content": CONTENT})
    assert (status, body) == (200, {"elicitationId": asked["elicitationId"], "action": "accept"})
    assert stack.http("POST", url, acme, {"action": "decline"})[0] == 404  # taken once
    worker.join(60)
    assert not worker.is_alive()

    assert _tool_result(stack) == "accepted: Ada, 36"
    [ended] = _frames(stack, "tool_elicitation_ended")
    assert (ended["action"], ended["reason"]) == ("accept", "answered")
    assert _frames(stack, "conversation_end")[-1]["reason"] == "completed"
    assert stack.http("POST", url, acme, {"action": "decline"})[0] == 404  # the wait ended


def test_a_worker_near_the_end_of_its_invocation_declines_the_question_at_once(stack):
    acme = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    stack.context = EndingContext()
    _, worker = _ask(stack, acme)
    worker.join(60)
    assert not worker.is_alive()
    assert _tool_result(stack) == "decline"
    assert _frames(stack, "tool_elicitation") == []
