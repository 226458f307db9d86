"""``/mcp`` on the AWS host (moto): MCP JSON-RPC posts through the HTTP API function (Mangum), as
API Gateway delivers them. A ``tools/call`` enqueues its turn on the SQS FIFO queue and follows it
in the table; the turn worker runs it from the queue. The HTTP API cannot wait past API Gateway's
30 s, so a call whose turn has not ended by ``AVM_MCP_CALL_DEADLINE_S`` is answered ``isError``
naming its ``requestId``, and calling again with it returns the reply without a second turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.hosts.aws import run_sync
from agentvm.runtime import TurnSettings
from tests.functions.aws_stack import TABLE, Stack, load_event, moto_resources

pytestmark = pytest.mark.aws

CONN = "conn-1"


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        turns = TurnSettings(flush_s=0.01, mcp_call_deadline_s=0.3, mcp_poll_s=0.05)
        yield Stack(resources, context, push, turns=turns)


def mcp(
    stack: Stack, token: str | None, method: str, params: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """One JSON-RPC request to ``POST /mcp``; returns the status and the messages it answered (the
    SSE events' data, or the JSON body)."""
    event = load_event("apigw-http-get-health.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/mcp"
    event["requestContext"]["http"]["method"] = "POST"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})
    event["body"] = body
    event["headers"].update(
        {
            "content-type": "application/json",
            "content-length": str(len(body)),
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-11-25",
        }
    )
    if token is not None:
        event["headers"]["authorization"] = f"Bearer {token}"
    response = stack.http_api(event, stack.context)
    text = response.get("body") or ""
    if response["headers"].get("content-type", "").startswith("text/event-stream"):
        return response["statusCode"], [
            json.loads(line[5:])
            for line in text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    return response["statusCode"], json.loads(text) if text else None


def test_a_tools_call_on_aws_runs_its_turn_on_the_worker_and_a_retry_by_request_id_gets_the_reply(stack):
    acme, globex = stack.new_key("acme", "admin"), stack.new_key("globex", "client")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    config = {"name": "Support", "description": "Answers Acme's questions."}
    image = stack.request(CONN, "image_create", "img", containerId="user-alice", config=config)["record"]

    assert mcp(stack, None, "tools/list")[0] == 401
    status, [listed] = mcp(stack, acme, "tools/list")
    assert status == 200
    assert [t["name"] for t in listed["result"]["tools"]] == ["Support"]
    assert mcp(stack, globex, "tools/list")[1][0]["result"]["tools"] == []

    stack.model.add("Hello from the worker.")
    call = {
        "name": "Support",
        "arguments": {"message": "hi", "requestId": "r-1"},
        "_meta": {"progressToken": 7},
    }
    status, messages = mcp(stack, acme, "tools/call", call)  # no worker ran: the turn is still queued
    assert status == 200
    *progress, answer = messages
    assert [p["params"]["message"] for p in progress] == ["turn queued"]
    assert all(
        p["method"] == "notifications/progress" and p["params"]["progressToken"] == 7 for p in progress
    )
    result = answer["result"]
    assert result["isError"] is True and "still queued" in result["content"][0]["text"]
    assert result["structuredContent"]["requestId"] == "r-1"

    stack.run_turns()  # SQS hands the job to the turn worker
    _, [*progress, again] = mcp(stack, acme, "tools/call", call)
    assert [p["params"]["message"] for p in progress] == ["turn completed"]
    assert again["result"]["isError"] is False
    assert again["result"]["content"] == [{"type": "text", "text": "Hello from the worker."}]
    assert again["result"]["structuredContent"]["turnId"] == result["structuredContent"]["turnId"]
    history = run_sync(DynamoDbStore(TABLE).list_messages(image["sessionId"]))
    assert [m.subtype for m in history] == ["user", "assistant"]  # one message, one turn
    assert len(stack.model.requests) == 1

    _, [foreign] = mcp(stack, globex, "tools/call", call)  # another tenant: no such tool
    assert foreign["error"]["message"] == "Unknown tool: Support"
