"""``$default``: a client frame through the gateway; the replies are posted back to the caller."""

from __future__ import annotations

import base64
import json

from functions.ws_default.app import build_handler

CONNECTION = "Q3xYzfGIoAMCJqg="  # the id in events/apigw-ws-*.json


def _with_body(event, frame):
    event["body"] = json.dumps(frame)
    return event


def test_container_create_replies_to_the_caller(rt, push, connect, load_event, context):
    connect(CONNECTION)
    reply = build_handler(rt)(load_event("apigw-ws-default-container-create.json"), context)
    assert reply == {"statusCode": 200}  # API Gateway's ack of the frame, never sent to the client
    types = [f["type"] for f in push.frames(CONNECTION)]
    assert types == ["container_created", "container_create_response"]
    response = push.frames(CONNECTION)[-1]["data"]
    assert response == {"requestId": "req_1", "containerId": "user-alice"}


def test_image_create_then_message_send_acks_and_enqueues_the_turn(rt, push, connect, load_event, context):
    connect(CONNECTION)
    handler = build_handler(rt)
    handler(load_event("apigw-ws-default-image-create.json"), context)
    created = push.frames(CONNECTION)[-1]
    assert created["type"] == "image_create_response"
    image = created["data"]["record"]
    assert image["name"] == "Helper" and created["data"]["__subscriptions"] == [image["sessionId"]]

    event = load_event("apigw-ws-default-message-send.json")
    frame = json.loads(event["body"])
    frame["data"]["imageId"] = image["imageId"]
    handler(_with_body(event, frame), context)

    types = [f["type"] for f in push.frames(CONNECTION)]
    # agent_registered is the caller's, sent just before the response; message_persisted is the
    # first frame of the turn, sent by the worker.
    assert types[-2:] == ["agent_registered", "message_send_response"]
    assert "message_persisted" not in types
    ack = push.frames(CONNECTION)[-1]["data"]
    assert ack["imageId"] == image["imageId"] and "error" not in ack
    (job,) = rt.queue.pending()  # the turn waits for the worker: this function never runs it
    assert (job.sessionId, job.tenantId, job.requestId) == (image["sessionId"], "default", "req_3")


def test_subscribe_to_a_session_of_the_tenant_is_silent(rt, push, connect, load_event, context):
    connect(CONNECTION)
    handler = build_handler(rt)
    handler(load_event("apigw-ws-default-image-create.json"), context)
    session_id = push.frames(CONNECTION)[-1]["data"]["record"]["sessionId"]
    posts_before = len(push.posts)
    event = load_event("apigw-ws-default-subscribe.json")
    handler(_with_body(event, {"type": "subscribe", "sessionId": session_id}), context)
    assert len(push.posts) == posts_before


def test_malformed_frame_gets_a_system_error(rt, push, connect, load_event, context):
    connect(CONNECTION)
    assert build_handler(rt)(load_event("apigw-ws-default-malformed.json"), context) == {"statusCode": 200}
    (error,) = push.frames(CONNECTION)
    assert error["type"] == "system_error"
    assert error["data"]["details"]["code"] == "bad_request"


def test_frame_from_an_unregistered_connection_is_refused(rt, push, load_event, context):
    build_handler(rt)(load_event("apigw-ws-default-container-create.json"), context)
    error, response = push.frames(CONNECTION)
    assert (error["type"], error["data"]["details"]["code"]) == ("system_error", "unauthorized")
    assert (response["type"], response["data"]["code"]) == ("container_create_response", "unauthorized")
    assert rt.queue.pending() == []


def test_binary_frame_is_decoded(rt, push, connect, load_event, context):
    connect(CONNECTION)
    event = load_event("apigw-ws-default-container-create.json")
    event["body"] = base64.b64encode(event["body"].encode()).decode()
    event["isBase64Encoded"] = True
    build_handler(rt)(event, context)
    assert push.frames(CONNECTION)[-1]["type"] == "container_create_response"


def test_caller_gone_mid_reply_is_not_an_error(rt, push, connect, load_event, context):
    connect(CONNECTION)
    push.gone.add(CONNECTION)  # the client closed the socket right after sending
    reply = build_handler(rt)(load_event("apigw-ws-default-container-create.json"), context)
    assert reply == {"statusCode": 200}
    assert push.posts == []
    # the frame itself was handled: the container exists
    from agentvm.hosts.aws import run_sync

    assert run_sync(rt.store.get_container("default", "user-alice")) is not None
