"""The offline default model: replies ``Echo: <last user message>``, word by word.

It can also call a tool, deterministically, so a tool turn works with no provider key: a user
message ``/tool <name> <JSON input>`` (e.g. ``/tool calculator {"expression": "6*7"}``) makes it
call that tool of the image (if the image has it); once the result is back it replies
``Echo: <name> returned: <result>``.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import TYPE_CHECKING

from agentvm.llm import (
    ModelStart,
    ModelStop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    parse_tool_input,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.llm import ModelEvent, ModelRequest

_WORD = re.compile(r"\S+\s*")  # a word with the spaces after it, so joined deltas equal the reply


TOOL_COMMAND = re.compile(r"^/tool\s+([A-Za-z0-9_-]+)\s*(.*)$", re.DOTALL)


def echo_reply(request: ModelRequest) -> str:
    """The deterministic reply the echo model gives to ``request`` (when it calls no tool)."""
    last = request.messages[-1] if request.messages else None
    if last is not None and last.tool_results:
        return "Echo: " + "; ".join(f"{r.name} returned: {r.content}" for r in last.tool_results)
    last_user = next((t.text for t in reversed(request.messages) if t.role == "user" and t.text), None)
    command = TOOL_COMMAND.match(last_user.strip()) if last_user else None
    if command and request.messages[-1].role == "user":
        known = {spec.name for spec in request.tools}
        if command.group(1) not in known:
            names = ", ".join(sorted(known)) or "none"
            return f"Echo: this image has no tool named {command.group(1)} (its tools: {names})"
    return "Echo: " + (last_user if last_user is not None else "(nothing)")


def tool_command(request: ModelRequest) -> tuple[str, str] | None:
    """``(name, input JSON)`` when the last message is ``/tool <name> <JSON>`` naming a tool of the image."""
    last = request.messages[-1] if request.messages else None
    if last is None or last.role != "user" or last.tool_results or not last.text:
        return None
    match = TOOL_COMMAND.match(last.text.strip())
    if match is None or match.group(1) not in {spec.name for spec in request.tools}:
        return None
    return match.group(1), match.group(2).strip()


def estimate_input_tokens(request: ModelRequest) -> int:
    """A deterministic stand-in for provider token counting: words of system + all messages."""
    words = len(request.system.split()) if request.system else 0
    words += sum(len(r.content.split()) for turn in request.messages for r in turn.tool_results)
    return words + sum(len(turn.text.split()) for turn in request.messages)


class EchoModelClient:
    """A ModelClient that needs no network and never fails."""

    def __init__(self, delay_ms: int = 20) -> None:
        self._delay_s = max(delay_ms, 0) / 1000

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelStart(message_id=f"msg_echo_{uuid.uuid4().hex[:16]}", model=request.model)
        command = tool_command(request)
        if command is not None:
            name, raw = command
            call_id = f"call_echo_{uuid.uuid4().hex[:12]}"
            yield ToolCallStart(call_id, name)
            yield ToolCallDelta(call_id, raw)
            arguments, problem = parse_tool_input(raw)
            yield ToolCallEnd(call_id, name, arguments, input_error=problem)
            yield ModelStop("tool_use", input_tokens=estimate_input_tokens(request), output_tokens=1)
            return
        words = _WORD.findall(echo_reply(request))
        for index, word in enumerate(words):
            if index and self._delay_s:
                await asyncio.sleep(self._delay_s)
            yield TextDelta(word)
        yield ModelStop("end_turn", input_tokens=estimate_input_tokens(request), output_tokens=len(words))


__all__ = ["TOOL_COMMAND", "EchoModelClient", "echo_reply", "estimate_input_tokens", "tool_command"]
