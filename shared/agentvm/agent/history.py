"""Rebuilding the model's view of a conversation from stored messages.

A turn's stored messages (its *chain*) all point at the user message they answer: assistant and
error messages and tool calls by ``parentId``, tool results through their call's id. A tool step
is stored as it completes: the step's tool-call messages (each as soon as the model has streamed
it), then its text (if any, when the message ends, with its usage), then the results; clients
read the text first (``messages.reading_order``). So a chain reads as steps: ``[calls, text?,
results]`` for each tool step, then the final ``text`` (or an error). The turn is finished when
its chain ends with an assistant or error message and every call has its result (``result_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentvm.llm import IMAGE_MEDIA_TYPES, Attachment, ChatTurn, ToolBlock, ToolCall, ToolResult, blocks_text
from agentvm.messages import (
    AssistantMessage,
    ErrorMessage,
    FilePart,
    ImagePart,
    ToolCallMessage,
    ToolResultMessage,
    ToolResultOutput,
    UserMessage,
    chains,
    text_of,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.messages import Message

NO_RESULT = "Error: no result was recorded for this call (the turn was cut off before the tool finished)"


@dataclass
class Step:
    """One model call of a turn as stored: its text, the calls it made, the results they got."""

    text: str = ""
    calls: list[ToolCallMessage] = field(default_factory=list)
    results: dict[str, ToolResultMessage] = field(default_factory=dict)
    final: Message | None = None  # the assistant or error message that ended the turn

    @property
    def missing(self) -> list[ToolCallMessage]:
        """Calls without a result: running (or cut off) when the step was read."""
        return [c for c in self.calls if c.toolCall.id not in self.results]

    def assistant_turn(self) -> ChatTurn:
        calls = tuple(ToolCall(c.toolCall.id, c.toolCall.name, dict(c.toolCall.input)) for c in self.calls)
        return ChatTurn("assistant", self.text, tool_calls=calls)

    def results_turn(self, *, fill_missing: bool = True) -> ChatTurn:
        results: list[ToolResult] = []
        for call in self.calls:
            stored = self.results.get(call.toolCall.id)
            if stored is not None:
                results.append(tool_result_of(stored))
            elif fill_missing:
                results.append(ToolResult(call.toolCall.id, call.toolCall.name, NO_RESULT, is_error=True))
        return ChatTurn("user", tool_results=tuple(results))


def tool_result_of(message: ToolResultMessage) -> ToolResult:
    output = message.toolResult.output
    value = output.value
    blocks: tuple[ToolBlock, ...] = ()
    if output.type in ("text", "error-text"):
        content = str(value if value is not None else "")
    elif output.type == "execution-denied":
        content = f"Execution denied: {output.reason or 'no reason given'}"
    elif output.type == "content":
        blocks = blocks_of(value)
        content = blocks_text(blocks)
    else:
        import json

        content = json.dumps(value, ensure_ascii=False, default=str)
    is_error = output.type in ("error-text", "error-json", "execution-denied")
    return ToolResult(message.toolCallId, message.toolResult.name, content, is_error=is_error, blocks=blocks)


def stored_output(result: ToolResult, *, structured: Any = None) -> ToolResultOutput:
    """How a tool's result is stored (and sent to clients): its text, or, when it has media
    blocks, AgentX's ``content`` output (``text`` and ``media`` parts, in order); a JSON value the
    tool returned beside it is kept as ``structuredContent``."""
    if result.blocks and not result.is_error:
        return ToolResultOutput(
            type="content", value=content_parts(result.blocks), structuredContent=structured
        )
    kind: Literal["text", "error-text"] = "error-text" if result.is_error else "text"
    return ToolResultOutput(type=kind, value=result.content, structuredContent=structured)


def content_parts(blocks: Sequence[ToolBlock]) -> list[dict[str, Any]]:
    """``blocks`` as stored ``content`` parts (``blocks_of`` reads them back)."""
    return [_content_part(b) for b in blocks]


def _content_part(block: ToolBlock) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    part = {"type": "media", "data": block.data, "mediaType": block.media_type}
    return part if block.name is None else {**part, "filename": block.name}


def blocks_of(parts: Any) -> tuple[ToolBlock, ...]:
    """The blocks of a stored ``content`` output (parts of other types are skipped)."""
    blocks: list[ToolBlock] = []
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            blocks.append(str(part.get("text") or ""))
        elif part.get("type") == "media":
            media_type = str(part.get("mediaType") or "application/octet-stream")
            kind: Literal["image", "file"] = "image" if media_type in IMAGE_MEDIA_TYPES else "file"
            blocks.append(Attachment(kind, media_type, str(part.get("data") or ""), part.get("filename")))
    return tuple(blocks)


def steps_of(chain: Sequence[Message]) -> list[Step]:
    steps: list[Step] = []
    current: Step | None = None
    for m in chain:
        if current is None or (current.results and not isinstance(m, ToolResultMessage)) or current.final:
            current = Step()
            steps.append(current)
        if isinstance(m, ToolCallMessage):
            current.calls.append(m)
        elif isinstance(m, ToolResultMessage):
            current.results[m.toolCallId] = m
        elif isinstance(m, AssistantMessage):
            current.text += text_of(m.content)
            if not current.calls:
                current.final = m
        elif isinstance(m, ErrorMessage):
            current.final = m
    return steps


def user_turn(message: UserMessage) -> ChatTurn:
    if isinstance(message.content, str):
        return ChatTurn("user", message.content)
    attachments = tuple(
        Attachment(
            "image" if isinstance(p, ImagePart) else "file",
            p.mediaType,
            p.data,
            p.name if isinstance(p, ImagePart) else p.filename,
        )
        for p in message.content
        if isinstance(p, (ImagePart, FilePart))
    )
    return ChatTurn("user", text_of(message.content), attachments=attachments)


def turns_of(steps: Sequence[Step], *, fill_missing: bool = True) -> list[ChatTurn]:
    out: list[ChatTurn] = []
    for step in steps:
        if step.calls:
            out.append(step.assistant_turn())
            out.append(step.results_turn(fill_missing=fill_missing))
        elif step.text and not isinstance(step.final, ErrorMessage):
            out.append(ChatTurn("assistant", step.text))
    return out


def chat_turns(history: Sequence[Message], *, up_to_user_id: str) -> tuple[ChatTurn, ...]:
    """The conversation a turn answers: each turn's steps placed right after its user message.

    With the ``queue`` policy a second user message can be stored before the reply to the first,
    so store order is not conversation order; the chains are. Messages after the user message
    being answered are left out, and error messages are never shown to the model. The answered
    turn's own steps are included when they are complete (a redelivered turn resumes after them);
    a step of it whose calls still lack results is left to the caller (``open_step``).
    """
    by_user = chains(history)
    out: list[ChatTurn] = []
    for m in history:
        if isinstance(m, UserMessage):
            out.append(user_turn(m))
            steps = steps_of(by_user.get(m.id, ()))
            if m.id == up_to_user_id:
                if steps and steps[-1].missing:
                    steps = steps[:-1]
                out.extend(turns_of(steps))
                break
            out.extend(turns_of(steps))
        elif isinstance(m, AssistantMessage) and not m.parentId:
            out.append(ChatTurn("assistant", text_of(m.content)))
    return tuple(t for t in out if not t.empty)


def turn_steps(history: Sequence[Message], user_message_id: str) -> list[Step]:
    return steps_of(chains(history).get(user_message_id, ()))


def open_step(history: Sequence[Message], user_message_id: str) -> Step | None:
    """The answered turn's last step if some of its calls have no result yet (a crash mid-tools)."""
    steps = turn_steps(history, user_message_id)
    return steps[-1] if steps and steps[-1].missing else None


def result_of(history: Sequence[Message], user_message_id: str) -> Message | None:
    """The stored final reply (assistant or error) of a user message's turn, if the turn finished."""
    steps = turn_steps(history, user_message_id)
    if not steps or steps[-1].missing:
        return None
    return steps[-1].final


def pending_user_ids(history: Sequence[Message]) -> list[str]:
    """User messages in the window whose turn has not finished: queued, running or cut off."""
    return [m.id for m in history if isinstance(m, UserMessage) and result_of(history, m.id) is None]


__all__ = [
    "NO_RESULT",
    "Step",
    "chat_turns",
    "open_step",
    "pending_user_ids",
    "result_of",
    "steps_of",
    "blocks_of",
    "content_parts",
    "stored_output",
    "tool_result_of",
    "turn_steps",
    "turns_of",
    "user_turn",
]
