"""AgentX v1 messages and content parts (protocol §3.4), one shape on the wire and in storage.

Field names are the protocol's own camelCase names, so a stored message is byte-for-byte what a
client receives in ``image_messages_response`` and ``assistant_message``. New fields always get
defaults so stored history keeps validating. ``chains`` groups a stored history into turns (the
messages answering each user message), for the worker's history and for resume alike;
``reading_order`` puts a stored history in the order its turns were streamed, for clients.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence


# defer_build: validators are built on first use, not at import. A Lambda handler imports every
# model but uses a few, and import time is cold-start time.
class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class TextPart(_Part):
    type: Literal["text"] = "text"
    text: str


class ThinkingPart(_Part):
    type: Literal["thinking"] = "thinking"
    reasoning: str
    tokenCount: int | None = None


class ImagePart(_Part):
    type: Literal["image"] = "image"
    data: str  # base64 or URL
    mediaType: Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
    name: str | None = None


class FilePart(_Part):
    type: Literal["file"] = "file"
    data: str  # base64 or URL
    mediaType: str
    filename: str | None = None


class ToolCallPart(_Part):
    type: Literal["tool-call"] = "tool-call"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultOutput(_Part):
    """One of text | json | error-text | error-json | execution-denied | content.

    ``content``: a rich result, ``value`` a list of ``{"type": "text", "text"}`` and ``{"type":
    "media", "data" (base64), "mediaType", "filename"?}`` parts in order (an MCP tool's image).
    ``structuredContent`` (additive): a JSON value the tool returned beside its content (MCP)."""

    type: Literal["text", "json", "error-text", "error-json", "execution-denied", "content"]
    value: Any = None
    reason: str | None = None
    structuredContent: Any = None


class ToolResultPart(_Part):
    type: Literal["tool-result"] = "tool-result"
    id: str
    name: str
    output: ToolResultOutput


UserContentPart = Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]
AssistantContentPart = Annotated[TextPart | ThinkingPart | FilePart, Field(discriminator="type")]


class TokenUsage(_Part):
    inputTokens: int
    outputTokens: int
    totalTokens: int | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    id: str
    timestamp: int  # Unix ms


class UserMessage(_Message):
    role: Literal["user"] = "user"
    subtype: Literal["user"] = "user"
    content: str | list[UserContentPart]
    parentId: str | None = None


class AssistantMessage(_Message):
    role: Literal["assistant"] = "assistant"
    subtype: Literal["assistant"] = "assistant"
    content: str | list[AssistantContentPart]
    parentId: str | None = None
    usage: TokenUsage | None = None


class ToolCallMessage(_Message):
    role: Literal["assistant"] = "assistant"
    subtype: Literal["tool-call"] = "tool-call"
    toolCall: ToolCallPart
    parentId: str | None = None


class ToolResultMessage(_Message):
    role: Literal["tool"] = "tool"
    subtype: Literal["tool-result"] = "tool-result"
    toolResult: ToolResultPart
    toolCallId: str


class ErrorMessage(_Message):
    role: Literal["error"] = "error"
    subtype: Literal["error"] = "error"
    content: str
    errorCode: str | None = None
    parentId: str | None = None


Message = Annotated[
    UserMessage | AssistantMessage | ToolCallMessage | ToolResultMessage | ErrorMessage,
    Field(discriminator="subtype"),
]


@functools.cache
def message_adapter() -> TypeAdapter[Message]:
    """The validator of the Message union, built on first use."""
    return TypeAdapter(Message)


def message_to_wire(message: Message) -> dict[str, Any]:
    """The JSON object of a message, as sent and as stored (no null fields)."""
    return message.model_dump(mode="json", exclude_none=True)


def message_from_wire(data: dict[str, Any] | str | bytes) -> Message:
    if isinstance(data, (str, bytes)):
        return message_adapter().validate_json(data)
    return message_adapter().validate_python(data)


def text_of(content: str | list[Any]) -> str:
    """The plain text of a message content (text parts joined), for models and summaries."""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


def chains(history: Sequence[Message]) -> dict[str, list[Message]]:
    """Every turn's stored messages, by the id of the user message they answer, in store order."""
    out: dict[str, list[Message]] = {}
    call_parent: dict[str, str] = {}
    for m in history:
        if isinstance(m, (AssistantMessage, ErrorMessage)) and m.parentId:
            out.setdefault(m.parentId, []).append(m)
        elif isinstance(m, ToolCallMessage) and m.parentId:
            call_parent[m.toolCall.id] = m.parentId
            out.setdefault(m.parentId, []).append(m)
        elif isinstance(m, ToolResultMessage) and m.toolCallId in call_parent:
            out[call_parent[m.toolCallId]].append(m)
    return out


def reading_order(history: Sequence[Message]) -> list[Message]:
    """A stored history in the order its turns streamed: a tool step's text before its calls.

    A tool step stores each call as soon as the model has streamed it (its frames are made from
    the stored message) and the step's text when the model's message ends, with the step's usage,
    which is known only then. So in store order the text follows the calls it was written before;
    the worker reads that order (``agent.history.steps_of``: a step is its calls, its text, its
    results) and sessions stored before now hold it too. Clients are given the order the stream
    showed: the step's text message moved to just before the step's first call. Nothing else moves
    (a final reply comes after its results; a step cut before its calls were answered keeps its
    text after them). What the model is sent does not depend on this order: a step is one
    assistant turn, its text then its tool calls, for every provider.
    """
    out: list[Message] = []
    open_steps: dict[str, int] = {}  # turn (its user message id) -> where its open step's calls begin
    call_turn: dict[str, str] = {}  # call id -> its turn
    for m in history:
        if isinstance(m, ToolCallMessage) and m.parentId:
            call_turn[m.toolCall.id] = m.parentId
            open_steps.setdefault(m.parentId, len(out))
        elif isinstance(m, AssistantMessage) and m.parentId and m.parentId in open_steps:
            at = open_steps.pop(m.parentId)
            out.insert(at, m)
            for turn, index in open_steps.items():  # (another turn's open step: not while one runs)
                if index >= at:
                    open_steps[turn] = index + 1
            continue
        elif isinstance(m, ToolResultMessage) and m.toolCallId in call_turn:
            open_steps.pop(call_turn[m.toolCallId], None)
        elif isinstance(m, ErrorMessage) and m.parentId:
            open_steps.pop(m.parentId, None)
        out.append(m)
    return out


__all__ = [
    "AssistantContentPart",
    "AssistantMessage",
    "ErrorMessage",
    "FilePart",
    "ImagePart",
    "Message",
    "TextPart",
    "ThinkingPart",
    "TokenUsage",
    "ToolCallMessage",
    "ToolCallPart",
    "ToolResultMessage",
    "ToolResultOutput",
    "ToolResultPart",
    "UserContentPart",
    "UserMessage",
    "chains",
    "message_adapter",
    "message_from_wire",
    "message_to_wire",
    "reading_order",
    "text_of",
]
