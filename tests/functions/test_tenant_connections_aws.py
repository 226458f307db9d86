"""A tenant's live WebSockets on AWS are capped whatever its keys (issue 25): ``$connect`` takes a
slot of the tenant's count on the table, ``$disconnect`` gives it back
(``adapters/aws/dynamodb/tenant_connection_count.py``). On main, ``$connect`` counted nothing."""

from __future__ import annotations

import pytest

from tests.functions.aws_stack import Stack, load_event, moto_resources

pytestmark = pytest.mark.aws


@pytest.fixture
def stack(monkeypatch, context, push):
    monkeypatch.setenv("AVM_MAX_CONNECTIONS_PER_TENANT", "3")
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def _connect(stack: Stack, connection_id: str, token: str) -> dict:
    """The authorizer, then ``$connect``'s own answer (``Stack.connect`` asserts a 200)."""
    answer = stack.authorize(headers={"Authorization": f"Bearer {token}"})
    event = load_event("apigw-ws-connect.json")
    event["requestContext"]["connectionId"] = connection_id
    event["requestContext"]["authorizer"] = {**answer["context"], "principalId": answer["principalId"]}
    return stack.ws_connect(event, stack.context)


def _disconnect(stack: Stack, connection_id: str) -> None:
    event = load_event("apigw-ws-disconnect.json")
    event["requestContext"]["connectionId"] = connection_id
    assert stack.ws_disconnect(event, stack.context) == {"statusCode": 200}


def test_connect_refuses_a_tenant_past_its_cap_whatever_its_keys_until_one_disconnects(stack):
    tokens = [stack.new_key("acme", "client") for _ in range(4)]
    answers = [_connect(stack, f"conn-{i}", token) for i, token in enumerate(tokens)]
    assert answers == [{"statusCode": 200}] * 3 + [{"statusCode": 429}]
    assert _connect(stack, "globex-1", stack.new_key("globex", "client")) == {"statusCode": 200}
    _disconnect(stack, "conn-0")
    assert _connect(stack, "conn-4", tokens[3]) == {"statusCode": 200}
    assert _connect(stack, "conn-5", tokens[3]) == {"statusCode": 429}


def test_an_auth_frame_counts_a_connection_opened_without_credentials(stack):
    tokens = [stack.new_key("acme", "client") for _ in range(3)]
    for i, token in enumerate(tokens):
        assert _connect(stack, f"conn-{i}", token) == {"statusCode": 200}
    stack.connect("browser")  # no credentials: no tenant yet
    [refused] = stack.auth_frame("browser", tokens[0])
    assert refused["type"] == "system_error" and refused["data"]["details"]["code"] == "rate_limited"
    _disconnect(stack, "conn-1")
    assert stack.auth_frame("browser", tokens[0]) == []
