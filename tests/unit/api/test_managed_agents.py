"""The Managed Agents API's mapping (api/managed/mapping.py, no HTTP) and its documentation: every
route of the router is in docs/managed-agents.md's table, and the frames of a turn become the
session events the ``anthropic`` SDK's types describe."""

from __future__ import annotations

from pathlib import Path

import pytest
from anthropic.types.beta.sessions import BetaManagedAgentsStreamSessionEvents
from pydantic import TypeAdapter

from agentvm.api.managed import served_routes
from agentvm.api.managed.mapping import SessionView, events_of, image_config, split_tool_use_id, user_text
from agentvm.errors import BadRequest
from agentvm.images import ImageConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "managed-agents.md"
EVENTS = TypeAdapter(BetaManagedAgentsStreamSessionEvents)


def test_every_route_is_in_the_documented_table() -> None:
    text = DOC.read_text()
    routes = served_routes()
    assert len(routes) >= 20
    for method, path in routes:
        assert f"`{method} {path}`" in text, f"{method} {path} is not in docs/managed-agents.md"


def frame(kind: str, seq: int, **data: object) -> dict[str, object]:
    return {
        "type": kind,
        "seq": seq,
        "timestamp": 1_795_856_950_313,
        "data": data,
        "context": {"turnId": "turn_a"},
    }


def test_a_turns_frames_become_the_sdks_session_events() -> None:
    view = SessionView.of([{"type": "client", "name": "lookup"}], {"tools": ["sh"]})
    view.user_texts["msg_u"] = "hello"
    frames = [
        frame("message_persisted", 100001, messageId="msg_u"),
        frame("conversation_start", 100003),
        frame("text_delta", 100004, text="Echo"),  # a stream delta: no event of its own
        frame("tool_call_message", 100005, toolCall={"id": "call_1", "name": "lookup", "input": {"q": 1}}),
        frame("tool_call_message", 100006, toolCall={"id": "call_2", "name": "sh", "input": {}}),
        frame("turn_suspended", 100007, waitingFor=[{"toolCallId": "call_1"}, {"toolCallId": "call_2"}]),
        frame("tool_result", 200001, toolCallId="call_1", result="shipped", isError=False),
        frame("tool_result", 200002, toolCallId="call_2", result="Execution denied: no", isError=True),
        frame(
            "assistant_message",
            100008,
            content=[{"type": "text", "text": "Echo: hello"}],
            usage={"inputTokens": 3, "outputTokens": 2},
        ),
        frame("conversation_end", 100009, reason="completed"),
    ]
    events = [e for f in frames for e in events_of(f, view)]
    parsed = [EVENTS.validate_python(e) for e in events]  # each fits the SDK's own type
    assert [e.type for e in parsed] == [
        "user.message",
        "session.status_running",
        "agent.custom_tool_use",
        "agent.tool_use",
        "session.status_idle",
        "user.custom_tool_result",
        "agent.tool_result",
        "agent.message",
        "span.model_request_end",
        "session.status_idle",
    ]
    assert parsed[0].id == "msg_u" and parsed[2].id == "turn_a.call_1"
    assert parsed[3].evaluated_permission == "ask"
    assert parsed[4].stop_reason.event_ids == ["turn_a.call_1", "turn_a.call_2"]
    assert parsed[5].custom_tool_use_id == "turn_a.call_1" and parsed[5].content[0].text == "shipped"
    assert parsed[6].tool_use_id == "turn_a.call_2" and parsed[6].is_error is True
    assert parsed[8].model_usage.output_tokens == 2
    assert split_tool_use_id(parsed[2].id) == ("turn_a", "call_1")


def test_an_agent_becomes_a_valid_image_config() -> None:
    agent = {
        "name": "Helper",
        "system": "Be brief.",
        "tools": [
            {"type": "custom", "name": "lookup", "description": "d", "input_schema": {"type": "object"}},
            {
                "type": "agent_toolset_20260401",
                "default_config": {"permission_policy": {"type": "always_allow"}},
                "configs": [
                    {"name": "bash", "permission_policy": {"type": "always_ask"}},
                    {"name": "glob", "enabled": False},
                ],
            },
        ],
        "mcp_servers": [{"type": "url", "name": "docs", "url": "https://mcp.example/mcp"}],
    }
    config = image_config(agent)
    ImageConfig.model_validate(config)
    assert config["systemPrompt"] == "Be brief."
    assert config["tools"][0] == {
        "type": "client",
        "name": "lookup",
        "description": "d",
        "inputSchema": {"type": "object"},
    }
    assert config["tools"][1] == {"type": "sandbox"}
    assert config["approval"] == {"tools": ["python", "sh"]}
    assert config["mcpServers"] == {"docs": {"type": "http", "url": "https://mcp.example/mcp"}}


def test_what_is_not_served_is_refused_with_a_reason() -> None:
    with pytest.raises(BadRequest, match="not served"):
        user_text([{"type": "image", "source": {}}])
    with pytest.raises(BadRequest, match="web_search is not served"):
        image_config(
            {
                "name": "x",
                "tools": [
                    {"type": "agent_toolset_20260401", "configs": [{"name": "web_search", "enabled": True}]}
                ],
            }
        )
    with pytest.raises(BadRequest):
        split_tool_use_id("no-dot")


def test_a_failed_turn_is_a_session_error_then_idle() -> None:
    failed = frame("error_occurred", 100005, code="rate_limited", message="the provider kept refusing")
    error, idle = (EVENTS.validate_python(e) for e in events_of(failed, SessionView()))
    assert (error.type, error.error.type, error.error.message) == (
        "session.error",
        "model_rate_limited_error",
        "the provider kept refusing",
    )
    assert idle.stop_reason.type == "retries_exhausted"
