"""Fuzzing ``$default`` on the AWS host (moto): no frame crashes the handler, and every request is
answered exactly once, by its requestId. The local twin is ``tests/unit/gateway/test_gateway_fuzz.py``,
whose frame strategy and reply checker are used here unchanged.

Frames go through the real ``ws_default`` handler, built by ``aws_runtime`` + ``aws_security`` as
its Lambda builds it (DynamoDB store, connections, keys and counters; the SQS FIFO turn queue),
from an API Gateway event: text frames as the body, binary ones base64-encoded. Replies are the
``@connections`` posts the handler made for the frame. The connection is authenticated with a
key whose rate limit the fuzzing never reaches (each request is still counted in DynamoDB).

A second property is AWS's own: well-formed requests (known types, their required fields, ids
that exist mixed with valid but awkward ones: ``#`` as in the table's keys, 128 four-byte
characters, long requestIds) reach the DynamoDB and SQS adapters, and none of them may end in an
``internal_error``.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.gateway.v1.frames import REQUEST_MODELS
from agentvm.hosts.aws import run_sync
from tests.functions.aws_stack import TABLE, Stack, load_event, moto_resources
from tests.functions.conftest import FakeLambdaContext, RecordingPush
from tests.unit.gateway.test_gateway_fuzz import check_replies, raw_frames

pytestmark = pytest.mark.aws

CONN = "conn-fuzz"
EXAMPLES = 300
WELL_FORMED_EXAMPLES = 200
SLOW_EXAMPLES = int(os.environ.get("AVM_FUZZ_EXAMPLES", "10000"))


@pytest.fixture(scope="module")
def gateway():
    with pytest.MonkeyPatch.context() as mp, moto_resources(mp) as resources:
        push = RecordingPush()
        stack = Stack(resources, FakeLambdaContext(), push)
        token = stack.new_key("acme", "client", rate_limit_per_minute=10**9)
        stack.connect(CONN, headers={"Authorization": f"Bearer {token}"})
        _new_known_image(stack)
        yield Gateway(stack, push, key_id=token.split("_")[1])


class Gateway(NamedTuple):
    stack: Stack
    push: RecordingPush
    key_id: str


KNOWN: dict[str, str] = {}  # the ids of a live image (and its agent and session) to aim requests at
_setup_ids = iter(range(1, 10**9))


def _new_known_image(stack) -> None:
    n = next(_setup_ids)
    image = stack.request(CONN, "image_create", f"setup-{n}", containerId="user-alice", config={"name": "A"})
    run = stack.request(CONN, "image_run", f"setup-run-{n}", imageId=image["record"]["imageId"])
    KNOWN.update(
        containerId="user-alice",
        imageId=run["imageId"],
        agentId=run["agentId"],
        sessionId=image["record"]["sessionId"],
    )


def _keep_a_known_image(stack, raw: str) -> None:
    """After a request that deleted the known image or stopped its agent, make a live one again."""
    type_ = json.loads(raw)["type"]
    if type_ in {
        "image_delete_request",
        "image_stop_request",
        "agent_destroy_request",
        "agent_destroy_all_request",
    }:
        found = stack.request(CONN, "image_get", "check-known", imageId=KNOWN["imageId"])
        if found.get("record") is None:
            _new_known_image(stack)
        elif found["record"].get("agentId") != KNOWN["agentId"]:
            run = stack.request(CONN, "image_run", "rerun-known", imageId=KNOWN["imageId"])
            KNOWN["agentId"] = run["agentId"]


awkward_ids = st.one_of(
    st.text(min_size=1, max_size=128),
    st.sampled_from(["#", "a#b", "user-alice#", "IMAGE#img_x", "TENANT#acme", "usage#2026-01#acme", "\x00"]),
    st.text(st.characters(min_codepoint=0x10000), min_size=128, max_size=128),  # 512 bytes of UTF-8
)


def _id(name: str) -> st.SearchStrategy[str]:
    return st.one_of(st.builds(lambda: KNOWN[name]), awkward_ids)


configs = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=200),
        "description": st.text(max_size=50),
        "systemPrompt": st.text(max_size=50),
        "model": st.sampled_from(["scripted/test-1", "anything/else"]),
        "concurrency": st.sampled_from(["queue", "reject", "interrupt"]),
    },
)
contents = st.one_of(
    st.text(min_size=1, max_size=50).filter(str.strip),
    st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=30)}), min_size=1, max_size=3
    ),
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "containerId": _id("containerId"),
    "imageId": _id("imageId"),
    "agentId": _id("agentId"),
    "content": contents,
    "config": configs,
    "updates": configs,
    "options": st.fixed_dictionaries({"concurrency": st.sampled_from(["queue", "reject", "interrupt"])}),
    # suspended turns' requests: ids of calls that wait nowhere, and every shape of answer
    "turnId": awkward_ids | st.text(min_size=1, max_size=40),
    "toolCallId": awkward_ids | st.text(min_size=1, max_size=40),
    "approved": st.booleans(),
    "reason": st.text(max_size=50),
    "output": st.text(max_size=50) | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    "isError": st.booleans(),
    # an MCP server's question: ids that were never asked (AWS keeps no questions); its `content`
    # is drawn from `contents` above (never a valid form: refused as bad_request, never internal)
    "elicitationId": awkward_ids | st.text(min_size=1, max_size=40),
    "action": st.sampled_from(["accept", "decline", "cancel"]) | st.text(max_size=10),
}
request_ids = st.text(min_size=1, max_size=12) | st.text(min_size=200, max_size=2000)


def _well_formed_request(type_: str) -> st.SearchStrategy[dict[str, Any]]:
    model = REQUEST_MODELS[type_]
    names = [n for n in model.model_fields if n != "requestId"]
    required = {n: FIELDS[n] for n in names if model.model_fields[n].is_required()}
    optional = {n: FIELDS[n] for n in names if not model.model_fields[n].is_required()}
    return st.builds(
        lambda data, rid: {"type": type_, "data": {**data, "requestId": rid}},
        st.fixed_dictionaries(required, optional=optional),
        request_ids,
    )


well_formed_frames = st.one_of(
    *(_well_formed_request(t) for t in sorted(REQUEST_MODELS)),
    st.fixed_dictionaries(
        {
            "type": st.just("subscribe"),
            "sessionId": st.one_of(st.builds(lambda: KNOWN["sessionId"]), awkward_ids),
        },
        optional={"afterSeq": st.integers(min_value=0, max_value=10**6)},
    ),
).map(json.dumps)


def _check(gateway: Gateway, raw: str | bytes) -> list[dict[str, Any]]:
    stack, push, _ = gateway
    event = load_event("apigw-ws-default-container-create.json")
    event["requestContext"]["connectionId"] = CONN
    if isinstance(raw, bytes):  # a binary frame: API Gateway hands it over base64-encoded
        event["body"] = base64.b64encode(raw).decode()
        event["isBase64Encoded"] = True
    else:
        event["body"] = raw
        event["isBase64Encoded"] = False
    before = len(push.posts)

    assert stack.ws_default(event, stack.context) == {"statusCode": 200}

    posted = push.posts[before:]
    assert {conn for conn, _ in posted} <= {CONN}  # replies go to the sender only
    replies = [frame for _, frame in posted]
    check_replies(raw, replies)
    return replies


def _codes(replies: list[dict[str, Any]]) -> list[str | None]:
    return [
        r["data"]["details"].get("code") if r["type"] == "system_error" else r["data"].get("code")
        for r in replies
    ]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=raw_frames)
def test_ws_default_answers_every_fuzzed_frame(gateway, raw):
    _check(gateway, raw)


@pytest.mark.slow
@pytest.mark.timeout(900)  # 10,000 examples through moto: minutes on a loaded 2-core machine
@settings(
    max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=raw_frames)
def test_ws_default_answers_ten_thousand_fuzzed_frames(gateway, raw):
    _check(gateway, raw)


@settings(
    max_examples=WELL_FORMED_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=well_formed_frames)
def test_ws_default_answers_well_formed_requests_without_internal_errors(gateway, raw):
    replies = _check(gateway, raw)
    assert "internal_error" not in _codes(replies), (raw, replies)
    _keep_a_known_image(gateway.stack, raw)


@pytest.mark.slow
@pytest.mark.timeout(900)  # 10,000 examples through moto: minutes on a loaded 2-core machine
@settings(
    max_examples=SLOW_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=well_formed_frames)
def test_ws_default_answers_ten_thousand_well_formed_requests_without_internal_errors(gateway, raw):
    replies = _check(gateway, raw)
    assert "internal_error" not in _codes(replies), (raw, replies)
    _keep_a_known_image(gateway.stack, raw)


def test_the_fuzzed_connection_is_still_authenticated_and_served(gateway):
    """Whatever the fuzzing sent (auth frames with junk headers included), the connection keeps its
    tenant and key: a plain request after it is answered for tenant ``acme``."""
    stack = gateway.stack
    registered = run_sync(DynamoDbConnections(TABLE).get(CONN))
    assert registered is not None and (registered.tenant_id, registered.key_id) == ("acme", gateway.key_id)
    assert stack.request(CONN, "container_create", "after-fuzz", containerId="user-after") == {
        "requestId": "after-fuzz",
        "containerId": "user-after",
    }
    listed = stack.request(CONN, "container_list", "after-fuzz-list")["containerIds"]
    assert "user-after" in listed
