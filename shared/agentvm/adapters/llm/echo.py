"""The offline default model: replies ``Echo: <last user message>``, word by word."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import TYPE_CHECKING

from agentvm.llm import ModelStart, ModelStop, TextDelta

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.llm import ModelEvent, ModelRequest

_WORD = re.compile(r"\S+\s*")  # a word with the spaces after it, so joined deltas equal the reply


def echo_reply(request: ModelRequest) -> str:
    """The deterministic reply the echo model gives to ``request``."""
    last_user = next((turn.text for turn in reversed(request.messages) if turn.role == "user"), None)
    return "Echo: " + (last_user if last_user is not None else "(nothing)")


def estimate_input_tokens(request: ModelRequest) -> int:
    """A deterministic stand-in for provider token counting: words of system + all messages."""
    words = len(request.system.split()) if request.system else 0
    return words + sum(len(turn.text.split()) for turn in request.messages)


class EchoModelClient:
    """A ModelClient that needs no network and never fails."""

    def __init__(self, delay_ms: int = 20) -> None:
        self._delay_s = max(delay_ms, 0) / 1000

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelStart(message_id=f"msg_echo_{uuid.uuid4().hex[:16]}", model=request.model)
        words = _WORD.findall(echo_reply(request))
        for index, word in enumerate(words):
            if index and self._delay_s:
                await asyncio.sleep(self._delay_s)
            yield TextDelta(word)
        yield ModelStop("end_turn", input_tokens=estimate_input_tokens(request), output_tokens=len(words))


__all__ = ["EchoModelClient", "echo_reply", "estimate_input_tokens"]
