"""Rebuilding the model's view of a conversation from stored messages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.llm import ChatTurn
from agentvm.messages import AssistantMessage, ErrorMessage, UserMessage, text_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.messages import Message


def chat_turns(history: Sequence[Message], *, up_to_user_id: str) -> tuple[ChatTurn, ...]:
    """The conversation a turn answers: each reply placed right after the user message it answers.

    With the ``queue`` policy a second user message can be stored before the reply to the first,
    so store order is not conversation order; ``parentId`` is. Messages after the user message
    being answered are left out, and error messages are never shown to the model.
    """
    replies: dict[str, list[AssistantMessage]] = {}
    for m in history:
        if isinstance(m, AssistantMessage) and m.parentId:
            replies.setdefault(m.parentId, []).append(m)
    out: list[ChatTurn] = []
    for m in history:
        if isinstance(m, UserMessage):
            out.append(ChatTurn("user", text_of(m.content)))
            if m.id == up_to_user_id:
                break
            out.extend(ChatTurn("assistant", text_of(r.content)) for r in replies.get(m.id, ()))
        elif isinstance(m, AssistantMessage) and not m.parentId:
            out.append(ChatTurn("assistant", text_of(m.content)))
    return tuple(t for t in out if t.text)


def result_of(history: Sequence[Message], user_message_id: str) -> Message | None:
    """The stored reply (assistant or error) to a user message, if its turn already finished."""
    for m in reversed(history):
        if isinstance(m, (AssistantMessage, ErrorMessage)) and m.parentId == user_message_id:
            return m
    return None


def pending_user_ids(history: Sequence[Message]) -> list[str]:
    """User messages in the window that have no reply yet: their turns are queued or running."""
    answered = {m.parentId for m in history if isinstance(m, (AssistantMessage, ErrorMessage)) and m.parentId}
    return [m.id for m in history if isinstance(m, UserMessage) and m.id not in answered]


__all__ = ["chat_turns", "pending_user_ids", "result_of"]
