"""Fuzzing the gateway: no frame crashes it, and every request is answered exactly once."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentvm.gateway.dispatch import handle_frame
from agentvm.gateway.v1.frames import REQUEST_MODELS
from tests.harness import Harness

FIELDS = [
    "containerId",
    "imageId",
    "agentId",
    "content",
    "config",
    "updates",
    "options",
    "sessionId",
    "turnId",
    "toolCallId",
    "approved",
    "output",
]

# Texts include lone surrogates (JSON escapes such as \\ud800) and integers go past 2**53.
any_text = st.text(st.characters(exclude_categories=()), max_size=20)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**53, max_value=10**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | any_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
field_values = st.one_of(
    json_values,
    st.sampled_from(["user-alice", "img_x", "agent_x", "", " ", "x" * 300]),
    st.fixed_dictionaries(
        {}, optional={"name": json_values, "systemPrompt": json_values, "model": json_values}
    ),
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "file", "nope"])}), max_size=3),
)
request_types = st.sampled_from(sorted(REQUEST_MODELS)) | st.text(max_size=15).map(lambda t: t + "_request")
request_frames = st.builds(
    lambda type_, rid, data: {"type": type_, "data": {**data, "requestId": rid}, "source": "command"},
    request_types,
    st.text(min_size=1, max_size=12) | any_text.filter(bool),
    st.dictionaries(st.sampled_from(FIELDS), field_values, max_size=4),
)
# Nesting far past any limit, inside a request's data or as the whole frame.
deep_frames = st.integers(min_value=60, max_value=3000).flatmap(
    lambda depth: st.sampled_from(
        [
            "[" * depth + "]" * depth,
            '{"type": "image_create_request", "data": {"requestId": "r1", "config": '
            + '{"a": ' * depth
            + "1"
            + "}" * depth
            + "}}",
        ]
    )
)
other_frames = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["subscribe", "auth", "x_response"])},
        optional={"sessionId": json_values, "headers": json_values, "afterSeq": json_values},
    ),
    st.fixed_dictionaries({"__ack": json_values}),
)
raw_frames = st.one_of(
    request_frames.map(json.dumps),
    deep_frames,
    other_frames.map(json.dumps),
    st.text(max_size=40),
    st.binary(max_size=40),
)

SLOW_EXAMPLES = int(os.environ.get("AVM_FUZZ_EXAMPLES", "10000"))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    loop = asyncio.new_event_loop()
    harness = Harness(tmp_path_factory.mktemp("fuzz"))
    client = loop.run_until_complete(harness.client())
    loop.run_until_complete(client.request("container_list"))  # it speaks v1 (its first frame)
    conn = client.connection_id
    yield loop, harness, conn
    harness.queue.close()
    harness.store.close()
    loop.close()


def _check(gateway, raw):
    loop, harness, conn = gateway
    check_replies(raw, [json.loads(p) for p in loop.run_until_complete(handle_frame(harness.rt, conn, raw))])


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_replies(raw, replies):
    """What a host sent back for the frame ``raw``: a request answered exactly once, by its
    requestId (an error response after its ``system_error``); anything else only system errors."""
    doc = None
    responses = [r for r in replies if r["category"] == "response"]
    if isinstance(raw, str):
        try:
            doc = json.loads(raw)
        except RecursionError:
            # Too deep to parse: the gateway looks for its type and requestId in the text (as for
            # an oversized frame) and answers that request with a bad_request, if it finds them.
            assert len(responses) <= 1 and all(r["data"]["code"] == "bad_request" for r in responses)
            assert all(r["type"] in ("system_error", *(x["type"] for x in responses)) for r in replies)
            return
        except ValueError:
            doc = None
    is_request = (
        isinstance(doc, dict)
        and isinstance(doc.get("type"), str)
        and doc["type"].endswith("_request")
        and _encodable(doc["type"])
        and isinstance(doc.get("data"), dict)
        and isinstance(doc["data"].get("requestId"), str)
        and _encodable(doc["data"]["requestId"])  # a lone surrogate cannot be echoed back
    )
    if is_request:
        assert len(responses) == 1, (raw, replies)
        assert responses[0]["data"]["requestId"] == doc["data"]["requestId"]
        assert responses[0]["type"] == doc["type"].removesuffix("_request") + "_response"
        if responses[0]["data"].get("error"):
            assert replies[-2]["type"] == "system_error"
    else:
        assert responses == [], (raw, replies)
        assert all(r["type"] == "system_error" for r in replies)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=raw_frames)
def test_gateway_answers_every_fuzzed_frame(gateway, raw):
    _check(gateway, raw)


@pytest.mark.slow
@pytest.mark.timeout(900)  # 10,000 examples through moto: minutes on a loaded 2-core machine
@settings(
    max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=raw_frames)
def test_gateway_answers_ten_thousand_fuzzed_frames(gateway, raw):
    _check(gateway, raw)
