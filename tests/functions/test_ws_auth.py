"""API keys, tenancy, rate limits and budgets on the AWS host, through the real handlers on moto.

The ``$connect`` authorizer allows or denies the upgrade; ``$connect`` registers what it allowed;
``$default`` holds unauthenticated connections to the ``auth`` frame, re-checks keys (revocation)
and enforces limits; the HTTP API manages keys and budgets. See ``aws_stack`` for the wiring.
"""

from __future__ import annotations

import json
import logging

import pytest

from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.hosts.aws import run_sync
from agentvm.ports import ConnectionInfo
from agentvm.security.apikeys import key_id_of
from tests.functions.aws_stack import AUTH_SECRET, METHOD_ARN, TABLE, Stack, frame, moto_resources

pytestmark = pytest.mark.aws

KEY_CACHE_S = 5  # a small revocation bound, so the test can step over it


@pytest.fixture
def stack(monkeypatch, context, push):
    monkeypatch.setenv("AVM_KEY_CACHE_S", str(KEY_CACHE_S))
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def _effect(answer: dict) -> str:
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke" and statement["Resource"] == METHOD_ARN
    return statement["Effect"]


def _registered(connection_id: str) -> ConnectionInfo | None:
    return run_sync(DynamoDbConnections(TABLE).get(connection_id))


def _error_codes(frames: list[dict]) -> list[tuple[str, str]]:
    out = []
    for f in frames:
        data = f["data"]
        out.append((f["type"], data["details"]["code"] if f["type"] == "system_error" else data.get("code")))
    return out


# -- the $connect authorizer --------------------------------------------------------------------


def test_authorizer_allows_a_key_in_the_header_with_its_tenant_and_key(stack):
    token = stack.new_key("acme", "client")
    key_id = token.split("_")[1]
    answer = stack.authorize(headers={"Authorization": f"Bearer {token}"})
    assert _effect(answer) == "Allow"
    assert answer["principalId"] == key_id
    assert answer["context"] == {"tenantId": "acme", "keyId": key_id}


def test_authorizer_allows_a_key_in_the_token_query_parameter(stack):
    token = stack.new_key("acme", "admin")  # admin includes client
    answer = stack.authorize(query={"token": token})
    assert _effect(answer) == "Allow"
    assert answer["context"] == {"tenantId": "acme", "keyId": token.split("_")[1]}


def test_authorizer_allows_an_upgrade_without_credentials_with_an_empty_context(stack):
    answer = stack.authorize()  # a browser: it authenticates with an `auth` frame once connected
    assert _effect(answer) == "Allow"
    assert not answer.get("context")
    assert answer["principalId"] == "anonymous"


def _wrong_secret(token: str) -> str:
    return token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")


@pytest.mark.parametrize(
    "credentials",
    [
        pytest.param(
            lambda t: {"headers": {"Authorization": "Bearer avm_zzzzzzzzzzzz_" + "x" * 43}}, id="unknown"
        ),
        pytest.param(
            lambda t: {"headers": {"Authorization": f"Bearer {_wrong_secret(t)}"}}, id="wrong-secret"
        ),
        pytest.param(lambda t: {"query": {"token": _wrong_secret(t)}}, id="wrong-secret-query"),
        pytest.param(lambda t: {"headers": {"Authorization": f"Basic {t}"}}, id="not-bearer"),
        pytest.param(lambda t: {"query": {"token": "not-a-key"}}, id="malformed"),
        # a bad header is not rescued by a good ?token=
        pytest.param(
            lambda t: {"headers": {"authorization": "Bearer x"}, "query": {"token": t}}, id="bad+good"
        ),
    ],
)
def test_authorizer_denies_bad_credentials(stack, credentials):
    answer = stack.authorize(**credentials(stack.new_key("acme", "client")))
    assert _effect(answer) == "Deny"
    assert "context" not in answer


def test_authorizer_denies_a_revoked_key(stack):
    token = stack.new_key("acme", "client")
    status, _ = stack.http("DELETE", f"/v1/auth/keys/{token.split('_')[1]}", stack.new_key("acme", "admin"))
    assert status == 200
    assert _effect(stack.authorize(headers={"Authorization": f"Bearer {token}"})) == "Deny"


def test_authorizer_logs_neither_the_token_nor_the_server_secret(stack, caplog, powertools_logs):
    token = stack.new_key("acme", "client")
    with caplog.at_level(logging.DEBUG, logger="agentvm"):
        stack.authorize(headers={"Authorization": f"Bearer {token}"})
        stack.authorize(query={"token": _wrong_secret(token)})
    text = powertools_logs.getvalue() + "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    secret_part = token.split("_", 2)[2]
    assert "connection authenticated" in text and "connection refused" in text
    assert secret_part not in text and secret_part[:-4] not in text and AUTH_SECRET not in text


# -- $connect and $default ------------------------------------------------------------------------


def test_connect_registers_the_tenant_and_key_the_authorizer_named(stack):
    token = stack.new_key("acme", "client")
    stack.connect("conn-1", headers={"Authorization": f"Bearer {token}"})
    assert _registered("conn-1") == ConnectionInfo(
        "conn-1", "acme", 1795239612000, key_id=token.split("_")[1]
    )
    assert stack.request("conn-1", "container_create", "r1", containerId="user-alice")["containerId"] == (
        "user-alice"
    )


def test_a_denied_upgrade_registers_nothing(stack):
    stack.connect("conn-1", query={"token": "avm_zzzzzzzzzzzz_" + "x" * 43})
    assert _registered("conn-1") is None


def test_an_unauthenticated_connection_may_send_only_auth(stack):
    stack.connect("conn-1")
    assert _registered("conn-1") == ConnectionInfo("conn-1", None, 1795239612000)

    refused = stack.send(
        "conn-1", {"type": "container_create_request", "data": {"containerId": "c", "requestId": "r1"}}
    )
    assert _error_codes(refused) == [
        ("system_error", "unauthorized"),
        ("container_create_response", "unauthorized"),
    ]
    assert _error_codes(stack.send("conn-1", {"type": "subscribe", "sessionId": "sess_x"})) == [
        ("system_error", "unauthorized")
    ]
    assert run_sync(stack.runtimes["ws_default"].store.list_containers("default")) == []  # no default tenant

    token = stack.new_key("acme", "client")
    assert stack.auth_frame("conn-1", token) == []  # authenticated; AgentX clients expect no reply
    assert _registered("conn-1") == ConnectionInfo(
        "conn-1", "acme", 1795239612000, key_id=token.split("_")[1]
    )
    assert stack.request("conn-1", "container_create", "r2", containerId="user-alice") == {
        "requestId": "r2",
        "containerId": "user-alice",
    }


def test_a_bad_auth_frame_answers_unauthorized_and_changes_nothing(stack):
    token = stack.new_key("acme", "client")
    stack.connect("conn-1", headers={"Authorization": f"Bearer {token}"})
    before = _registered("conn-1")

    assert _error_codes(stack.auth_frame("conn-1", _wrong_secret(token))) == [
        ("system_error", "unauthorized")
    ]
    other_tenant = stack.new_key("globex", "client")
    assert _error_codes(stack.auth_frame("conn-1", other_tenant)) == [("system_error", "unauthorized")]

    assert _registered("conn-1") == before
    assert stack.request("conn-1", "container_list", "r1")["containerIds"] == []


def test_a_revoked_key_stops_working_on_live_connections_within_the_cache_bound(stack):
    token = stack.new_key("acme", "client")
    admin = stack.new_key("acme", "admin")
    stack.connect("conn-1", headers={"Authorization": f"Bearer {token}"})
    assert stack.request("conn-1", "container_list", "r1")["containerIds"] == []  # ws_default caches the key

    # Revoked through the HTTP API: another function, so ws_default learns it within its cache bound.
    status, body = stack.http("DELETE", f"/v1/auth/keys/{token.split('_')[1]}", admin)
    assert status == 200 and body["key"]["revokedAt"] is not None
    stack.clock.advance(KEY_CACHE_S - 1)
    assert stack.request("conn-1", "container_list", "r2")["containerIds"] == []

    stack.clock.advance(1)  # past AVM_KEY_CACHE_S
    assert _error_codes(
        stack.send("conn-1", {"type": "container_list_request", "data": {"requestId": "r3"}})
    ) == [
        ("system_error", "unauthorized"),
        ("container_list_response", "unauthorized"),
    ]
    assert _effect(stack.authorize(headers={"Authorization": f"Bearer {token}"})) == "Deny"  # no new sockets


def test_requests_count_against_the_keys_rate_limit(stack):
    token = stack.new_key("acme", "client", rate_limit_per_minute=2)
    stack.connect("conn-1", query={"token": token})
    assert stack.request("conn-1", "container_list", "r1")["containerIds"] == []
    assert stack.request("conn-1", "container_list", "r2")["containerIds"] == []
    limited = stack.request("conn-1", "container_list", "r3")
    assert limited["code"] == "rate_limited" and limited["limit"] == 2
    stack.clock.advance(60)  # the next minute
    assert stack.request("conn-1", "container_list", "r4")["containerIds"] == []


def test_two_warm_environments_leasing_a_keys_requests_never_admit_more_than_its_limit(stack):
    token = stack.new_key("acme", "client", rate_limit_per_minute=60)  # leases of 3 (60 // 20)
    stack.connect("conn-1", query={"token": token})
    environments = [stack.ws_default, stack.another_ws_default()]
    codes = []
    for i in range(70):
        replies = stack.send("conn-1", frame("container_list", f"r{i}"), handler=environments[i % 2])
        (response,) = [f["data"] for f in replies if f["type"] == "container_list_response"]
        codes.append(response.get("code", "ok"))
    # Both keep getting requests, so each uses its leased requests up before it refuses: exactly 60.
    assert codes.count("ok") == 60 and codes.count("rate_limited") == 10
    minute = stack.clock.now_ms() // 60_000
    counters = stack.runtimes["ws_default"].rate_limiter._counters
    assert run_sync(counters.get(f"rate#{key_id_of(token)}#{minute}")) == {"n": 60}


def test_a_used_up_budget_refuses_message_send_before_the_turn(stack):
    admin = stack.new_key("acme", "admin")
    status, _ = stack.http("PUT", "/v1/budgets/tenant", admin, {"daily_tokens": 5, "monthly_tokens": None})
    assert status == 200
    stack.model.add("one two three four")  # + 1 input token: the turn uses up the 5 exactly
    stack.connect("conn-1", headers={"Authorization": f"Bearer {admin}"})
    image = stack.request("conn-1", "image_create", "r1", containerId="user-alice", config={"name": "A"})[
        "record"
    ]

    first = stack.request("conn-1", "message_send", "r2", imageId=image["imageId"], content="hi")
    assert "code" not in first  # within budget: acknowledged and queued
    stack.run_turns()  # the worker streams it and adds its tokens to the tenant's counters
    status, usage = stack.http("GET", "/v1/budgets/tenant", admin)
    assert status == 200 and usage["usage"]["day"] == 5

    replies = stack.send(
        "conn-1",
        {
            "type": "message_send_request",
            "data": {"imageId": image["imageId"], "content": "more", "requestId": "r3"},
        },
    )
    (response,) = [f for f in replies if f["type"] == "message_send_response"]
    assert response["data"]["code"] == "quota_exceeded" and response["data"]["limit"] == 5
    assert "resetAt" in response["data"]
    (error,) = [f for f in replies if f["type"] == "system_error"]
    assert error["data"]["details"]["code"] == "quota_exceeded"
    # refused before anything was stored or queued
    messages = stack.request("conn-1", "image_messages", "r4", imageId=image["imageId"])["messages"]
    assert [m["subtype"] for m in messages] == ["user", "assistant"]
    assert stack.resources.sqs.receive_message(QueueUrl=stack.resources.queue_url).get("Messages") is None


# -- the HTTP API ---------------------------------------------------------------------------------


def test_http_api_requires_an_admin_key_of_the_tenant(stack):
    assert stack.http("GET", "/health")[0] == 200  # open
    status, body = stack.http("GET", "/v1/auth/keys")
    assert status == 401 and body["error"]["code"] == "unauthorized"
    assert stack.http("GET", "/v1/auth/keys", stack.new_key("acme", "client"))[0] == 403
    status, body = stack.http("POST", "/v1/auth/keys", stack.new_key("acme", "admin"), {"scopes": ["client"]})
    assert status == 201 and body["key"]["tenantId"] == "acme"
    assert _effect(stack.authorize(query={"token": body["token"]})) == "Allow"
    assert json.dumps(body).count(body["token"]) == 1  # shown once, in `token` only
