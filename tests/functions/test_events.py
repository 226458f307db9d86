"""Every sample event in events/ parses as what its function receives, and every function has one."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

import pytest
from aws_lambda_powertools.utilities.parser.models import (
    APIGatewayProxyEventV2Model,
    APIGatewayWebSocketConnectEventModel,
    APIGatewayWebSocketDisconnectEventModel,
    APIGatewayWebSocketMessageEventModel,
    SqsModel,
)
from pydantic import BaseModel, model_validator

from agentvm.adapters.aws.sqs_queue import ATTRIBUTES, job_from_body
from agentvm.gateway.v1.frames import FrameError, parse_frame

EVENTS = Path(__file__).resolve().parents[2] / "events"
# `<source>-<route>[-<variant>].json` -> the function (folder under functions/) it is sent to.
PREFIXES = {
    "apigw-ws-authorizer": "ws_authorizer",
    "apigw-ws-connect": "ws_connect",
    "apigw-ws-disconnect": "ws_disconnect",
    "apigw-ws-default": "ws_default",
    "apigw-http": "http_api",
    "sqs-turn-job": "turn_worker",
    "sqs-sandbox-job": "sandbox_worker",
    "scheduler-wait-sweep": "wait_sweeper",
    "scheduler-schedule-sweep": "schedule_sweeper",
    "scheduler-webhook-send": "webhook_sender",
}
NAME = re.compile(r"^(apigw-ws|apigw-http|sqs|scheduler)-[a-z0-9]+(-[a-z0-9]+)*\.json$")
ALL_EVENTS = sorted(p.name for p in EVENTS.glob("*.json"))

_ROUTES = {"$connect": "CONNECT", "$disconnect": "DISCONNECT", "$default": "MESSAGE"}


class WsRequestContext(BaseModel):
    """What our WebSocket handlers read from ``requestContext`` (Powertools' REST model needs
    resource/path/httpMethod, which WebSocket events lack)."""

    routeKey: Literal["$connect", "$disconnect", "$default"]
    eventType: Literal["CONNECT", "DISCONNECT", "MESSAGE"]
    connectionId: str
    connectedAt: int
    requestId: str
    domainName: str
    stage: str
    apiId: str
    messageId: str | None = None
    authorizer: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> WsRequestContext:
        assert _ROUTES[self.routeKey] == self.eventType, "routeKey and eventType disagree"
        assert (self.messageId is not None) == (self.eventType == "MESSAGE"), "messageId only on messages"
        assert self.domainName.startswith(self.apiId + "."), "domainName is not the API's"
        return self


class WsEvent(BaseModel):
    requestContext: WsRequestContext
    isBase64Encoded: bool
    body: str | None = None


def _function_of(name: str) -> str:
    matches = [
        fn for prefix, fn in PREFIXES.items() if name.startswith(prefix + "-") or name == prefix + ".json"
    ]
    assert len(matches) == 1, f"{name} matches no function prefix, or several"
    return matches[0]


def _load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def test_events_exist_for_every_function_and_only_for_them(functions):
    covered = {_function_of(name) for name in ALL_EVENTS}
    assert covered == set(functions), "every function in template.yaml needs a sample event"


@pytest.mark.parametrize("name", ALL_EVENTS)
def test_event_name_follows_the_convention(name):
    assert NAME.match(name), name


WS_ROUTE_EVENTS = [n for n in ALL_EVENTS if n.startswith("apigw-ws-") and _function_of(n) != "ws_authorizer"]


@pytest.mark.parametrize("name", WS_ROUTE_EVENTS)
def test_websocket_event_parses(name):
    raw = _load(name)
    event = WsEvent.model_validate(raw)
    # Powertools' own WebSocket models agree (they check identity, timestamps, directions).
    powertools_model = {
        "CONNECT": APIGatewayWebSocketConnectEventModel,
        "DISCONNECT": APIGatewayWebSocketDisconnectEventModel,
        "MESSAGE": APIGatewayWebSocketMessageEventModel,
    }[event.requestContext.eventType]
    powertools_model.model_validate(raw)
    expected_route = {"ws_connect": "$connect", "ws_disconnect": "$disconnect", "ws_default": "$default"}
    assert event.requestContext.routeKey == expected_route[_function_of(name)]


@pytest.mark.parametrize("name", [n for n in ALL_EVENTS if n.startswith("apigw-ws-default-")])
def test_websocket_message_body_is_a_frame_unless_malformed(name):
    body = WsEvent.model_validate(_load(name)).body
    assert body is not None
    if "malformed" in name:
        with pytest.raises(FrameError):
            parse_frame(body, max_bytes=256 * 1024)
    elif "jsonrpc" in name:  # AgentX v2 (JSON-RPC 2.0) on the same route
        from agentvm.gateway.v2.methods import resolve
        from agentvm.gateway.v2.rpc import looks_like_rpc

        doc = json.loads(body)
        assert looks_like_rpc(body) and doc["jsonrpc"] == "2.0" and resolve(doc["method"]) is not None
    else:
        parse_frame(body, max_bytes=256 * 1024)


def test_authorizer_variant_carries_a_tenant_and_a_key():
    event = WsEvent.model_validate(_load("apigw-ws-connect-authorizer.json"))
    authorizer = event.requestContext.authorizer
    assert authorizer and authorizer["tenantId"] and authorizer["keyId"]
    assert authorizer["principalId"] == authorizer["keyId"]  # what functions/ws_authorizer answers
    assert WsEvent.model_validate(_load("apigw-ws-connect.json")).requestContext.authorizer is None


class WsAuthorizerEvent(BaseModel):
    """A WebSocket REQUEST authorizer's input: the upgrade's headers and query, and $connect's context."""

    type: Literal["REQUEST"]
    methodArn: str
    headers: dict[str, str]
    queryStringParameters: dict[str, str] | None = None
    requestContext: WsRequestContext

    @model_validator(mode="after")
    def _for_connect(self) -> WsAuthorizerEvent:
        context = self.requestContext
        assert context.routeKey == "$connect", "only $connect can carry an authorizer"
        assert self.methodArn.endswith(f":{context.apiId}/{context.stage}/$connect"), (
            "methodArn is not $connect's"
        )
        return self


@pytest.mark.parametrize("name", [n for n in ALL_EVENTS if _function_of(n) == "ws_authorizer"])
def test_authorizer_event_parses_as_a_request_authorizer_input_without_credentials(name):
    event = WsAuthorizerEvent.model_validate(_load(name))
    # the sample is a browser's upgrade: no Authorization header, no ?token= (it sends an auth frame)
    assert not {k.lower() for k in event.headers} & {"authorization"}
    assert "token" not in (event.queryStringParameters or {})


@pytest.mark.parametrize("name", [n for n in ALL_EVENTS if n.startswith("apigw-http-")])
def test_http_event_parses_as_payload_format_2(name):
    event = APIGatewayProxyEventV2Model.model_validate(_load(name))
    assert event.version == "2.0"
    assert event.routeKey == "$default"  # the HTTP API's only route: FastAPI routes
    assert event.rawPath == event.requestContext.http.path


def test_the_sandbox_job_event_carries_a_job_grouped_by_workspace_and_deduplicated_by_wait():
    from agentvm.adapters.aws.sqs_sandbox_jobs import sandbox_job_from_body
    from agentvm.records import workspace_digest

    [record] = SqsModel.model_validate(_load("sqs-sandbox-job.json")).Records
    job = sandbox_job_from_body(record.body)
    assert record.eventSourceARN.endswith(".fifo")
    assert record.attributes.MessageGroupId == workspace_digest(job.tenantId, job.containerId)
    digest = hashlib.sha256(f"{job.turnId}\0{job.waitId}".encode()).hexdigest()
    assert record.attributes.MessageDeduplicationId == digest
    assert record.md5OfBody == hashlib.md5(record.body.encode()).hexdigest()


@pytest.mark.parametrize("name", [n for n in ALL_EVENTS if n.startswith("sqs-turn-job")])
def test_sqs_event_parses_and_carries_turn_jobs(name):
    event = SqsModel.model_validate(_load(name))
    assert event.Records
    for record in event.Records:
        assert record.eventSourceARN.endswith(".fifo")
        job = job_from_body(record.body)
        # What SqsTurnQueue sends: grouped by session, deduplicated by turn, ids as attributes.
        assert record.attributes.MessageGroupId == job.sessionId
        assert record.attributes.MessageDeduplicationId == job.turnId
        assert {k: v.stringValue for k, v in record.messageAttributes.items()} == {
            name: getattr(job, name) for name in ATTRIBUTES
        }
        assert record.md5OfBody == hashlib.md5(record.body.encode()).hexdigest()


@pytest.mark.parametrize(
    ("function", "event"),
    [("wait_sweeper", "scheduler-wait-sweep.json"), ("schedule_sweeper", "scheduler-schedule-sweep.json")],
)
def test_the_sweep_event_is_the_input_the_schedule_sends(functions, function, event):
    schedule = functions[function]["Properties"]["Events"]["EveryMinute"]["Properties"]
    assert json.loads(schedule["Input"]) == _load(event)


def test_the_webhook_send_event_is_the_input_the_schedule_sends(functions):
    schedule = functions["webhook_sender"]["Properties"]["Events"]["EveryMinute"]["Properties"]
    assert json.loads(schedule["Input"]) == _load("scheduler-webhook-send.json")


def test_batch_event_holds_two_turns_of_one_session_in_order_and_another_session():
    records = SqsModel.model_validate(_load("sqs-turn-job-batch.json")).Records
    groups = [r.attributes.MessageGroupId for r in records]
    assert len(set(groups)) == 2 and len(groups) == 3
    seqs = [int(r.attributes.SequenceNumber or 0) for r in records]
    assert seqs == sorted(seqs)
