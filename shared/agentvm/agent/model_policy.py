"""Mixed-model routing: which model a turn calls, by readable rules an image opts into.

Off unless the image names a ``fastModel``. Then one rule, **short-first-message**: a turn whose
user message is short (fewer than ``fastMaxChars`` characters of text, default
``DEFAULT_FAST_MAX_CHARS``) in a session with no tool calls yet goes to the fast model; every other
turn to the image's model. "No tool calls yet" is only claimed when the turn sees the whole session
(no compaction summary, the history window not full): otherwise the turn stays on the image's model.
A routed turn keeps the fast model for all its steps (a tool call it makes is its own).

Every routed call is visible: its usage records name the model called and carry ``routedBy`` (the
rule's name); a turn on the image's model has ``routedBy`` null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.messages import ToolCallMessage, UserMessage, text_of

if TYPE_CHECKING:
    from agentvm.agent.context import TurnContext
    from agentvm.records import ImageRecord

SHORT_FIRST_MESSAGE = "short-first-message"
DEFAULT_FAST_MAX_CHARS = 200


@dataclass(frozen=True)
class Route:
    model: str | None  # the ref to resolve (None: the server's default model)
    routed_by: str | None = None  # the rule that chose a model other than the image's


def route_turn(image: ImageRecord, context: TurnContext, user_message_id: str) -> Route:
    """The model of the turn answering ``user_message_id``: the image's, or its ``fastModel`` when
    the short-first-message rule holds."""
    if not image.fastModel:
        return Route(image.model)
    whole_session = context.summary is None and len(context.entries) < context.window
    messages = context.messages
    question = next((m for m in messages if m.id == user_message_id and isinstance(m, UserMessage)), None)
    if question is None or not whole_session or any(isinstance(m, ToolCallMessage) for m in messages):
        return Route(image.model)
    limit = image.fastMaxChars or DEFAULT_FAST_MAX_CHARS
    if len(text_of(question.content).strip()) >= limit:
        return Route(image.model)
    return Route(image.fastModel, SHORT_FIRST_MESSAGE)


__all__ = ["DEFAULT_FAST_MAX_CHARS", "SHORT_FIRST_MESSAGE", "Route", "route_turn"]
