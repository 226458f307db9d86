"""Mixed-model routing (``agent/model_policy.py``): the short-first-message rule, on turn contexts."""

from __future__ import annotations

from typing import Any

from agentvm.agent.context import TurnContext
from agentvm.agent.model_policy import SHORT_FIRST_MESSAGE, Route, route_turn
from agentvm.messages import AssistantMessage, TextPart, ToolCallMessage, UserMessage
from agentvm.ports import SeqMessage
from agentvm.records import ImageRecord, SessionSummary

IMAGE = ImageRecord(
    tenantId="t",
    imageId="img",
    containerId="c",
    sessionId="s",
    name="A",
    model="anthropic/claude-sonnet-4-6",
    fastModel="anthropic/claude-haiku-5-5",
    createdAt=1,
    updatedAt=1,
)


def context(*messages: Any, summary: SessionSummary | None = None, window: int = 20) -> TurnContext:
    return TurnContext(summary, tuple(SeqMessage(i + 1, m) for i, m in enumerate(messages)), window)


def ask(text: str, n: int = 1) -> UserMessage:
    return UserMessage(id=f"u{n}", timestamp=1, content=text)


def test_a_short_message_before_any_tool_call_goes_to_the_fast_model():
    assert route_turn(IMAGE, context(ask("hi")), "u1") == Route(
        "anthropic/claude-haiku-5-5", SHORT_FIRST_MESSAGE
    )
    answered = AssistantMessage(id="a1", timestamp=1, content=[TextPart(text="hello")], parentId="u1")
    assert (
        route_turn(IMAGE, context(ask("hi"), answered, ask("thanks", 2)), "u2").routed_by
        == SHORT_FIRST_MESSAGE
    )


def test_long_messages_tool_calls_and_unseen_history_keep_the_images_model():
    own = Route("anthropic/claude-sonnet-4-6")
    assert route_turn(IMAGE, context(ask("x" * 200)), "u1") == own  # the default limit: 200
    tall = IMAGE.model_copy(update={"fastMaxChars": 500})
    assert route_turn(tall, context(ask("x" * 200)), "u1").routed_by == SHORT_FIRST_MESSAGE
    called = ToolCallMessage.model_validate(
        {
            "id": "tc1",
            "timestamp": 1,
            "toolCall": {"id": "call_1", "name": "calculator", "input": {}},
            "parentId": "u1",
        }
    )
    assert route_turn(IMAGE, context(ask("what?"), called, ask("and?", 2)), "u2") == own
    summary = SessionSummary(sessionId="s", upToSeq=4, text="earlier", model="x/y")
    assert route_turn(IMAGE, context(ask("hi"), summary=summary), "u1") == own  # may hide tool calls
    assert route_turn(IMAGE, context(ask("hi"), window=1), "u1") == own  # a full window likewise


def test_routing_is_off_unless_the_image_names_a_fast_model():
    plain = IMAGE.model_copy(update={"fastModel": None})
    assert route_turn(plain, context(ask("hi")), "u1") == Route("anthropic/claude-sonnet-4-6")
