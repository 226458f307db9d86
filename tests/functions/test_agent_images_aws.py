"""Images from agent resources on the AWS host (moto): resources published through the HTTP API
handler, the image built over the WebSocket handler, turns run by the worker handler, and the
rebuild through ``POST /v1/images/{imageId}/rebuild``. The model sees the pinned prompt until the
rebuild, and the knowledge search tool answers from DynamoDB. The local twin is
``tests/unit/images/test_agent_images.py``."""

from __future__ import annotations

from typing import Any

import pytest

from agentvm.adapters.llm.scripted import Calls
from tests.functions.aws_stack import Stack, moto_resources

pytestmark = pytest.mark.aws

CONN = "conn-1"


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


@pytest.fixture
def admin(stack) -> str:
    token = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {token}"})
    return token


def publish(stack, token: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = stack.http("POST", "/v1/resources", token, body)
    assert status == 201, answer
    return answer["resource"]


def persona(text: str) -> dict[str, Any]:
    return {
        "kind": "prompt",
        "name": "persona",
        "spec": {"template": f"You are {{{{who}}}}. {text}", "variables": {"who": {"type": "string"}}},
    }


def turn(stack, image: dict[str, Any], request_id: str) -> Any:
    stack.model.add("ok")
    answer = stack.request(CONN, "message_send", request_id, imageId=image["imageId"], content="hi")
    assert "error" not in answer, answer
    stack.run_turns()
    return stack.model.requests[-1]


def test_a_built_image_runs_its_pinned_prompt_until_rebuilt_over_http(stack, admin):
    publish(stack, admin, persona("Version one."))
    publish(
        stack,
        admin,
        {"kind": "tool", "name": "calc", "spec": {"tool": {"type": "builtin", "name": "calculator"}}},
    )
    agent = {
        "prompt": {"uri": "resource://prompts/persona", "arguments": {"who": "Ada"}},
        "tools": ["resource://tools/calc@1"],
    }
    publish(stack, admin, {"kind": "agent", "name": "helper", "spec": agent})
    image = stack.request(
        CONN, "image_create", "img", containerId="alice", config={"agent": "resource://agents/helper@1"}
    )["record"]
    first = turn(stack, image, "r1")
    assert first.system == "You are Ada. Version one." and [t.name for t in first.tools] == ["calculator"]

    publish(stack, admin, persona("Version two."))
    assert turn(stack, image, "r2").system == "You are Ada. Version one."

    status, refused = stack.http("DELETE", "/v1/resources/prompts/persona@1", admin)
    assert status == 409 and refused["error"]["code"] == "resource_in_use"
    assert f"image:{image['imageId']}" in refused["error"]["dependents"]

    status, rebuilt = stack.http("POST", f"/v1/images/{image['imageId']}/rebuild", admin, {})
    assert status == 200, rebuilt
    assert "resource://prompts/persona@2" in rebuilt["record"]["build"]["pins"]
    assert len(rebuilt["record"]["build"]["history"]) == 2
    assert turn(stack, image, "r3").system == "You are Ada. Version two."
    status, _ = stack.http("DELETE", "/v1/resources/prompts/persona@1", admin)
    assert status == 200  # nothing holds v1 any more


def test_the_knowledge_search_tool_answers_from_the_published_version(stack, admin):
    docs = [
        {
            "id": "billing",
            "title": "Billing",
            "text": "Refunds are paid back to the original card in 5 days.",
        },
        {"id": "shipping", "title": "Shipping", "text": "Orders ship from Rotterdam in two days."},
    ]
    publish(stack, admin, {"kind": "knowledge", "name": "handbook", "spec": {"documents": docs}})
    publish(
        stack,
        admin,
        {"kind": "agent", "name": "support", "spec": {"knowledge": ["resource://knowledge/handbook"]}},
    )
    status, found = stack.http(
        "POST",
        "/v1/resources/search",
        admin,
        {"uri": "resource://knowledge/handbook", "query": "refund card"},
    )
    assert status == 200 and [h["documentId"] for h in found["hits"]] == ["billing"]

    image = stack.request(
        CONN, "image_create", "img", containerId="alice", config={"agent": "resource://agents/support"}
    )["record"]
    stack.model.add(Calls(("search_handbook", {"query": "refund to my card"})), "5 days.")
    stack.request(CONN, "message_send", "r1", imageId=image["imageId"], content="Refunds?")
    stack.run_turns()
    (result,) = stack.model.requests[-1].messages[-1].tool_results
    assert result.content.startswith("[1] Billing, id billing") and "Rotterdam" not in result.content


def test_another_tenant_cannot_build_rebuild_or_search_what_is_not_theirs(stack, admin):
    publish(stack, admin, {"kind": "agent", "name": "helper", "spec": {"systemPrompt": "A's secret prompt"}})
    image = stack.request(
        CONN, "image_create", "img", containerId="alice", config={"agent": "resource://agents/helper"}
    )["record"]
    other = stack.new_key("globex", "admin")
    stack.connect("conn-b", headers={"Authorization": f"Bearer {other}"})
    answer = stack.request(
        "conn-b", "image_create", "b1", containerId="b", config={"agent": "resource://agents/helper"}
    )
    assert answer["code"] == "not_found"
    status, body = stack.http("POST", f"/v1/images/{image['imageId']}/rebuild", other, {})
    assert status == 404 and "secret" not in str(body)
    status, body = stack.http("GET", "/v1/resources/agents/helper", other)
    assert status == 404


def test_every_resource_route_answers_through_the_lambda_handler(stack, admin):
    publish(stack, admin, persona("One."))
    status, second = stack.http(
        "PUT", "/v1/resources/prompts/persona", admin, {"spec": persona("Two.")["spec"], "tags": ["stable"]}
    )
    assert status == 201 and second["resource"]["version"] == "2"
    status, listed = stack.http("GET", "/v1/resources?kind=prompt&limit=1", admin)
    assert (
        status == 200 and [r["name"] for r in listed["resources"]] == ["persona"] and listed["next"] is None
    )
    status, head = stack.http("GET", "/v1/resources/prompts/persona", admin)
    assert [v["version"] for v in head["versions"]] == ["1", "2"] and head["resource"]["tags"] == {
        "stable": "2"
    }
    status, tagged = stack.http(
        "POST", "/v1/resources/tags", admin, {"uri": "resource://prompts/persona@1", "tag": "stable"}
    )
    assert status == 200 and tagged["resource"]["tags"] == {"stable": "1"}
    status, one = stack.http("GET", "/v1/resources/prompts/persona@stable", admin)
    assert one["resource"]["uri"] == "resource://prompts/persona@1"
    status, rendered = stack.http(
        "POST",
        "/v1/resources/render",
        admin,
        {"uri": "resource://prompts/persona", "arguments": {"who": "Bo"}},
    )
    assert rendered["text"] == "You are Bo. Two."
    publish(
        stack,
        admin,
        {
            "kind": "agent",
            "name": "a",
            "spec": {"prompt": {"uri": "resource://prompts/persona@stable", "arguments": {"who": "x"}}},
        },
    )
    status, resolved = stack.http("GET", "/v1/resources/resolve?uri=resource://agents/a", admin)
    assert status == 200 and resolved["dependencies"]["resource://prompts/persona@stable"]["version"] == "1"
    status, bad = stack.http("GET", "/v1/resources/resolve?uri=resource://widgets/a", admin)
    assert status == 400 and bad["error"]["code"] == "invalid_uri"
    status, cyc = stack.http("DELETE", "/v1/resources/prompts/persona@1", admin)
    assert status == 409 and "resource://agents/a@1" in cyc["error"]["dependents"]
