"""The config centre on the AWS host (moto): values set through the HTTP API handler reach the turn
worker's next turn (another function, another runtime: it reads the table again after
``AVM_CONFIG_CACHE_S``, 0 here), secrets are refused (provider keys stay in SSM there), and a
tenant's values and audit log are its own."""

from __future__ import annotations

import pytest

from tests.functions.aws_stack import Stack, moto_resources

pytestmark = pytest.mark.aws

CONN = "conn-1"


@pytest.fixture
def stack(monkeypatch, context, push):
    monkeypatch.setenv("AVM_CONFIG_CACHE_S", "0")
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def _turn(stack, token: str, conn: str, request_id: str) -> str:
    stack.connect(conn, headers={"Authorization": f"Bearer {token}"})
    image = stack.request(conn, "image_create", f"img-{request_id}", containerId="c", config={"name": "x"})[
        "record"
    ]
    stack.model.add("ok")
    stack.request(conn, "message_send", request_id, imageId=image["imageId"], content="hi")
    stack.run_turns()
    return stack.model.requests[-1].model


def test_a_put_through_the_http_handler_changes_the_workers_next_turn(stack):
    platform = stack.new_key("platform", "admin")
    acme = stack.new_key("acme", "admin")
    assert _turn(stack, acme, CONN, "r1") == "test-1"
    status, body = stack.http(
        "PUT", "/v1/config/llm.defaultModel", platform, {"scope": "server", "value": "scripted/big"}
    )
    assert status == 200 and body["source"] == "server", body
    assert _turn(stack, acme, CONN, "r2") == "big"

    status, body = stack.http("PUT", "/v1/config", acme, {"values": {"llm.defaultModel": "scripted/acme"}})
    assert status == 200 and body["settings"]["llm.defaultModel"]["source"] == "tenant"
    assert _turn(stack, acme, CONN, "r3") == "acme"
    other = stack.new_key("globex", "admin")
    assert _turn(stack, other, "conn-2", "r4") == "big"
    status, audit = stack.http("GET", "/v1/config/audit", other)
    assert status == 200 and audit == {"changes": []}
    status, audit = stack.http("GET", "/v1/config/audit", acme)
    assert [c["new"] for c in audit["changes"]] == ["scripted/acme"]


def test_secrets_are_refused_on_aws_and_bad_values_name_the_key(stack):
    platform = stack.new_key("platform", "admin")
    status, body = stack.http(
        "PUT",
        "/v1/config",
        platform,
        {"scope": "server", "values": {"llm.anthropic.apiKey": "sk-ant-xyz-123"}},
    )
    assert (
        status == 400 and body["error"]["key"] == "llm.anthropic.apiKey" and "SSM" in body["error"]["message"]
    )
    assert "sk-ant-xyz-123" not in str(body)
    status, body = stack.http(
        "PUT", "/v1/config/turns.deadlineS", platform, {"scope": "server", "value": "soon"}
    )
    assert status == 400 and body["error"]["key"] == "turns.deadlineS"
    status, body = stack.http("GET", "/v1/config?scope=server", platform)
    assert status == 200 and body == {"settings": {}}
