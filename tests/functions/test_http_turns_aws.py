"""Turns over plain HTTP on the AWS host (docs/http.md, "On AWS"): the HTTP API handler through
Mangum on moto, the turn worker fed from SQS. API Gateway cannot stream a Lambda's answer, so the
routes answer the stored frames as one SSE body: a POST whose turn still runs answers ``202`` with
where to read it, the GET answers the ended turn's frames after ``Last-Event-ID``, and a retried
POST with the same ``Idempotency-Key`` answers the first turn, never a second one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.functions.aws_stack import Stack, moto_resources

pytestmark = pytest.mark.aws

TENANT = "acme"
REPLY = "Hello from the worker Lambda"


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def _call(
    stack: Stack, method: str, path: str, token: str, body: Any = None, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return stack.http_raw(method, path, token, body, headers)


def _events(sse: str) -> list[tuple[int, dict[str, Any]]]:
    """(id, frame) of each server-sent event of a body."""
    out = []
    for block in sse.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":")
        )
        if "data" in fields:
            out.append((int(fields["id"]), json.loads(fields["data"])))
    return out


def test_a_turn_sent_over_http_is_read_back_as_one_sse_body_after_the_worker_ran_it(stack):
    token = stack.new_key(TENANT, "admin")
    created = _call(stack, "POST", "/v1/containers/user-1/sessions", token, {"name": "Helper"})
    assert created["statusCode"] == 201
    session = json.loads(created["body"])["sessionId"]

    stream = {"accept": "text/event-stream", "idempotency-key": "order-42"}
    sent = _call(stack, "POST", f"/v1/sessions/{session}/turns?wait=0", token, {"message": "hi"}, stream)
    assert sent["statusCode"] == 202  # queued on SQS: no worker has run it yet
    answer = json.loads(sent["body"])
    assert answer["status"] in ("queued", "running") and answer["created"] is True
    assert sent["headers"]["location"] == f"/v1/sessions/{session}/events"

    stack.model.add(REPLY)
    stack.run_turns()  # the SQS event source mapping hands the job to the worker Lambda

    read = _call(stack, "GET", f"/v1/sessions/{session}/events", token, headers={"last-event-id": "0"})
    assert read["statusCode"] == 200 and read["headers"]["content-type"].startswith("text/event-stream")
    events = _events(read["body"])
    ids = [i for i, _ in events]
    assert ids == sorted(set(ids)) and all(f["seq"] == i for i, f in events)  # id: is the frame's seq
    kinds = [f["type"] for _, f in events]
    assert kinds[0] == "message_persisted" and kinds[-1] == "conversation_end"
    assert "".join(f["data"]["text"] for _, f in events if f["type"] == "text_delta") == REPLY

    # Resuming after an event answers only what came after it.
    middle = ids[len(ids) // 2]
    rest = _events(
        _call(stack, "GET", f"/v1/sessions/{session}/events", token, headers={"last-event-id": str(middle)})[
            "body"
        ]
    )
    assert [i for i, _ in rest] == [i for i in ids if i > middle]

    # The same Idempotency-Key again: the first turn's frames, no second message, no second turn.
    again = _call(stack, "POST", f"/v1/sessions/{session}/turns?wait=0", token, {"message": "hi"}, stream)
    assert again["statusCode"] == 200
    assert [f["type"] for _, f in _events(again["body"])][-1] == "conversation_end"
    assert again["headers"]["x-turn-id"] == answer["turnId"]
    stack.run_turns()
    assert len(stack.model.requests) == 1  # the model ran once


def test_another_tenants_session_answers_like_a_missing_one_on_aws(stack):
    owner = stack.new_key(TENANT, "admin")
    other = stack.new_key("other-tenant", "admin")
    session = json.loads(_call(stack, "POST", "/v1/containers/u/sessions", owner, {"name": "H"})["body"])[
        "sessionId"
    ]
    for token, sid in ((other, session), (owner, "sess_missing_000000000000")):
        answers = [
            _call(stack, "POST", f"/v1/sessions/{sid}/turns?wait=0", token, {"message": "x"}),
            _call(stack, "GET", f"/v1/sessions/{sid}/events", token),
            _call(stack, "POST", f"/v1/sessions/{sid}/interrupt", token),
        ]
        assert [a["statusCode"] for a in answers] == [404, 404, 404]
        assert {json.loads(a["body"])["error"]["code"] for a in answers} == {"not_found"}
    stack.run_turns()
    assert stack.model.requests == []
