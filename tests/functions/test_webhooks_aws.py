"""Webhooks on the AWS host (docs/webhooks.md), on moto: the routes through the HTTP API handler, a
turn's event recorded by the turn worker, and ``functions/webhook_sender`` sending it, signed, to a
real receiver on loopback (verified with the ``standardwebhooks`` package), retried after a failure
with the core's backoff, replayed by id. The worker and the HTTP API wake the sender with an
asynchronous invoke (Lambda on moto, without Docker: the invocation is accepted and recorded here,
and the test runs the sender with its payload, as Lambda would)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import boto3
import pytest
from moto.core.config import default_user_config
from standardwebhooks import Webhook

from agentvm.adapters.llm.scripted import Calls
from agentvm.config import Settings
from agentvm.configcentre.sealing import SecretUnreadable
from agentvm.hosts.aws import aws_server_secrets, aws_webhooks, run_sync
from agentvm.records import WebhookDelivery, WebhookEndpoint
from agentvm.turns.webhooks import BACKOFF_BASE_S, record_event
from functions.webhook_sender import app as webhook_sender
from tests.functions.aws_stack import (
    AUTH_SECRET,
    REGION,
    TABLE,
    Stack,
    frame,
    load_event,
    moto_resources,
    put_auth_secret,
)
from tests.security_harness import ManualClock
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.aws

TENANT = "acme"
SENDER = "agentvm-webhook-sender"


class AwsWebhooks:
    """The stack (HTTP API, worker, sender) on a clock that starts now (receivers check timestamps),
    and the asynchronous invokes of the sender the other functions made."""

    def __init__(self, stack: Stack, invokes: list[dict[str, Any]]) -> None:
        self.stack = stack
        self.invokes = invokes
        self.sender = stack._handler(webhook_sender)

    def send(self, event: dict[str, Any] | None = None) -> int:
        """One run of the sender (the schedule's event unless given)."""
        answer = self.sender(event or load_event("scheduler-webhook-send.json"), self.stack.context)
        return answer["attempts"]

    def send_woken(self) -> int:
        """Run the sender once per invoke made since the last call, with the invoke's payload."""
        woken, self.invokes[:] = list(self.invokes), []
        return sum(self.send(json.loads(call["Payload"])) for call in woken)

    def http(self, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        return self.stack.http(method, path, token, body)


@pytest.fixture
def hooks(monkeypatch, context, push):
    monkeypatch.setenv("AVM_WEBHOOKS_ALLOW_PRIVATE_NETWORKS", "true")  # the receiver is on loopback
    monkeypatch.setenv("AVM_WEBHOOK_SENDER_FUNCTION", SENDER)
    # Lambda on moto without Docker: an invoke is accepted (202) and runs nothing
    monkeypatch.setitem(default_user_config, "lambda", {"use_docker": False})
    with moto_resources(monkeypatch) as resources:
        boto3.setup_default_session(region_name=REGION)
        invokes: list[dict[str, Any]] = []

        def record(params: dict[str, Any], **_: Any) -> None:
            invokes.append(dict(params))

        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("provide-client-params.lambda.Invoke", record)
        stack = Stack(resources, context, push, clock=ManualClock(now_ms=time.time_ns() // 1_000_000))
        yield AwsWebhooks(stack, invokes)


@pytest.fixture
def receiver():
    r = Receiver([500])  # the first attempt fails
    yield r
    r.close()


def a_turn(hooks: AwsWebhooks, token: str, text: str = "hi") -> str:
    stack = hooks.stack
    status, session = hooks.http("POST", "/v1/containers/user-1/sessions", token, {"name": "Helper"})
    assert status == 201
    status, sent = hooks.http(
        "POST", f"/v1/sessions/{session['sessionId']}/turns?wait=0", token, {"message": text}
    )
    assert status == 202, sent
    stack.model.add("Hello from the worker Lambda")
    stack.run_turns()
    return sent["turnId"]


def test_a_turns_event_reaches_the_receiver_once_signed_after_a_retry_and_replays(hooks, receiver, caplog):
    caplog.set_level(logging.DEBUG)
    token = hooks.stack.new_key(TENANT, "admin")
    status, made = hooks.http(
        "POST", "/v1/webhooks/endpoints", token, {"url": receiver.url, "events": ["turn.ended"]}
    )
    assert status == 201, made
    secret, endpoint_id = made["secret"], made["endpoint"]["endpointId"]
    assert secret.startswith("whsec_")
    assert secret not in json.dumps(hooks.http("GET", f"/v1/webhooks/endpoints/{endpoint_id}", token))
    assert secret not in json.dumps(hooks.http("GET", "/v1/webhooks/endpoints", token))
    assert hooks.invokes == []  # nothing is due yet

    turn_id = a_turn(hooks, token)
    # the worker recorded the event and woke the sender at once
    assert [(c["FunctionName"], c["InvocationType"]) for c in hooks.invokes] == [(SENDER, "Event")]
    assert hooks.send_woken() == 1  # answered 500
    _, listed = hooks.http("GET", f"/v1/webhooks/endpoints/{endpoint_id}/deliveries", token)
    [delivery] = listed["deliveries"]
    assert (delivery["status"], delivery["attempts"], delivery["lastStatusCode"]) == ("pending", 1, 500)

    assert hooks.send() == 0  # the schedule's next run: not before the backoff
    hooks.stack.clock.advance(BACKOFF_BASE_S + 0.001)
    assert hooks.send() == 1
    assert hooks.send() == 0
    _, listed = hooks.http("GET", f"/v1/webhooks/endpoints/{endpoint_id}/deliveries", token)
    [delivery] = listed["deliveries"]
    assert (delivery["status"], delivery["attempts"], delivery["lastStatusCode"]) == ("delivered", 2, 200)

    assert len(receiver.requests) == 2
    assert {headers["webhook-id"] for headers, _ in receiver.requests} == {delivery["deliveryId"]}
    for headers, body in receiver.requests:
        event = Webhook(secret).verify(body, headers)  # raises on a bad signature or a stale timestamp
        assert event["type"] == "turn.ended" and event["eventId"] == f"{turn_id}.completed.1"
        data = event["data"]
        assert (data["tenantId"], data["containerId"], data["turnId"]) == (TENANT, "user-1", turn_id)
        assert data["status"] == "completed" and data["sessionId"].startswith("sess_")

    # the same event recorded again (a redelivered job) stores nothing more
    worker = hooks.stack.runtimes["turn_worker"]
    data = json.loads(receiver.requests[0][1])["data"]
    assert run_sync(record_event(worker, TENANT, "turn.ended", f"{turn_id}.completed.1", data)) == 0
    assert hooks.invokes == []

    # a replay through the HTTP API: pending again, the sender woken, the same webhook-id sent
    status, replayed = hooks.http("POST", f"/v1/webhooks/deliveries/{delivery['deliveryId']}/replay", token)
    assert status == 200 and replayed["delivery"]["status"] == "pending"
    assert len(hooks.invokes) == 1
    assert hooks.send_woken() == 1
    assert len(receiver.requests) == 3 and receiver.requests[2][0]["webhook-id"] == delivery["deliveryId"]
    assert (
        Webhook(secret).verify(receiver.requests[2][1], receiver.requests[2][0])["eventId"]
        == event["eventId"]
    )

    # another tenant's ids answer exactly like missing ones
    other = hooks.stack.new_key("other-tenant", "admin")
    for path, missing in (
        (
            f"/v1/webhooks/deliveries/{delivery['deliveryId']}/replay",
            "/v1/webhooks/deliveries/msg_missing_0/replay",
        ),
    ):
        foreign, absent = (
            hooks.stack.http_raw("POST", path, other),
            hooks.stack.http_raw("POST", missing, other),
        )
        assert foreign["statusCode"] == absent["statusCode"] == 404
    for suffix in ("", "/deliveries"):
        foreign_status, _ = hooks.http("GET", f"/v1/webhooks/endpoints/{endpoint_id}{suffix}", other)
        absent_status, _ = hooks.http("GET", f"/v1/webhooks/endpoints/whe_missing_0{suffix}", other)
        assert foreign_status == absent_status == 404
    assert hooks.http("GET", "/v1/webhooks/endpoints", other) == (200, {"endpoints": []})
    assert len(receiver.requests) == 3

    # the secret is sealed at rest and in no log line; waking the sender never failed
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=TABLE)["Items"]
    stored = json.dumps(items)
    assert secret not in stored and secret.removeprefix("whsec_") not in stored
    assert any("avm-sealed:v1:" in json.dumps(i) for i in items)
    assert secret not in caplog.text
    assert "waking the webhook sender failed" not in caplog.text


def test_deleting_an_endpoint_drops_its_pending_deliveries(hooks, receiver):
    token = hooks.stack.new_key(TENANT, "admin")
    _, made = hooks.http(
        "POST", "/v1/webhooks/endpoints", token, {"url": receiver.url, "events": ["turn.ended"]}
    )
    endpoint_id = made["endpoint"]["endpointId"]
    a_turn(hooks, token)
    assert len(hooks.invokes) == 1
    status, _ = hooks.http("DELETE", f"/v1/webhooks/endpoints/{endpoint_id}", token)
    assert status == 200
    assert hooks.send_woken() == 0 and hooks.send() == 0
    assert receiver.requests == []
    assert hooks.http("GET", f"/v1/webhooks/endpoints/{endpoint_id}/deliveries", token)[0] == 404


def test_a_tenant_without_endpoints_costs_no_invoke(hooks):
    token = hooks.stack.new_key(TENANT, "admin")
    a_turn(hooks, token)
    assert hooks.invokes == []
    assert hooks.send() == 0


def test_a_delivery_left_behind_by_its_deleted_endpoint_is_closed_not_leased_forever(hooks):
    # DynamoDB deletes an endpoint's deliveries item by item: one may outlive it (a failure halfway,
    # or an event recorded as the endpoint went). The sender closes it on its first attempt.
    worker = hooks.stack.runtimes["turn_worker"]
    assert worker.webhooks is not None
    now = hooks.stack.clock.now_ms()
    left = WebhookDelivery(
        tenantId=TENANT,
        endpointId="whe_gone",
        deliveryId="msg_left_behind",
        eventId="turn_x.completed.1",
        eventType="turn.ended",
        payload="{}",
        nextAttemptAt=now,
        createdAt=now,
    )
    assert run_sync(worker.webhooks.enqueue(left))
    assert hooks.send_woken() == 1
    closed = run_sync(worker.webhooks.get_delivery(TENANT, "msg_left_behind"))
    assert closed is not None and (closed.status, closed.lastError) == ("failed", "the endpoint was deleted")
    hooks.stack.clock.advance(3600)
    assert hooks.send() == 0


def test_endpoint_secrets_are_sealed_under_the_ssm_secret_and_open_through_a_rotation(hooks):
    def environment() -> Any:  # a fresh execution environment: reads the parameter on first use
        settings = Settings()
        return aws_webhooks(settings, aws_server_secrets(settings))

    endpoint = WebhookEndpoint(
        tenantId=TENANT, endpointId="whe_rot", url="https://example.com/h", events=["turn.ended"], createdAt=1
    )
    secret = "whsec_cm90YXRpb24tdGVzdC1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZg=="
    run_sync(environment().put_endpoint(endpoint, secret))
    rotated = "functions-test-server-secret-ROTATED-0123456789abcdef"
    put_auth_secret({"AVM_AUTH_SECRET": rotated, "AVM_AUTH_SECRET_PREVIOUS": AUTH_SECRET})
    assert run_sync(environment().endpoint_secret(endpoint)) == secret  # the previous secret opens it
    put_auth_secret({"AVM_AUTH_SECRET": rotated})
    with pytest.raises(SecretUnreadable):  # dropped too soon: register the endpoint again (deploy.md)
        run_sync(environment().endpoint_secret(endpoint))


def test_a_turn_waiting_for_approval_sends_approval_needed_and_its_end_sends_turn_ended(hooks, receiver):
    receiver.statuses.clear()
    stack = hooks.stack
    token = stack.new_key(TENANT, "admin")
    hook = {"url": receiver.url, "events": ["approval.needed", "turn.ended"]}
    secret = hooks.http("POST", "/v1/webhooks/endpoints", token, hook)[1]["secret"]
    stack.connect("conn-1", headers={"Authorization": f"Bearer {token}"})
    stack.request("conn-1", "container_create", "r1", containerId="user-alice")
    config = {
        "name": "A",
        "tools": [{"type": "builtin", "name": "calculator"}],
        "approval": {"tools": ["calculator"]},
    }
    image = stack.request("conn-1", "image_create", "r2", containerId="user-alice", config=config)["record"]
    stack.model.add(Calls(("calculator", {"expression": "6*7"})), "It is 42.")
    stack.send("conn-1", frame("message_send", "r3", imageId=image["imageId"], content="6 times 7?"))
    stack.run_turns()  # the turn suspends on the approval: its event is recorded, the sender woken
    assert hooks.send_woken() == 1
    [(headers, body)] = receiver.requests
    needed = Webhook(secret).verify(body, headers)
    assert (needed["type"], needed["data"]["status"]) == ("approval.needed", "suspended")

    turn_id = needed["data"]["turnId"]
    [wait] = stack.request("conn-1", "tool_waits", "r4", containerId="user-alice")["waits"]
    ids = {"turnId": turn_id, "toolCallId": wait["toolCallId"]}
    assert stack.request("conn-1", "tool_approval", "r5", approved=True, **ids)["status"] == "approved"
    stack.run_turns()  # the continuation ends the turn
    assert hooks.send_woken() == 1
    ended = Webhook(secret).verify(receiver.requests[1][1], receiver.requests[1][0])
    assert (ended["type"], ended["data"]["turnId"], ended["data"]["status"]) == (
        "turn.ended",
        turn_id,
        "completed",
    )
