"""The 17 AgentX v1 commands through the gateway, on the real SQLite store."""

from __future__ import annotations

from typing import Any

RECORD_FIELDS = {"imageId", "containerId", "sessionId", "name", "createdAt", "updatedAt", "online"}


async def _image(client: Any, container: str = "user-alice", **config: Any) -> dict[str, Any]:
    data = await client.request("image_create", containerId=container, config={"name": "A", **config})
    return data["record"]


async def test_container_create_is_idempotent_and_listed(harness):
    c = await harness.client()
    assert await c.request("container_create", containerId="user-alice") == {
        "requestId": c.frames[-1]["data"]["requestId"],
        "containerId": "user-alice",
    }
    await c.request("container_create", containerId="user-alice")
    assert (await c.request("container_list"))["containerIds"] == ["user-alice"]
    assert c.types().count("container_created") == 1


async def test_container_get_reports_existence(harness):
    c = await harness.client()
    assert (await c.request("container_get", containerId="nope"))["exists"] is False
    await c.request("container_create", containerId="box")
    got = await c.request("container_get", containerId="box")
    assert got["exists"] is True and got["containerId"] == "box"


async def test_image_create_returns_record_and_subscriptions(harness):
    c = await harness.client()
    data = await c.request(
        "image_create",
        containerId="user-alice",
        config={"name": "My Assistant", "systemPrompt": "Be brief.", "mcpServers": {"fs": {"command": "x"}}},
    )
    record = data["record"]
    assert set(record) >= RECORD_FIELDS
    assert record["name"] == "My Assistant" and record["systemPrompt"] == "Be brief."
    assert record["online"] is False
    assert "mcpServers" not in record  # stored, not returned (protocol §2.1)
    assert data["__subscriptions"] == [record["sessionId"]]
    stored = await harness.store.get_image("tenant-a", record["imageId"])
    assert stored.mcpServers == {"fs": {"command": "x"}}


async def test_image_create_defaults_name(harness):
    c = await harness.client()
    data = await c.request("image_create", containerId="box", config={})
    assert data["record"]["name"] == "New Conversation"


async def test_image_get_list_update_delete(harness):
    c = await harness.client()
    first = await _image(c)
    second = await _image(c, name="B")
    listed = await c.request("image_list", containerId="user-alice")
    assert [r["imageId"] for r in listed["records"]] == [second["imageId"], first["imageId"]]  # newest first
    assert listed["__subscriptions"] == [second["sessionId"], first["sessionId"]]
    got = await c.request("image_get", imageId=first["imageId"])
    assert got["record"]["imageId"] == first["imageId"] and got["__subscriptions"] == [first["sessionId"]]
    updated = await c.request("image_update", imageId=first["imageId"], updates={"name": "Renamed"})
    assert updated["record"]["name"] == "Renamed"
    assert (await c.request("image_delete", imageId=first["imageId"])) == {
        "requestId": c.frames[-1]["data"]["requestId"],
        "imageId": first["imageId"],
    }
    assert (await c.request("image_get", imageId=first["imageId"]))["record"] is None


async def test_image_run_reuses_agent_and_stop_takes_it_offline(harness):
    c = await harness.client()
    img = await _image(c)
    run = await c.request("image_run", imageId=img["imageId"])
    assert run["reused"] is False and run["agentId"].startswith("agent_")
    again = await c.request("image_run", imageId=img["imageId"])
    assert again == {**run, "requestId": again["requestId"], "reused": True}
    assert (await c.request("image_get", imageId=img["imageId"]))["record"]["online"] is True
    agents = await c.request("agent_list", containerId="user-alice")
    assert agents["agents"] == [
        {"agentId": run["agentId"], "containerId": "user-alice", "imageId": img["imageId"]}
    ]
    got = await c.request("agent_get", agentId=run["agentId"])
    assert got["exists"] is True and got["containerId"] == "user-alice"
    await c.request("image_stop", imageId=img["imageId"])
    assert (await c.request("image_get", imageId=img["imageId"]))["record"]["online"] is False
    assert "agent_unregistered" in c.types()


async def test_agent_destroy_and_destroy_all(harness):
    c = await harness.client()
    a, b = await _image(c), await _image(c)
    run_a = await c.request("image_run", imageId=a["imageId"])
    await c.request("image_run", imageId=b["imageId"])
    destroyed = await c.request("agent_destroy", agentId=run_a["agentId"])
    assert destroyed["success"] is True
    assert (await c.request("agent_destroy", agentId=run_a["agentId"]))["success"] is False
    await c.request("agent_destroy_all", containerId="user-alice")
    assert (await c.request("agent_list", containerId="user-alice"))["agents"] == []


async def test_message_send_acks_then_turn_streams_and_persists(harness):
    c = await harness.client()
    img = await _image(c)
    await c.subscribe(img["sessionId"])
    harness.model.add("Hello there friend")
    ack = await c.request("message_send", imageId=img["imageId"], content="Hi")
    assert ack["imageId"] == img["imageId"] and ack["agentId"].startswith("agent_")
    assert "agent_registered" in c.types()
    await harness.run_turns()
    assert c.types().index("message_send_response") < c.types().index("message_persisted")
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]
    assert history["messages"][0]["content"] == "Hi"
    assert history["messages"][1]["content"] == [{"type": "text", "text": "Hello there friend"}]
    assert history["messages"][1]["parentId"] == history["messages"][0]["id"]


async def test_message_send_by_agent_id_and_errors(harness):
    c = await harness.client()
    img = await _image(c)
    run = await c.request("image_run", imageId=img["imageId"])
    ok = await c.request("message_send", agentId=run["agentId"], content="hi")
    assert ok["agentId"] == run["agentId"]
    missing = await c.request("message_send", agentId="agent_nope", content="hi")
    assert missing["error"] == "Agent not found: agent_nope" and missing["agentId"] == "agent_nope"
    neither = await c.request("message_send", content="hi")
    assert neither["error"] == "Either imageId or agentId must be provided"


async def test_retried_message_send_appends_once_and_runs_one_turn(harness):
    c = await harness.client()
    img = await _image(c)
    frame = (
        '{{"type":"message_send_request","data":{{"requestId":"req_same","imageId":"{}","content":"Hi"}},'
        '"source":"command","category":"request","intent":"request","timestamp":0}}'
    ).format(img["imageId"])
    await c.send_raw(frame)
    await c.send_raw(frame)
    harness.model.add("one reply")
    await harness.run_turns()
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]
    assert len(harness.model.requests) == 1


async def test_image_messages_of_unknown_image_is_error_with_empty_messages(harness):
    c = await harness.client()
    data = await c.request("image_messages", imageId="img_missing")
    assert data["error"] == "Image not found: img_missing"
    assert data["messages"] == [] and data["imageId"] == "img_missing"
    assert c.frames[-2]["type"] == "system_error"
    assert c.frames[-2]["data"]["requestId"] == data["requestId"]


async def test_image_create_with_unknown_model_provider_is_rejected(harness):
    from agentvm.adapters.llm.router import SettingsModelResolver
    from agentvm.config import Settings

    harness.rt.models = SettingsModelResolver(Settings(_env_file=None))
    c = await harness.client()
    data = await c.request("image_create", containerId="box", config={"model": "nosuch/model"})
    assert data["error"] and data["code"] == "bad_request"


async def test_images_of_one_container_never_appear_in_another(harness):
    c = await harness.client()
    alice = await _image(c, container="user-alice")
    bob = await _image(c, container="user-bob")
    harness.model.add("for alice", "for bob")
    await c.request("message_send", imageId=alice["imageId"], content="alice says")
    await c.request("message_send", imageId=bob["imageId"], content="bob says")
    await harness.run_turns()
    listed_alice = await c.request("image_list", containerId="user-alice")
    listed_bob = await c.request("image_list", containerId="user-bob")
    assert [r["imageId"] for r in listed_alice["records"]] == [alice["imageId"]]
    assert [r["imageId"] for r in listed_bob["records"]] == [bob["imageId"]]
    assert listed_alice["__subscriptions"] == [alice["sessionId"]]
    agents = await c.request("agent_list", containerId="user-alice")
    assert [a["imageId"] for a in agents["agents"]] == [alice["imageId"]]
    alice_history = await c.request("image_messages", imageId=alice["imageId"])
    texts = [
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
        for m in alice_history["messages"]
    ]
    assert texts == ["alice says", "for alice"]
