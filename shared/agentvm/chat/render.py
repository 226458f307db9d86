"""How ``avm chat`` shows a turn and a history: text as it streams, tools and waits as short lines.

    you> /tool calculator {"expression": "6*7"}
    [tool] calculator {"expression": "6*7"}
    [tool] calculator -> 42
    Echo: calculator returned: 42

Bracketed lines are dimmed on a colour terminal (not when ``NO_COLOR`` is set or the output is not
a terminal). Long tool inputs and results are cut to one line of about 200 characters.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, TextIO

from agentvm.client import (
    AssistantMessage,
    ErrorMessage,
    ErrorOccurredEvent,
    FileChangedEvent,
    McpServerFailedEvent,
    ModelRetryEvent,
    SystemErrorEvent,
    TextDeltaEvent,
    ToolCallMessage,
    ToolElicitationEndedEvent,
    ToolProgressEvent,
    ToolResultEvent,
    ToolResultMessage,
    ToolUseStopEvent,
    TurnSuspendedEvent,
    UserMessage,
)
from agentvm.client.events import ConversationEndEvent

if TYPE_CHECKING:
    from agentvm.client import Frame, Message

CUT = 200
WAITING = "[waiting for the model…]"
WAITING_DIM = f"\x1b[2m{WAITING}\x1b[0m"


def short(value: Any) -> str:
    """One line of at most ~CUT characters: strings as they are, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= CUT else text[: CUT - 1] + "…"


class Renderer:
    def __init__(self, out: TextIO, *, color: bool | None = None) -> None:
        self.out = out
        if color is None:
            color = out.isatty() and "NO_COLOR" not in os.environ
        self.color = color
        self.at_line_start = True
        self._tool_names: dict[str, str] = {}
        self._waiting_shown = False

    # -- primitives ----------------------------------------------------------------------------------
    def write(self, text: str) -> None:
        if text:
            self.stop_waiting()  # the first thing a turn shows replaces the waiting line
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        """A line of its own (after a newline if the text streamed so far left the line open)."""
        self.write(("" if self.at_line_start else "\n") + text + "\n")

    def note(self, text: str) -> None:
        """A dimmed, bracketed line: tools, waits, errors, the chat's own messages."""
        self.line(f"\x1b[2m{text}\x1b[0m" if self.color else text)

    def end_line(self) -> None:
        if not self.at_line_start:
            self.write("\n")

    # -- a turn --------------------------------------------------------------------------------------
    def waiting(self) -> None:
        """``[waiting for the model…]`` until the turn's first event, on a terminal only (erased
        then, so a pipe or a log never holds it)."""
        if self.out.isatty():
            self.end_line()
            self.out.write(WAITING_DIM if self.color else WAITING)
            self.out.flush()
            self._waiting_shown = True

    def stop_waiting(self) -> None:
        if self._waiting_shown:
            self.out.write("\r\x1b[K")  # back to the line's start, and erase it
            self.out.flush()
            self._waiting_shown = False
            self.at_line_start = True

    def event(self, event: Frame) -> None:
        if isinstance(event, TextDeltaEvent):
            self.write(event.data.text)
        elif isinstance(event, ToolUseStopEvent):
            self._tool_names[event.data.toolCallId] = event.data.toolName
            self.note(f"[tool] {event.data.toolName} {short(event.data.input)}")
        elif isinstance(event, ToolResultEvent):
            name = self._tool_names.get(event.data.toolCallId, "tool")
            verb = "failed:" if event.data.isError else "->"
            self.note(f"[tool] {name} {verb} {short(event.data.result)}")
        elif isinstance(event, TurnSuspendedEvent):
            for wait in event.data.waitingFor:
                if wait.kind == "sandbox":
                    self.note(f"[waiting] {wait.toolName}: a sandbox job")
                elif wait.kind == "mcp_task":
                    self.note(f"[waiting] {wait.toolName}: its MCP task")
        elif isinstance(event, ToolProgressEvent):
            self.note(f"[progress] {event.data.toolName} {_progress(event.data)}")
        elif isinstance(event, McpServerFailedEvent):
            self.note(f"[mcp] {event.data.server} {event.data.reason}")
        elif isinstance(event, ModelRetryEvent):
            self.note(f"[retry] {_retrying(event.data)}")
            self.waiting()  # still nothing to show: the indicator comes back until the retry answers
        elif isinstance(event, ToolElicitationEndedEvent) and event.data.reason != "answered":
            why = event.data.reason.replace("_", " ")
            self.note(f"[question] {event.data.toolName}: {why} ({event.data.action})")
        elif isinstance(event, FileChangedEvent):
            self.note(f"[file] {event.data.change} {event.data.path} ({event.data.size} bytes)")
        elif isinstance(event, ErrorOccurredEvent):
            self.note(f"[error {event.data.code}] {event.data.message}")
        elif isinstance(event, SystemErrorEvent):
            self.note(f"[server {event.data.details.code}] {event.data.message}")
        elif isinstance(event, ConversationEndEvent):
            if event.data.reason == "interrupted":
                self.note("[interrupted]")
            else:
                self.end_line()

    # -- a history -----------------------------------------------------------------------------------
    def message(self, message: Message) -> None:
        if isinstance(message, UserMessage):
            self.line(f"user: {_content_text(message.content)}")
        elif isinstance(message, AssistantMessage):
            self.line(f"assistant: {_content_text(message.content)}")
        elif isinstance(message, ToolCallMessage):
            self.note(f"[tool] {message.toolCall.name} {short(message.toolCall.input)}")
        elif isinstance(message, ToolResultMessage):
            output = message.toolResult.output
            verb = "->" if output.type in ("text", "json", "content") else f"{output.type}:"
            value = output.value
            if output.type == "content":  # a rich result: its text, media as placeholders (no base64)
                value = " ".join(
                    str(p.get("text")) if p.get("type") == "text" else f"[{p.get('mediaType')}]"
                    for p in value or ()
                    if isinstance(p, dict)
                )
            self.note(f"[tool] {message.toolResult.name} {verb} {short(value)}")
        elif isinstance(message, ErrorMessage):
            self.note(f"[error {message.errorCode or 'error'}] {message.content}")


def _progress(data: Any) -> str:
    """``3/10 (30%) copying``: the progress, of its total when there is one, and the message."""
    value = f"{data.progress:g}"
    if data.total:
        value += f"/{data.total:g} ({100 * data.progress / data.total:.0f}%)"
    return value + (f" {short(data.message)}" if data.message else "")


_BUSY = {"rate_limited": "rate limited", "overloaded": "overloaded", "unavailable": "unavailable"}


def _retrying(data: Any) -> str:
    """``provider busy (rate limited), retrying in 2s (attempt 2)``."""
    why = _BUSY.get(data.reason, "unavailable")
    return f"provider busy ({why}), retrying in {_seconds(data.delayMs)} (attempt {data.attempt})"


def _seconds(ms: int) -> str:
    """``0.5s``, ``2s``, ``12s``: a tenth of a second under ten seconds, whole seconds above."""
    if ms >= 10_000:
        return f"{round(ms / 1000)}s"
    return f"{ms / 1000:.1f}".removesuffix(".0") + "s"


def _content_text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        kind = getattr(part, "type", "")
        if kind == "text":
            parts.append(part.text)
        elif kind == "thinking":
            continue
        else:  # an image or a file: named, not shown
            name = getattr(part, "name", None) or getattr(part, "filename", None)
            parts.append(f"[{kind}: {name}]" if name else f"[{kind}]")
    return " ".join(p for p in parts if p)


__all__ = ["Renderer", "short"]
