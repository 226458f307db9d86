"""The SDK's typed frames are checked against what the server sends, on both hosts.

Scripted turns of every kind (text, tools, a failing tool, approval granted and denied, a
client-side tool, a provider error, a provider retry, an interrupt, a worker that dies
mid-stream, sandbox file changes, compaction, resume replays, lifecycle events, every request
answered and refused) run
through the local wiring and, for a tool turn with an approval, the AWS handlers on moto. Every
frame a client receives must parse into its SDK model and dump back to the same JSON with no field
left over; the runs must cover every event and response model the SDK has (less the catalogue
entries the server never sends); and the SDK's categories must be the server's catalogue.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws
from pydantic import BaseModel

from agentvm.adapters.llm.scripted import Calls, Fail, ScriptedModelClient, SingleModelResolver
from agentvm.adapters.mcp.client import SdkMcpConnector
from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.agent.retry import RetryingModelClient
from agentvm.agent.tools.elicitation import ElicitationDesk
from agentvm.agent.tools.sources import ToolSources
from agentvm.client import (
    EVENT_MODELS,
    RESPONSE_MODELS,
    FailedResponse,
    SystemErrorEvent,
    UnknownFrame,
    parse_frame,
)
from agentvm.errors import ProviderRateLimited, ProviderUnavailable
from agentvm.events import AGENT_EVENT_CATEGORY
from tests.crashes import DyingModel
from tests.functions.aws_host import aws_host
from tests.harness import Harness
from tests.mcp_servers.fixtures import stdio_config

ROOT = Path(__file__).resolve().parents[3]
CALC = {"type": "builtin", "name": "calculator"}
PICK = {"type": "client", "name": "pick_file", "description": "Ask the user to pick a file"}
# In AgentX's catalogue (so the SDK reads them from any AgentX server), never sent by AgentVM.
NEVER_SENT = {
    "message_delta",
    "error_received",
    "conversation_queued",
    "conversation_thinking",
    "conversation_interrupted",
    "turn_request",
    "turn_response",
}


def _extras(model: Any, path: str = "") -> list[str]:
    """Every field a model kept without declaring it (``extra="allow"``): the SDK misses it."""
    found: list[str] = []
    if isinstance(model, BaseModel):
        found += [f"{path}.{k}" for k in model.model_extra or {}]
        for name in type(model).model_fields:
            found += _extras(getattr(model, name), f"{path}.{name}")
    elif isinstance(model, (list, tuple)):
        for i, item in enumerate(model):
            found += _extras(item, f"{path}[{i}]")
    elif isinstance(model, dict):
        for k, v in model.items():
            found += _extras(v, f"{path}.{k}")
    return found


def _check_lossless(frames: list[dict[str, Any]]) -> set[str]:
    """Each frame parses into its model, with nothing unknown, and dumps back to itself."""
    kinds: set[str] = set()
    for frame in frames:
        model = parse_frame(frame)
        assert not isinstance(model, UnknownFrame), frame
        assert model.model_dump(mode="json", by_alias=True, exclude_unset=True) == frame, frame["type"]
        assert _extras(model) == [], (frame["type"], _extras(model))
        kinds.add("failed_response" if isinstance(model, FailedResponse) else model.type)
    return kinds


async def _drive_local(tmp_path: Path) -> list[dict[str, Any]]:
    h = Harness(tmp_path)
    h.rt.tools = ToolSources(
        mcp=SdkMcpConnector(connect_timeout_s=30),
        sandbox=LocalSandbox(tmp_path / "workspaces", isolate=False),
        list_deadline_s=30,
    )
    c = await h.client()
    await c.request("container_create", containerId="u1")
    await c.request("container_get", containerId="u1")
    await c.request("container_list")
    config = {"name": "A", "tools": [CALC, PICK, {"type": "sandbox"}], "approval": {"tools": ["calculator"]}}
    img = (await c.request("image_create", containerId="u1", config=config))["record"]
    await c.request("image_list", containerId="u1")
    await c.request("image_get", imageId=img["imageId"])
    await c.request("image_update", imageId=img["imageId"], updates={"description": "d"})
    await c.subscribe(img["sessionId"])

    # text, then a tool turn whose approval is granted, one denied, a client tool, a failing tool
    h.model.add("Hello there.")
    await c.request("message_send", imageId=img["imageId"], content="hi")
    await h.run_turns()
    for approved in (True, False):
        h.model.add(Calls(("calculator", {"expression": "6*7"}), text="Let me compute."), "Done.")
        await c.request("message_send", imageId=img["imageId"], content="6*7?")
        await h.run_turns()
        [wait] = (await c.request("tool_waits", containerId="u1"))["waits"]
        await c.request(
            "tool_approval", turnId=wait["turnId"], toolCallId=wait["toolCallId"], approved=approved
        )
        await h.run_turns()
    h.model.add(Calls(("pick_file", {"title": "x"})), "Picked.")
    await c.request("message_send", imageId=img["imageId"], content="pick")
    await h.run_turns()
    [wait] = (await c.request("tool_waits", imageId=img["imageId"]))["waits"]
    await c.request("tool_result", turnId=wait["turnId"], toolCallId=wait["toolCallId"], output={"path": "a"})
    await h.run_turns()
    h.model.add(Calls(("nope", {})), Calls(("write", {"path": "a.txt", "content": "x"})), "Written.")
    await c.request("message_send", imageId=img["imageId"], content="tools")
    await h.run_turns()

    # MCP: a server that cannot start (mcp_server_failed), a call's progress (tool_progress)
    servers = {"calc": stdio_config(), "broken": {"command": "/nonexistent/mcp-server"}}
    mcp = (await c.request("image_create", containerId="u1", config={"mcpServers": servers}))["record"]
    await c.subscribe(mcp["sessionId"])
    h.model.add(Calls(("steps", {"count": 3})), "Stepped.")
    await c.request("message_send", imageId=mcp["imageId"], content="steps")
    await h.run_turns()
    # ...and its question to the user (tool_elicitation), answered (tool_elicitation_ended)
    h.rt.elicitations = ElicitationDesk()
    h.model.add(Calls(("ask", {"question": "Who?"})), "Asked.")
    await c.request("message_send", imageId=mcp["imageId"], content="ask")
    asking = asyncio.create_task(h.run_turns())
    while not [f for f in c.frames if f["type"] == "tool_elicitation"]:
        await asyncio.sleep(0.01)
    [question] = [f for f in c.frames if f["type"] == "tool_elicitation"]
    answer = {"name": "Ada", "age": 36}
    await c.request(
        "elicitation_answer", elicitationId=question["data"]["elicitationId"], action="accept", content=answer
    )
    await asyncio.wait_for(asking, 30)

    # a rate-limited model call, made again after a wait (model_retry)
    h.rt.models.client = RetryingModelClient(h.model, base_delay_s=0.001)
    h.model.add(ProviderRateLimited("rate limited (429)", retry_after=0.01), "After a retry.")
    await c.request("message_send", imageId=img["imageId"], content="busy")
    await h.run_turns()
    h.rt.models.client = h.model

    # a provider error, an interrupt mid-stream, a worker that dies mid-stream (retried)
    h.model.add(Fail(ProviderUnavailable("stream cut"), after_words="partial words"))
    await c.request("message_send", imageId=img["imageId"], content="fail")
    await h.run_turns()
    h.model.add("a b c d e f g h i j k l")
    h.model.word_delay_s = 0.03
    await c.request("message_send", imageId=img["imageId"], content="long")
    consumer = asyncio.create_task(h.run_turns())
    while [f["type"] for f in c.frames].count("text_delta") < 9:
        await asyncio.sleep(0.005)
    await c.request("agent_interrupt", imageId=img["imageId"])
    await asyncio.wait_for(consumer, 5)
    h.model.word_delay_s = 0.0
    model = h.rt.models.client
    h.rt.models.client = DyingModel(model, after_deltas=2)
    h.model.add("one two three four", "one two three four")
    await c.request("message_send", imageId=img["imageId"], content="die")
    await h.run_turns()
    h.rt.models.client = model

    # compaction (a threshold every turn passes), then the replay of finished turns (resume)
    h.rt.turns = dataclasses.replace(h.rt.turns, compaction_threshold_tokens=1)
    h.model.add("A summary of it all.", "After compaction.")
    await c.request("message_send", imageId=img["imageId"], content="compact")
    await h.run_turns()
    other = await h.client()
    await other.subscribe(img["sessionId"], after_seq=0)

    # requests answered, then refused; lifecycle events
    await c.request("image_messages", imageId=img["imageId"])
    await c.request("image_run", imageId=img["imageId"])
    listed = await c.request("agent_list", containerId="u1")
    await c.request("agent_get", agentId=listed["agents"][0]["agentId"])
    await c.request("image_stop", imageId=img["imageId"])
    second = (await c.request("image_create", containerId="u2", config={}))["record"]
    await c.request("image_run", imageId=second["imageId"])
    run = await c.request("image_run", imageId=img["imageId"])
    await c.request("agent_destroy", agentId=run["agentId"])
    await c.request("agent_destroy_all", containerId="u2")
    await c.request("image_delete", imageId=second["imageId"])
    for type_, data in [
        ("image_get", {"imageId": "img_nope"}),
        ("message_send", {"imageId": "img_nope", "content": "x"}),
        ("image_messages", {"imageId": "img_nope"}),
        ("container_get", {"containerId": 7}),
    ]:
        await c.request(type_, **data)
    await c.send_raw("not json")
    return c.frames + other.frames


async def test_every_frame_of_the_local_host_parses_into_its_model_without_loss(tmp_path):
    frames = await _drive_local(tmp_path)

    kinds = _check_lossless(frames)

    assert kinds >= set(EVENT_MODELS) - NEVER_SENT, set(EVENT_MODELS) - NEVER_SENT - kinds
    assert kinds >= set(RESPONSE_MODELS) | {"failed_response"}, set(RESPONSE_MODELS) - kinds
    errors = [parse_frame(f) for f in frames if f["type"] == "system_error"]
    assert {e.data.details.code for e in errors if isinstance(e, SystemErrorEvent)} >= {
        "not_found",
        "bad_request",
    }


@pytest.mark.aws
def test_every_frame_of_the_aws_host_parses_into_its_model_without_loss():
    model = ScriptedModelClient()
    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        host.connect("c1")
        host.request("c1", "container_create", containerId="u1")
        config = {"name": "A", "tools": [CALC], "approval": {"tools": ["calculator"]}}
        img = host.request("c1", "image_create", containerId="u1", config=config)["record"]
        host.send("c1", {"type": "subscribe", "sessionId": img["sessionId"]})
        model.add("Hello there.", Calls(("calculator", {"expression": "6*7"})), "It is 42.")
        host.request("c1", "message_send", imageId=img["imageId"], content="hi")
        host.run_turns(host.worker(host.runtime(tools=ToolSources())))
        host.request("c1", "message_send", imageId=img["imageId"], content="6*7?")
        host.run_turns(host.worker(host.runtime(tools=ToolSources())))
        [wait] = host.request("c1", "tool_waits", containerId="u1")["waits"]
        host.request(
            "c1", "tool_approval", turnId=wait["turnId"], toolCallId=wait["toolCallId"], approved=True
        )
        host.run_turns(host.worker(host.runtime(tools=ToolSources())))
        host.request("c1", "image_messages", imageId=img["imageId"])
        host.request("c1", "image_messages", imageId="img_nope")
        frames = host.frames("c1")

    kinds = _check_lossless(frames)

    assert {
        "text_delta",
        "tool_approval_requested",
        "turn_suspended",
        "tool_completed",
        "conversation_end",
    } <= kinds
    assert {"message_send_response", "tool_approval_response", "failed_response"} <= kinds


def test_the_sdk_categories_are_the_server_catalogue():
    for type_, category in AGENT_EVENT_CATEGORY.items():
        fields = EVENT_MODELS[type_].model_fields
        assert (fields["source"].default, fields["category"].default) == ("agent", category), type_


def test_the_catalogue_entries_never_sent_are_sent_by_no_server_code():
    """If the server starts sending one, it leaves NEVER_SENT and the scripted runs must cover it."""
    # (the provider adapters and the fake provider speak Anthropic's own "message_delta"; the
    # AgentX v2 modules speak 2.x's events, e.g. "turn_request", to JSON-RPC clients only)
    skip = {"client", "fakellm", "llm"}
    source = "\n".join(
        p.read_text()
        for p in (ROOT / "shared/agentvm").rglob("*.py")
        if not skip & set(p.parts) and p.name != "events.py" and "agentx_v2" not in p.name
    )
    for type_ in NEVER_SENT:
        assert not re.search(rf"[\"']{type_}[\"']", source), type_


def test_a_frame_of_an_unknown_type_or_shape_is_kept_as_it_came():
    new = {
        "type": "brand_new_event",
        "timestamp": 1,
        "data": {"x": 1},
        "source": "agent",
        "category": "state",
    }
    odd = {
        "type": "text_delta",
        "timestamp": 1,
        "data": {"no_text": True},
        "source": "agent",
        "category": "stream",
    }

    for frame in (new, odd):
        model = parse_frame(frame)
        assert isinstance(model, UnknownFrame)
        assert model.model_dump(mode="json", exclude_unset=True) == frame


def test_fields_a_newer_server_adds_are_kept():
    frame = {
        "type": "text_delta",
        "timestamp": 1,
        "data": {"text": "hi", "lang": "en"},
        "source": "agent",
        "category": "stream",
        "intent": "notification",
        "shard": 3,
    }
    model = parse_frame(frame)
    assert model.data.text == "hi" and model.data.model_extra == {"lang": "en"}
    assert model.model_dump(mode="json", exclude_unset=True) == frame
