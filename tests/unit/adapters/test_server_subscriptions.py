"""Server-side subscriptions (docs/protocol.md): a request carrying ``"__subscribe": true`` has the
gateway subscribe its connection to the sessions the response lists, and the response says so
(``"__subscribed": true``) next to the unchanged ``__subscriptions``. A plain AgentX v1 client
(no such key) gets exactly the frames it got before and no subscription."""

from __future__ import annotations

import json

import pytest

from agentvm.gateway.v1.frames import RequestFrame, parse_frame
from tests.harness import Harness


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


async def _images(harness: Harness, n: int) -> list[dict]:
    owner = await harness.client()
    return [
        (await owner.request("image_create", containerId="u", config={"name": f"I{i}"}))["record"]
        for i in range(n)
    ]


async def test_an_image_list_asking_for_it_subscribes_the_caller_to_every_listed_session(harness):
    images = await _images(harness, 2)
    sdk = await harness.client(batch=True)

    listed = await sdk.request("image_list", containerId="u", __subscribe=True)

    sessions = sorted(i["sessionId"] for i in images)
    assert sorted(listed["__subscriptions"]) == sessions  # what it means for AgentX clients
    assert listed["__subscribed"] is True
    for session_id in sessions:
        assert sdk.connection_id in await harness.rt.connections.subscribers(session_id)


async def test_the_subscribed_caller_receives_a_turn_started_by_another_connection(harness):
    (image,) = await _images(harness, 1)
    sdk = await harness.client(batch=True)
    await sdk.request("image_list", containerId="u", __subscribe=True)
    sender = await harness.client()
    harness.model.add("hello there")

    await sender.request("message_send", imageId=image["imageId"], content="go")
    await harness.run_turns()

    assert sdk.turn_frames()[-1]["type"] == "conversation_end"
    assert "".join(f["data"]["text"] for f in sdk.turn_frames() if f["type"] == "text_delta") == "hello there"


async def test_image_create_and_image_get_asking_for_it_subscribe_the_caller_too(harness):
    sdk = await harness.client()
    created = await sdk.request("image_create", containerId="u", config={"name": "A"}, __subscribe=True)
    session_id = created["record"]["sessionId"]
    assert created["__subscriptions"] == [session_id] and created["__subscribed"] is True
    assert await harness.rt.connections.subscribers(session_id) == [sdk.connection_id]

    other = await harness.client()
    got = await other.request("image_get", imageId=created["record"]["imageId"], __subscribe=True)
    assert got["__subscribed"] is True
    assert sorted(await harness.rt.connections.subscribers(session_id)) == sorted(
        [sdk.connection_id, other.connection_id]
    )


async def test_a_plain_v1_client_gets_subscriptions_listed_and_is_not_subscribed(harness):
    (image,) = await _images(harness, 1)
    plain = await harness.client()

    listed = await plain.request("image_list", containerId="u")
    got = await plain.request("image_get", imageId=image["imageId"])

    assert set(listed) == {"requestId", "records", "__subscriptions"}  # no new key
    assert listed["__subscriptions"] == [image["sessionId"]]
    assert set(got) == {"requestId", "record", "__subscriptions"}
    assert await harness.rt.connections.subscribers(image["sessionId"]) == []


async def test_a_request_listing_no_session_is_answered_as_before_even_when_asking(harness):
    sdk = await harness.client()
    listed = await sdk.request("container_list", __subscribe=True)
    assert "__subscribed" not in listed and "__subscriptions" not in listed


def test_only_a_literal_true_asks_for_server_side_subscriptions():
    def frame(value: object) -> RequestFrame:
        raw = {"type": "image_list_request", "data": {"requestId": "r", "__subscribe": value}}
        parsed = parse_frame(json.dumps(raw), max_bytes=65536)
        assert isinstance(parsed, RequestFrame)
        return parsed

    assert frame(True).subscribe_listed is True
    assert frame("true").subscribe_listed is False
    assert frame(1).subscribe_listed is False
