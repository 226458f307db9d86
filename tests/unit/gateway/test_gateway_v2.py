"""AgentX v2 (JSON-RPC 2.0) through the gateway, on the in-process harness (real SQLite, the queue,
the worker): the methods, a turn's stream.event notifications, message.send answered at the
turn's end, interrupt, history, resume, errors, and one protocol per connection."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources
from tests.v2_client import rpc, v2_client

TEXT_TURN = [
    "turn_request",
    "message_start",
    "conversation_start",
    "text_delta",
    "conversation_responding",
    "message_stop",
    "assistant_message",
    "conversation_end",
    "turn_response",
]


def _shape(events: list[dict[str, Any]]) -> list[str]:
    """The event types, runs of text deltas as one (how text is cut into deltas varies)."""
    out: list[str] = []
    for e in events:
        if not (e["type"] == "text_delta" and "text_delta" in out[-2:]):
            out.append(e["type"])
    return out


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")


async def _image(c: Any, **config: Any) -> dict[str, Any]:
    return (await c.call("image.create", name="Helper", **config))["record"]


async def _send_and_run(harness: Any, c: Any, image_id: str, content: str = "Hi", **params: Any) -> Any:
    msg = rpc("message.send", {"imageId": image_id, "content": content, **params})
    direct = await c.send(msg)
    await harness.run_turns()
    return msg["id"], direct


# -- methods ---------------------------------------------------------------------------------------
async def test_image_create_takes_the_config_flattened_into_the_default_container(harness):
    c = await v2_client(harness)
    record = (await c.call("image.create", name="Helper", systemPrompt="Be brief."))["record"]
    assert record["name"] == "Helper" and record["systemPrompt"] == "Be brief."
    assert record["containerId"] == "default"
    assert (await c.call("container.list"))["containerIds"] == ["default"]
    assert [e["type"] for e in c.events()] == ["container_created"]  # the caller's, before the result
    own = (await c.call("image.create", containerId="user-alice", name="Other"))["record"]
    assert own["containerId"] == "user-alice"
    old_style = (await c.call("image.create", containerId="box", config={"name": "Nested"}))["record"]
    assert old_style["name"] == "Nested" and old_style["containerId"] == "box"


async def test_methods_answer_with_or_without_the_runtime_or_agentx_prefix(harness):
    c = await v2_client(harness)
    img = await _image(c)
    for method in ("image.get", "runtime.image.get", "agentx.image.get"):
        assert (await c.call(method, imageId=img["imageId"]))["record"]["imageId"] == img["imageId"]


async def test_image_run_names_the_instance_and_its_session(harness):
    c = await v2_client(harness)
    img = await _image(c)
    run = await c.call("image.run", imageId=img["imageId"])
    assert run == {
        "imageId": img["imageId"],
        "instanceId": run["instanceId"],
        "agentId": run["instanceId"],
        "sessionId": img["sessionId"],
        "containerId": "default",
        "reused": False,
    }
    assert [e["type"] for e in c.events()][-1] == "agent_created"
    assert c.events()[-1]["data"]["instanceId"] == run["instanceId"]
    assert (await c.call("runtime.image.run", imageId=img["imageId"]))["reused"] is True
    got = await c.call("instance.get", instanceId=run["instanceId"])
    assert got == {
        "agent": {
            "instanceId": run["instanceId"],
            "agentId": run["instanceId"],
            "imageId": img["imageId"],
            "containerId": "default",
            "sessionId": img["sessionId"],
            "lifecycle": "running",
        },
        "exists": True,
    }
    assert (await c.call("agent.get", agentId=run["instanceId"])) == got  # the 2.0-2.6 name
    assert (await c.call("instance.list"))["agents"] == [got["agent"]]
    assert (await c.call("instance.list", containerId="elsewhere"))["agents"] == []
    assert (await c.call("image.get", imageId=img["imageId"]))["record"]["instanceId"] == run["instanceId"]
    destroyed = await c.call("instance.destroy", instanceId=run["instanceId"])
    assert destroyed == {"instanceId": run["instanceId"], "agentId": run["instanceId"], "success": True}
    assert (await c.call("instance.get", instanceId=run["instanceId"])) == {"agent": None, "exists": False}


async def test_image_update_list_stop_delete(harness):
    c = await v2_client(harness)
    a, b = await _image(c), await _image(c)
    listed = await c.call("image.list")
    assert [r["imageId"] for r in listed["records"]] == [b["imageId"], a["imageId"]]
    updated = await c.call("image.update", imageId=a["imageId"], updates={"name": "Renamed"})
    assert updated["record"]["name"] == "Renamed"
    assert await c.call("image.stop", imageId=a["imageId"]) == {"imageId": a["imageId"]}
    assert await c.call("image.delete", imageId=a["imageId"]) == {"imageId": a["imageId"]}
    assert (await c.call("image.get", imageId=a["imageId"]))["record"] is None


async def test_custom_data_is_stored_and_returned_and_an_update_replaces_it(harness):
    c = await v2_client(harness)
    img = await _image(c, customData={"favorited": True, "tags": ["work"]})
    assert img["customData"] == {"favorited": True, "tags": ["work"]}
    plain = await _image(c)
    assert "customData" not in plain  # none given, none shown (2.x: "no customData")
    updated = await c.call("image.update", imageId=img["imageId"], updates={"customData": {"sortOrder": 2}})
    assert updated["record"]["customData"] == {"sortOrder": 2}
    got = await c.call("image.get", imageId=img["imageId"])
    assert got["record"]["customData"] == {"sortOrder": 2}
    listed = {r["imageId"]: r.get("customData") for r in (await c.call("image.list"))["records"]}
    assert listed == {img["imageId"]: {"sortOrder": 2}, plain["imageId"]: None}
    for bad in ("favorited", {"x": "y" * 16_400}):
        error = (await c.call_raw("image.create", {"name": "Bad", "customData": bad}))["error"]
        assert error["code"] == -32602 and error["message"].startswith("invalid params: customData"), error


async def test_a_bare_model_name_is_that_model_on_the_provider_of_the_default_model(harness):
    c = await v2_client(harness)
    provider = harness.rt.models.resolve(None)[2].partition("/")[0]
    img = await _image(c, model="claude-sonnet-4-6")  # agentxjs 2.9's README names models so
    assert img["model"] == f"{provider}/claude-sonnet-4-6"
    full = await _image(c, model="echo/echo-1")  # a provider/model ref stays as it is
    assert full["model"] == "echo/echo-1"
    updated = await c.call("image.update", imageId=full["imageId"], updates={"model": "gpt-4o-mini"})
    assert updated["record"]["model"] == f"{provider}/gpt-4o-mini"


async def test_os_list_and_read_show_an_images_workspace_and_nothing_without_one(harness, tmp_path):
    from agentvm.adapters.sandbox.process import LocalSandbox

    c = await v2_client(harness)
    plain = await _image(c)  # no sandbox tools: no workspace (2.x: an image without an OS)
    assert await c.call("os.list", imageId=plain["imageId"]) == {"files": []}
    error = (await c.call_raw("os.read", {"imageId": plain["imageId"], "path": "a.txt"}))["error"]
    assert error["data"] == {"code": "not_found"}
    harness.rt.sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False)
    boxed = await _image(c, containerId="box", tools=[{"type": "sandbox"}])
    await harness.rt.sandbox.write("tenant-a", "box", "notes/a.txt", b"hello")
    assert await c.call("os.list", imageId=boxed["imageId"]) == {
        "files": [{"name": "notes", "path": "notes", "type": "directory"}]
    }
    listed = await c.call("os.list", imageId=boxed["imageId"], path="notes")
    assert listed == {"files": [{"name": "a.txt", "path": "notes/a.txt", "type": "file"}]}
    assert await c.call("os.read", imageId=boxed["imageId"], path="notes/a.txt") == {"content": "hello"}
    for params, code in [
        ({"imageId": boxed["imageId"], "path": "../../etc/passwd"}, -32602),
        ({"imageId": boxed["imageId"]}, -32602),
        ({"imageId": boxed["imageId"], "path": "missing.txt"}, -32602),
    ]:
        assert (await c.call_raw("os.read", params))["error"]["code"] == code, params
    write = await c.call_raw("os.write", {"imageId": boxed["imageId"], "path": "x", "content": "y"})
    assert write["error"]["code"] == -32601  # not served: files change through the agent's tools


# -- a turn ----------------------------------------------------------------------------------------
async def test_message_send_streams_2x_events_and_answers_when_the_turn_ends(harness):
    c = await v2_client(harness)
    img = await _image(c)
    harness.model.add("Hello there friend")
    rpc_id, direct = await _send_and_run(harness, c, img["imageId"])
    assert [m for m in direct if not isinstance(m, dict) or "id" in m] == []  # not answered at once
    turn = c.turn_events()
    assert _shape(turn) == TEXT_TURN
    assert "".join(e["data"]["text"] for e in turn if e["type"] == "text_delta") == "Hello there friend"
    seqs = [e["seq"] for e in turn]
    assert seqs == sorted(seqs) and seqs[0] == 100_001 and seqs[-1] == seqs[-2]  # turn_response shares
    first = turn[0]
    assert first["data"]["messageId"].startswith("msg_") and first["data"]["turnId"].startswith("turn_")
    for e in turn:
        assert (
            e["context"]["instanceId"] == e["context"]["agentId"]
            and e["context"]["imageId"] == img["imageId"]
        )
        assert e["context"]["sessionId"] == img["sessionId"]
    assert {e["source"] for e in turn if e["type"] in ("message_start", "text_delta")} == {"runtime"}
    response = turn[-1]["data"]
    assert (
        response["turnId"] == first["data"]["turnId"] and response["messageId"] == first["data"]["messageId"]
    )
    assert response["stopReason"] == "end_turn" and response["usage"]["outputTokens"] > 0
    (answer,) = c.responses(rpc_id)
    assert answer["result"] == {
        "instanceId": turn[0]["context"]["instanceId"],
        "agentId": turn[0]["context"]["instanceId"],
        "imageId": img["imageId"],
        "turnId": first["data"]["turnId"],
        "status": "completed",
    }
    notifications = [m for m in c.messages() if m.get("method") == "stream.event"]
    assert {m["params"]["topic"] for m in notifications if "seq" in m["params"]["event"]} == {
        img["sessionId"]
    }
    assert c.messages().index(answer) > c.messages().index(notifications[-1])  # after turn_response


async def test_message_send_with_ack_answers_at_once(harness):
    c = await v2_client(harness)
    img = await _image(c)
    harness.model.add("ok")
    msg = rpc("message.send", {"imageId": img["imageId"], "content": "Hi", "options": {"ack": True}})
    direct = await c.send(msg)
    result = direct[-1]["result"]
    assert result["status"] == "accepted" and result["imageId"] == img["imageId"]
    assert direct[0]["params"]["event"]["type"] == "agent_created"
    await harness.run_turns()
    assert len(c.responses(msg["id"])) == 1  # the worker does not answer it again
    assert c.types()[-1] == "turn_response"


async def test_a_retried_message_send_appends_once_and_is_answered_with_the_turns_status(harness):
    c = await v2_client(harness)
    img = await _image(c)
    harness.model.add("one reply")
    params = {"imageId": img["imageId"], "content": "Hi", "requestId": "req-app-1"}
    first = rpc("message.send", params)
    await c.send(first)
    await harness.run_turns()
    again = await v2_client(harness)  # a reconnected client retries the same request
    retry = rpc("message.send", params)
    direct = await again.send(retry)
    assert direct[-1]["result"]["status"] == "completed"
    assert direct[-1]["result"]["turnId"] == c.responses(first["id"])[0]["result"]["turnId"]
    history = await c.call("image.messages", imageId=img["imageId"])
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
    assert len(harness.model.requests) == 1


async def test_an_interrupted_turn_ends_interrupted_and_is_answered_so(harness):
    harness.model.word_delay_s = 0.02
    c = await v2_client(harness)
    img = await _image(c)
    harness.model.add(" ".join(f"w{i}" for i in range(200)))
    msg = rpc("message.send", {"imageId": img["imageId"], "content": "talk"})
    await c.send(msg)
    run = asyncio.create_task(harness.run_turns())
    for _ in range(200):
        if "text_delta" in c.types():
            break
        await asyncio.sleep(0.01)
    stopped = await c.call("instance.interrupt", imageId=img["imageId"])
    assert stopped["imageId"] == img["imageId"] and stopped["instanceId"].startswith("agent_")
    await asyncio.wait_for(run, 10)
    types = c.types()
    assert types[-4:] == ["message_stop", "assistant_message", "conversation_end", "turn_response"]
    assert "interrupted" in types and c.events()[types.index("interrupted")]["data"] == {"reason": "user"}
    assert c.events()[-2]["data"] == {"reason": "interrupted"}
    assert c.responses(msg["id"])[0]["result"]["status"] == "interrupted"


async def test_a_tool_turn_has_no_tool_call_message_and_folds_calls_into_assistant_messages(harness):
    harness.rt.tools = ToolSources()
    c = await v2_client(harness)
    img = await _image(c, tools=[{"type": "builtin", "name": "calculator"}])
    harness.model.add(
        Calls(("calculator", {"expression": "6*7"}), text="Let me add."),
        Calls(("calculator", {"expression": "1+1"})),
        "It is 42.",
    )
    rpc_id, _ = await _send_and_run(harness, c, img["imageId"], "what is 6*7?")
    types = c.types()
    assert "tool_call_message" not in types
    assistants = [e["data"] for e in c.turn_events() if e["type"] == "assistant_message"]
    assert [[p["type"] for p in m["content"]] for m in assistants] == [
        ["text", "tool-call"],
        ["tool-call"],
        ["text"],
    ]
    assert assistants[0]["content"][1] == {
        "type": "tool-call",
        "id": assistants[0]["content"][1]["id"],
        "name": "calculator",
        "input": {"expression": "6*7"},
    }
    # the text-less step's message follows its message_stop, with its seq
    turn = c.turn_events()
    i = next(
        i
        for i, e in enumerate(turn)
        if e["type"] == "assistant_message"
        and len(e["data"]["content"]) == 1
        and e["data"]["content"][0]["type"] == "tool-call"
    )
    assert turn[i - 1]["type"] == "message_stop" and turn[i - 1]["seq"] == turn[i]["seq"]
    assert types.count("tool_result") == types.count("tool_result_message") == 2
    assert c.responses(rpc_id)[0]["result"]["status"] == "completed"
    # history: the same messages, folded the same way
    history = (await c.call("image.messages", imageId=img["imageId"]))["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert all(m["subtype"] != "tool-call" for m in history)
    folded = [m for m in history if m["role"] == "assistant"]
    assert [(m["id"], m["content"]) for m in folded] == [(m["id"], m["content"]) for m in assistants]


async def test_a_turn_waiting_for_approval_answers_suspended_then_goes_on_after_approve(harness):
    harness.rt.tools = ToolSources()
    c = await v2_client(harness)
    config = {"tools": [{"type": "builtin", "name": "calculator"}], "approval": {"tools": "*"}}
    img = await _image(c, **config)
    harness.model.add(Calls(("calculator", {"expression": "6*7"})), "It is 42.")
    rpc_id, _ = await _send_and_run(harness, c, img["imageId"], "add")
    assert c.responses(rpc_id)[0]["result"]["status"] == "suspended"
    assert c.types()[-2:] == ["tool_approval_requested", "turn_suspended"]
    (wait,) = (await c.call("agentvm.tool.waits", imageId=img["imageId"]))["waits"]
    approved = await c.call(
        "agentvm.tool.approve", turnId=wait["turnId"], toolCallId=wait["toolCallId"], approved=True
    )
    assert approved["status"] == "approved"
    again = await c.call_raw(
        "agentvm.tool.approve",
        {"turnId": wait["turnId"], "toolCallId": wait["toolCallId"], "approved": False},
    )
    assert again["error"]["code"] == 409 and again["error"]["data"]["code"] == "already_answered"
    await harness.run_turns()
    assert c.types()[-2:] == ["conversation_end", "turn_response"]
    assert len(c.responses(rpc_id)) == 1  # answered once: when it suspended


# -- resume ----------------------------------------------------------------------------------------
async def test_resume_from_a_seq_sends_the_frames_from_that_seq_on_rendered_the_same(harness):
    c = await v2_client(harness)
    img = await _image(c)
    harness.model.add("alpha beta gamma")
    await _send_and_run(harness, c, img["imageId"])
    live = c.turn_events()
    later = await v2_client(harness)
    last = live[4]["seq"]  # it got the frames up to conversation_responding
    assert await later.call("agentvm.subscribe", sessionId=img["sessionId"], lastSeq=last) == {
        "sessionId": img["sessionId"]
    }
    replayed = later.turn_events()
    assert replayed[0]["seq"] == last and all(e["seq"] >= last for e in replayed)
    strip = [{k: v for k, v in e.items() if k != "timestamp"} for e in replayed]
    sent = [{k: v for k, v in e.items() if k != "timestamp"} for e in live if e["seq"] >= last]
    for e in strip + sent:
        if e["type"] == "turn_response":
            e["data"] = {k: v for k, v in e["data"].items() if k not in ("duration", "timestamp")}
    assert strip == sent
    everything = await v2_client(harness)
    await everything.call("agentvm.subscribe", sessionId=img["sessionId"], lastSeq=0)
    replayed_all = everything.turn_events()  # the text merged into one delta, as v1 replays it
    assert [e["type"] for e in replayed_all if e["type"] != "text_delta"] == [
        e["type"] for e in live if e["type"] != "text_delta"
    ]
    assert _text(replayed_all) == _text(live) == "alpha beta gamma"


async def test_resume_of_a_continued_turn_renders_its_suspended_part_then_the_continuation_as_sent(harness):
    harness.rt.tools = ToolSources()
    c = await v2_client(harness)
    config = {"tools": [{"type": "builtin", "name": "calculator"}], "approval": {"tools": "*"}}
    img = await _image(c, **config)
    harness.model.add(Calls(("calculator", {"expression": "6*7"}), text="Let me see."), "It is 42.")
    await _send_and_run(harness, c, img["imageId"], "add")
    (wait,) = (await c.call("agentvm.tool.waits", imageId=img["imageId"]))["waits"]
    await c.call("agentvm.tool.approve", turnId=wait["turnId"], toolCallId=wait["toolCallId"], approved=True)
    await harness.run_turns()
    live = c.turn_events()

    def comparable(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [{k: v for k, v in e.items() if k != "timestamp"} for e in events]
        for e in out:
            if e["type"] == "turn_response":
                e["data"] = {k: v for k, v in e["data"].items() if k not in ("duration", "timestamp")}
        return out

    # from a seq inside the continuation: rendered as its worker rendered it (the text merged)
    cut = next(e["seq"] for e in live if e["type"] == "tool_result")
    later = await v2_client(harness)
    await later.call("agentvm.subscribe", sessionId=img["sessionId"], lastSeq=cut)
    resumed = later.turn_events()
    assert comparable([e for e in resumed if e["type"] != "text_delta"]) == comparable(
        [e for e in live if e["seq"] >= cut and e["type"] != "text_delta"]
    )
    assert _text(resumed) == "It is 42."
    # from before the suspension: the whole turn, each event once, the text merged per step
    everything = await v2_client(harness)
    await everything.call("agentvm.subscribe", sessionId=img["sessionId"], lastSeq=0)
    whole = everything.turn_events()
    assert [(e["seq"], e["type"]) for e in whole if e["type"] != "text_delta"] == [
        (e["seq"], e["type"]) for e in live if e["type"] != "text_delta"
    ]
    assert _text(whole) == _text(live) == "Let me see.It is 42."


async def test_subscribe_notification_of_2x_follows_a_session(harness):
    owner = await v2_client(harness)
    img = await _image(owner)
    watcher = await v2_client(harness)
    assert await watcher.notify("subscribe", topic=img["sessionId"]) == []  # a notification: no reply
    harness.model.add("seen by both")
    await _send_and_run(harness, owner, img["imageId"])
    assert watcher.types() == owner.types()[-len(watcher.types()) :]
    assert watcher.types()[-1] == "turn_response"


# -- errors ----------------------------------------------------------------------------------------
async def test_bad_frames_get_json_rpc_errors(harness):
    c = await v2_client(harness)
    await c.call("container.list")  # the connection speaks v2
    cases: list[tuple[str, Any, int]] = [
        ("not json", None, -32700),
        (json.dumps({"jsonrpc": "2.0", "id": 1}), 1, -32600),
        (json.dumps({"jsonrpc": "2.0", "method": "nope.nothing", "id": 2}), 2, -32601),
        (json.dumps({"jsonrpc": "2.0", "method": "llm.list", "id": 3}), 3, -32601),
        (json.dumps({"jsonrpc": "2.0", "method": "image.get", "params": ["img_1"], "id": 4}), 4, -32602),
        (json.dumps({"jsonrpc": "2.0", "method": "image.get", "params": {"imageId": 5}, "id": 5}), 5, -32602),
        (json.dumps({"jsonrpc": "2.0", "method": "image.get", "params": 7, "id": 6}), 6, -32600),
        (
            json.dumps({"jsonrpc": "2.0", "method": "image.messages", "params": {"imageId": "x"}, "id": 8}),
            8,
            404,
        ),
        (json.dumps({"jsonrpc": "2.0", "method": "image.get", "id": True}), None, -32600),
        (json.dumps([]), None, -32600),
        (json.dumps({"type": "image_list_request", "data": {"requestId": "r"}}), None, -32600),  # v1
        (
            '{"jsonrpc": "2.0", "method": "image.get", "id": 9, "params": ' + "[" * 100 + "]" * 100 + "}",
            9,
            -32600,
        ),
    ]
    for raw, rpc_id, code in cases:
        (reply,) = await c.send_raw(raw)
        assert reply["jsonrpc"] == "2.0" and reply["id"] == rpc_id, (raw, reply)
        assert reply["error"]["code"] == code, (raw, reply)
        assert isinstance(reply["error"]["data"]["code"], str) and reply["error"]["message"]
    missing = (await c.send(rpc("image.messages", {"imageId": "img_missing"})))[0]["error"]
    assert missing["data"] == {"code": "not_found"} and missing["message"] == "Image not found: img_missing"
    big = json.dumps(rpc("image.create", {"name": "x" * 70_000}, id=77))
    (reply,) = await c.send_raw(big)
    assert reply["id"] == 77 and reply["error"]["code"] == -32600
    assert reply["error"]["data"]["code"] == "frame_too_large"


async def test_a_batch_is_answered_with_one_array_and_notifications_get_nothing(harness):
    c = await v2_client(harness)
    img = await _image(c)
    batch = [
        rpc("image.get", {"imageId": img["imageId"]}, id="a"),
        rpc("container.list", {}, id=None),  # a notification
        rpc("image.get", {"imageId": "img_none"}, id="b"),
        {"jsonrpc": "2.0", "method": "image.messages", "params": {"imageId": "img_none"}, "id": "c"},
        42,
    ]
    (reply,) = await c.send(batch)
    assert [r.get("id") for r in reply] == ["a", "b", "c", None]
    assert reply[0]["result"]["record"]["imageId"] == img["imageId"]
    assert reply[1]["result"] == {"record": None}
    assert reply[2]["error"]["code"] == 404 and reply[3]["error"]["code"] == -32600
    assert await c.send([rpc("container.list", {}, id=None)]) == []
    assert await c.notify("image.messages", imageId="img_none") == []  # failed notifications too


async def test_one_connection_speaks_the_protocol_of_its_first_frame(harness):
    v2 = await v2_client(harness)
    await v2.call("container.list")
    v1_frame = '{"type":"container_list_request","data":{"requestId":"r1"},"source":"command"}'
    (reply,) = await v2.send_raw(v1_frame)
    assert reply["error"]["code"] == -32600 and "JSON-RPC" in reply["error"]["message"]
    v1 = await harness.client()
    await v1.request("container_list")
    (refused,) = await v1.send_raw(json.dumps(rpc("container.list", {})))
    assert refused["type"] == "system_error" and refused["data"]["details"]["code"] == "bad_request"
    assert "AgentX v1" in refused["data"]["message"]


async def test_events_reach_only_the_sessions_subscribers(harness):
    a = await v2_client(harness)
    img = await _image(a)
    other = await v2_client(harness, "tenant-b")
    bystander = await v2_client(harness)  # same tenant, never subscribed
    await other.call("container.list")
    await bystander.call("container.list")
    harness.model.add("private")
    await _send_and_run(harness, a, img["imageId"])
    assert other.events() == [] and bystander.events() == []
    (refused,) = await other.send(rpc("agentvm.subscribe", {"sessionId": img["sessionId"]}))
    assert refused["error"]["code"] == 404


async def test_a_provider_retry_is_sent_under_its_own_name_before_the_reply(harness):
    from agentvm.agent.retry import RetryingModelClient
    from agentvm.errors import ProviderRateLimited

    harness.rt.models.client = RetryingModelClient(harness.model, base_delay_s=0.001)
    harness.model.add(ProviderRateLimited("anthropic: rate limited (429)", retry_after=0.01), "Hello.")
    c = await v2_client(harness)
    img = await _image(c)
    await _send_and_run(harness, c, img["imageId"])

    events = c.turn_events()
    [retry] = [e for e in events if e["type"] == "model_retry"]
    assert retry["data"] == {"attempt": 2, "delayMs": 10, "reason": "rate_limited"}
    assert (retry["source"], retry["category"]) == ("agent", "state")
    assert _shape(events) == [*TEXT_TURN[:1], "model_retry", *TEXT_TURN[1:]]
    assert _text(events) == "Hello."
