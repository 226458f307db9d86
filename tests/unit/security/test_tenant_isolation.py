"""Nothing of one tenant is visible, listable, subscribable or writable by another."""

from __future__ import annotations


async def test_same_container_id_in_two_tenants_is_two_containers(harness):
    a, b = await harness.client("tenant-a"), await harness.client("tenant-b")
    img_a = (await a.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    img_b = (await b.request("image_create", containerId="user-alice", config={"name": "B"}))["record"]
    assert [r["imageId"] for r in (await a.request("image_list", containerId="user-alice"))["records"]] == [
        img_a["imageId"]
    ]
    assert [r["imageId"] for r in (await b.request("image_list", containerId="user-alice"))["records"]] == [
        img_b["imageId"]
    ]
    assert [r["imageId"] for r in (await b.request("image_list"))["records"]] == [img_b["imageId"]]


async def test_other_tenants_ids_answer_exactly_like_missing_ids(harness):
    a, b = await harness.client("tenant-a"), await harness.client("tenant-b")
    img = (await a.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    run = await a.request("image_run", imageId=img["imageId"])
    harness.model.add("secret reply")
    await a.request("message_send", imageId=img["imageId"], content="private")
    await harness.run_turns()

    def strip(d):
        return {k: v for k, v in d.items() if k != "requestId"}

    for type_, key, other in [
        ("image_get", "imageId", "img_missing"),
        ("image_messages", "imageId", "img_missing"),
        ("image_run", "imageId", "img_missing"),
        ("image_stop", "imageId", "img_missing"),
        ("image_delete", "imageId", "img_missing"),
        ("agent_interrupt", "imageId", "img_missing"),
    ]:
        foreign = strip(await b.request(type_, **{key: img["imageId"]}))
        missing = strip(await b.request(type_, **{key: other}))
        assert foreign == {
            k: (
                img["imageId"]
                if v == other
                else v.replace(other, img["imageId"])
                if isinstance(v, str)
                else v
            )
            for k, v in missing.items()
        }, type_
    assert (await b.request("agent_get", agentId=run["agentId"]))["exists"] is False
    assert (await b.request("agent_destroy", agentId=run["agentId"]))["success"] is False
    assert (await b.request("container_get", containerId="user-alice"))["exists"] is False
    assert (await b.request("container_list"))["containerIds"] == []
    assert (await b.request("agent_list", containerId="user-alice"))["agents"] == []
    sent = await b.request("message_send", imageId=img["imageId"], content="hijack")
    assert sent["code"] == "not_found"
    replies = await b.subscribe(img["sessionId"])
    assert replies[0]["data"]["details"]["code"] == "not_found"
    # and tenant A's data is intact
    history = await a.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]
    assert (await a.request("image_get", imageId=img["imageId"]))["record"]["online"] is True


async def test_session_events_reach_only_subscribers_of_that_tenant(harness):
    a, b = await harness.client("tenant-a"), await harness.client("tenant-b")
    img = (await a.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    await b.subscribe(img["sessionId"])  # refused
    harness.model.add("for alice only")
    await a.request("message_send", imageId=img["imageId"], content="hi")
    await harness.run_turns()
    assert any(f["type"] == "assistant_message" for f in a.frames)
    assert not any(f.get("context", {}).get("sessionId") == img["sessionId"] for f in b.frames)
