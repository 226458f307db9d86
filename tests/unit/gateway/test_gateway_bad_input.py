"""Every bad input gets the protocol's error shape, and the gateway keeps serving."""

from __future__ import annotations

import json

import pytest


def _request(type_: str, data: object) -> str:
    return json.dumps(
        {"type": type_, "data": data, "source": "command", "category": "request", "intent": "request"}
    )


async def _still_serving(client) -> None:
    assert (await client.request("container_list"))["containerIds"] == []


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("{not json", "bad_request"),
        (b"\xff\xfe\x00garbage", "bad_request"),
        ("[1, 2, 3]", "bad_request"),
        ('"just a string"', "bad_request"),
        ('{"data": {}}', "bad_request"),
        ('{"type": 42}', "bad_request"),
        ('{"type": "subscribe"}', "bad_request"),
        ('{"type": "subscribe", "sessionId": "s", "afterSeq": -1}', "bad_request"),
        ('{"type": "auth", "headers": "nope"}', "bad_request"),
        ('{"type": "make_coffee"}', "unknown_request"),
    ],
)
async def test_malformed_frame_answers_system_error(harness, raw, code):
    c = await harness.client()
    await _still_serving(c)  # the connection speaks v1 (a first frame "[...]" would choose v2)
    replies = await c.send_raw(raw)
    assert [r["type"] for r in replies] == ["system_error"]
    assert replies[0]["data"]["details"]["code"] == code
    assert replies[0]["category"] == "error" and replies[0]["data"]["message"]
    await _still_serving(c)


async def test_unknown_request_type_gets_its_response_with_error(harness):
    c = await harness.client()
    replies = await c.send_raw(_request("image_fork_request", {"requestId": "r1"}))
    assert [r["type"] for r in replies] == ["system_error", "image_fork_response"]
    assert replies[1]["data"] == {
        "requestId": "r1",
        "error": "unknown request type 'image_fork_request'",
        "code": "unknown_request",
    }


@pytest.mark.parametrize(
    ("type_", "data", "needle"),
    [
        ("image_get_request", {"requestId": "r"}, "imageId"),
        ("image_get_request", {"requestId": "r", "imageId": 7}, "imageId"),
        ("image_get_request", {"requestId": "r", "imageId": ""}, "imageId"),
        ("image_create_request", {"requestId": "r", "containerId": "c", "config": "x"}, "config"),
        (
            "image_create_request",
            {"requestId": "r", "containerId": "c", "config": {"name": 5}},
            "config.name",
        ),
        ("message_send_request", {"requestId": "r", "imageId": "i"}, "content"),
        ("message_send_request", {"requestId": "r", "imageId": "i", "content": ""}, "content"),
        (
            "message_send_request",
            {"requestId": "r", "imageId": "i", "content": [{"type": "video"}]},
            "content",
        ),
        ("image_update_request", {"requestId": "r", "imageId": "i"}, "updates"),
        ("container_create_request", {"requestId": "r", "containerId": "x" * 200}, "containerId"),
    ],
)
async def test_missing_or_mistyped_field_is_a_clear_error(harness, type_, data, needle):
    c = await harness.client()
    replies = await c.send_raw(_request(type_, data))
    assert [r["type"] for r in replies] == ["system_error", type_.replace("_request", "_response")]
    response = replies[1]["data"]
    assert response["requestId"] == "r" and response["code"] == "bad_request"
    assert needle in response["error"]
    await _still_serving(c)


async def test_request_without_request_id_gets_system_error_only(harness):
    c = await harness.client()
    replies = await c.send_raw(_request("container_list_request", {}))
    assert [r["type"] for r in replies] == ["system_error"]
    assert "requestId" in replies[0]["data"]["message"]


async def test_request_with_data_not_object_is_rejected(harness):
    c = await harness.client()
    replies = await c.send_raw(_request("container_list_request", "nope"))
    assert [r["type"] for r in replies] == ["system_error"]


async def test_oversized_frame_is_rejected_without_parsing(harness):
    c = await harness.client()
    huge = _request("message_send_request", {"requestId": "r", "imageId": "i", "content": "x" * 70_000})
    replies = await c.send_raw(huge)
    assert replies[0]["data"]["details"]["code"] == "frame_too_large"
    await _still_serving(c)


async def test_unknown_ids_are_not_found_errors(harness):
    c = await harness.client()
    for type_, field in [
        ("image_run", "imageId"),
        ("image_stop", "imageId"),
        ("image_delete", "imageId"),
        ("image_messages", "imageId"),
        ("agent_interrupt", "imageId"),
        ("message_send", "imageId"),
    ]:
        extra = {"content": "hi"} if type_ == "message_send" else {}
        data = await c.request(type_, **{field: "img_nope"}, **extra)
        assert data["error"] == "Image not found: img_nope", type_
        assert data["code"] == "not_found"
    assert (await c.request("image_update", imageId="img_nope", updates={}))["code"] == "not_found"
    assert (await c.request("image_get", imageId="img_nope"))["record"] is None
    assert (await c.request("agent_get", agentId="agent_nope"))["exists"] is False


async def test_subscribe_to_unknown_session_is_an_error(harness):
    c = await harness.client()
    replies = await c.subscribe("sess_nope")
    assert replies[0]["type"] == "system_error" and replies[0]["data"]["details"]["code"] == "not_found"


async def test_ack_auth_and_echoed_responses_are_tolerated(harness):
    c = await harness.client()
    assert await c.send_raw('{"__ack": "conn_1_1"}') == []
    assert await c.send_raw('{"type": "auth", "headers": {"Authorization": "Bearer x"}}') == []
    assert await c.send_raw('{"type": "image_list_response", "data": {}}') == []
    await _still_serving(c)


async def test_unregistered_connection_is_unauthorized(harness):
    from agentvm.gateway.dispatch import handle_frame

    replies = [
        json.loads(p)
        for p in await handle_frame(
            harness.rt, "conn_ghost", _request("container_list_request", {"requestId": "r"})
        )
    ]
    assert replies[-1]["data"]["code"] == "unauthorized"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"containerId": "u1", "config": {"name": "x", "mcpServers": json.loads("[" * 80 + "]" * 80)}},
            "nested",
        ),
        ({"containerId": "u1\ud800"}, "lone surrogate"),
        ({"containerId": "u1", "config": {"name": "\udfff"}}, "lone surrogate"),
        ({"containerId": "u1", "config": {"maxSteps": 10**30}}, "integer beyond"),
    ],
)
async def test_hostile_content_gets_a_bad_request_with_the_request_id(harness, data, message):
    c = await harness.client()
    raw = json.dumps({"type": "image_create_request", "data": {**data, "requestId": "r1"}})
    replies = await c.send_raw(raw)
    assert [r["type"] for r in replies] == ["system_error", "image_create_response"]
    assert replies[1]["data"]["requestId"] == "r1" and replies[1]["data"]["code"] == "bad_request"
    assert message in replies[1]["data"]["error"]
    await _still_serving(c)


async def test_a_huge_after_seq_is_a_bad_request_not_an_internal_error(harness):
    c = await harness.client()
    replies = await c.send_raw(
        '{"type": "subscribe", "sessionId": "s", "afterSeq": 123456789012345678901234567890}'
    )
    assert [r["data"]["details"]["code"] for r in replies] == ["bad_request"]
    await _still_serving(c)


async def test_an_oversized_request_still_gets_its_response(harness):
    c = await harness.client()
    big = "x" * (harness.rt.turns.max_frame_bytes + 10)
    raw = json.dumps(
        {"type": "message_send_request", "data": {"imageId": "img_1", "content": big, "requestId": "r9"}}
    )
    replies = await c.send_raw(raw)
    assert [r["type"] for r in replies] == ["system_error", "message_send_response"]
    assert replies[1]["data"]["requestId"] == "r9" and replies[1]["data"]["code"] == "frame_too_large"
    await _still_serving(c)


async def test_a_frame_too_deep_to_parse_still_gets_its_response(harness):
    c = await harness.client()
    deep = '{"a":' * 5000 + "1" + "}" * 5000  # past the JSON parser's recursion limit
    raw = '{"type": "image_create_request", "data": {"requestId": "r7", "config": ' + deep + "}}"
    replies = await c.send_raw(raw)
    assert [r["type"] for r in replies] == ["system_error", "image_create_response"]
    assert replies[1]["data"]["requestId"] == "r7" and replies[1]["data"]["code"] == "bad_request"
    await _still_serving(c)
