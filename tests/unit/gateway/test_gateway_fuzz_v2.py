"""Fuzzing the gateway in AgentX v2 (JSON-RPC 2.0): no frame crashes it or ends in an internal
error, every request is answered exactly once by its id (in a batch: in one array), and a
notification never is. The v1 twin is ``test_gateway_fuzz.py`` (whose value strategies are used)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentvm.gateway.dispatch import handle_frame
from agentvm.gateway.v2.methods import METHODS, PREFIXES, resolve
from agentvm.gateway.v2.rpc import MAX_BATCH
from tests.harness import Harness
from tests.unit.gateway.test_gateway_fuzz import any_text, field_values, json_values, raw_frames
from tests.v2_client import v2_client

PARAMS = [
    "containerId",
    "imageId",
    "instanceId",
    "agentId",
    "content",
    "config",
    "updates",
    "options",
    "sessionId",
    "lastSeq",
    "topic",
    "turnId",
    "toolCallId",
    "approved",
    "output",
    "headers",
    "name",
    "requestId",
]
methods = st.one_of(
    st.sampled_from(sorted(METHODS)),
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(sorted(METHODS))).map("".join),
    st.sampled_from(["llm.list", "os.read", "runtime.rewind", "unsubscribe", "", "image."]),
    any_text,
    json_values,
)
ids = st.one_of(
    st.integers(-(2**40), 2**40), st.text(max_size=12), any_text, st.none(), st.booleans(), st.floats()
)
params = st.one_of(
    st.dictionaries(st.sampled_from(PARAMS), field_values, max_size=4),
    json_values,
)


@st.composite
def messages(draw: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2]))}
    if draw(st.integers(0, 9)):
        msg["method"] = draw(methods)
    if draw(st.booleans()):
        msg["params"] = draw(params)
    if draw(st.integers(0, 3)):
        msg["id"] = draw(ids)
    return msg


rpc_frames = st.one_of(
    messages().map(json.dumps),
    st.lists(st.one_of(messages(), json_values), max_size=6).map(json.dumps),
    raw_frames,  # v1 frames, junk, deep nesting: all answered in JSON-RPC on a v2 connection
)

SLOW_EXAMPLES = int(os.environ.get("AVM_FUZZ_EXAMPLES", "10000"))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    loop = asyncio.new_event_loop()
    harness = Harness(tmp_path_factory.mktemp("fuzz-v2"))
    client = loop.run_until_complete(v2_client(harness))
    loop.run_until_complete(client.call("container.list"))  # it speaks v2 (its first frame)
    yield loop, harness, client.connection_id
    harness.queue.close()
    harness.store.close()
    loop.close()


def _is_request(msg: Any) -> bool:
    """A well-formed request, which must be answered by its id (one JSON-RPC 2.0 object with an id)."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "id" not in msg:
        return False
    rpc_id = msg["id"]
    valid_id = (
        rpc_id is None
        or isinstance(rpc_id, str)
        or (isinstance(rpc_id, int) and not isinstance(rpc_id, bool))
    )
    return valid_id and isinstance(msg.get("method"), str) and bool(msg["method"])


def _deferred(msg: dict[str, Any]) -> bool:
    """``message.send`` that was accepted is answered later, by the turn's worker."""
    return resolve(msg["method"]) == "message.send"


def check_rpc_replies(raw: str | bytes, replies: list[Any]) -> None:
    responses: list[dict[str, Any]] = []
    arrays = 0
    for reply in replies:
        if isinstance(reply, list):
            arrays += 1
            assert reply, (raw, replies)
            responses += reply
        elif reply.get("method") == "stream.event":  # the caller's lifecycle events, before a reply
            assert reply["params"]["event"]["type"] in (
                "container_created",
                "agent_created",
                "agent_destroyed",
            )
        else:
            responses.append(reply)
    for r in responses:
        assert r["jsonrpc"] == "2.0" and "id" in r and ("result" in r) != ("error" in r), (raw, r)
        if "error" in r:
            assert r["error"]["code"] != -32603, (raw, r)  # never an internal error
            assert isinstance(r["error"]["message"], str) and isinstance(r["error"]["data"]["code"], str)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        assert len(responses) == 1 and responses[0]["id"] in (None, *_peekable(raw)), (raw, replies)
        return
    if isinstance(doc, dict) and doc.get("jsonrpc") == "2.0":
        if _is_request(doc):
            mine = [r for r in responses if r["id"] == doc["id"]]
            assert len(mine) == (len(responses)) and len(mine) <= 1, (raw, replies)
            assert mine or _deferred(doc), (raw, replies)
        elif isinstance(doc.get("id"), (bool, float, list, dict)):
            assert [r["id"] for r in responses] == [None], (raw, replies)
        else:  # a notification: an answer only for a failed auth (id null) or a malformed one
            assert len(responses) <= 1 and all(r["id"] is None or "error" in r for r in responses)
        return
    if isinstance(doc, list) and 0 < len(doc) <= MAX_BATCH:
        assert arrays <= 1 and len(responses) <= len(doc), (raw, replies)
        element_ids = [repr(m.get("id")) for m in doc if isinstance(m, dict)]
        assert all(r["id"] is None or repr(r["id"]) in element_ids for r in responses), (raw, replies)
        got = [repr(r["id"]) for r in responses]
        for rpc_id in {repr(m["id"]) for m in doc if _is_request(m) and not _deferred(m)}:
            wanted = sum(1 for m in doc if _is_request(m) and not _deferred(m) and repr(m["id"]) == rpc_id)
            assert got.count(rpc_id) >= wanted, (raw, replies)
        return
    if isinstance(doc, dict) and (
        "__ack" in doc or (isinstance(doc.get("type"), str) and doc["type"].endswith("_response"))
    ):
        assert len(responses) <= 1, (raw, replies)  # acks and echoed responses are ignored
        return
    # anything else (a v1 frame, junk, an empty or huge batch): one error, id null or peeked
    assert len(responses) == 1 and "error" in responses[0], (raw, replies)


def _peekable(raw: str | bytes) -> list[Any]:
    from agentvm.gateway.v2.rpc import peek_id

    return [peek_id(raw)]


def _check(gateway: Any, raw: str | bytes) -> None:
    loop, harness, conn = gateway
    out = loop.run_until_complete(handle_frame(harness.rt, conn, raw))
    check_rpc_replies(raw, [json.loads(p) for p in out])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=rpc_frames)
def test_gateway_answers_every_fuzzed_json_rpc_frame(gateway, raw):
    _check(gateway, raw)


@pytest.mark.slow
@pytest.mark.timeout(900)
@settings(
    max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=rpc_frames)
def test_gateway_answers_ten_thousand_fuzzed_json_rpc_frames(gateway, raw):
    _check(gateway, raw)
