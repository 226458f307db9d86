"""``messages.reading_order``: a stored history in the order its turns streamed (a tool step's text
before its calls), whatever else the store holds between them."""

from __future__ import annotations

from agentvm.messages import (
    AssistantMessage,
    ErrorMessage,
    Message,
    TextPart,
    ToolCallMessage,
    ToolCallPart,
    ToolResultMessage,
    ToolResultOutput,
    ToolResultPart,
    UserMessage,
    reading_order,
)


def user(id_: str) -> UserMessage:
    return UserMessage(id=id_, timestamp=0, content=id_)


def text(id_: str, turn: str) -> AssistantMessage:
    return AssistantMessage(id=id_, timestamp=0, content=[TextPart(text=id_)], parentId=turn)


def call(id_: str, turn: str) -> ToolCallMessage:
    return ToolCallMessage(
        id=f"m_{id_}", timestamp=0, toolCall=ToolCallPart(id=id_, name="t", input={}), parentId=turn
    )


def result(id_: str) -> ToolResultMessage:
    output = ToolResultOutput(type="text", value="ok")
    return ToolResultMessage(
        id=f"r_{id_}", timestamp=0, toolCallId=id_, toolResult=ToolResultPart(id=id_, name="t", output=output)
    )


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def test_a_steps_text_moves_before_its_calls_and_nothing_else_moves():
    stored = [
        user("u1"),
        call("c1", "u1"),
        call("c2", "u1"),
        text("step1", "u1"),
        result("c1"),
        result("c2"),
        call("c3", "u1"),  # a step that wrote nothing
        result("c3"),
        text("final", "u1"),
    ]
    assert ids(reading_order(stored)) == [
        "u1", "step1", "m_c1", "m_c2", "r_c1", "r_c2", "m_c3", "r_c3", "final",
    ]  # fmt: skip


def test_a_message_queued_while_the_step_streamed_keeps_its_place():
    # u2 was sent (queue policy) while u1's step was streaming its calls
    stored = [
        user("u1"),
        call("c1", "u1"),
        user("u2"),
        text("step1", "u1"),
        result("c1"),
        text("final", "u1"),
    ]
    assert ids(reading_order(stored)) == ["u1", "step1", "m_c1", "u2", "r_c1", "final"]


def test_a_reply_after_results_or_an_error_and_a_plain_turn_stay_where_they_are():
    stored = [
        user("u1"),
        text("hello", "u1"),
        user("u2"),
        call("c1", "u2"),
        result("c1"),
        text("after", "u2"),
        user("u3"),
        call("c2", "u3"),
        ErrorMessage(id="err", timestamp=0, content="cut", parentId="u3"),
        text("late", "u3"),
    ]
    assert ids(reading_order(stored)) == ids(stored)


def test_an_already_ordered_history_is_left_as_it_is():
    ordered = [user("u1"), text("step1", "u1"), call("c1", "u1"), result("c1"), text("final", "u1")]
    assert ids(reading_order(ordered)) == ids(ordered)
