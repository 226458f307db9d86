"""``ScriptedModelClient``: a model that plays back scripted replies (a shipped fake for tests).

Each call to ``stream`` takes the next script: a reply string (streamed word by word), a
``ProviderError`` to raise, optionally after some words (``Fail(after_words, error)``), or
``Calls`` (optional text, then tool calls, ending with ``stop_reason="tool_use"``).
``word_delay_s`` paces the words, so a test can interrupt a stream mid-way. Input tokens are the
words of the request, plus ``cache_read_tokens`` and ``cache_write_tokens`` (reported as read from
and written to a prompt cache, as Anthropic does).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    from collections.abc import AsyncIterator, Iterable

    from agentvm.errors import ProviderError
    from agentvm.llm import ModelEvent, ModelRequest


@dataclass(frozen=True)
class Fail:
    error: ProviderError
    after_words: str = ""  # text streamed before the failure


@dataclass(frozen=True)
class Calls:
    """A reply that asks for tools: ``Calls(("get_weather", {"city": "Paris"}), text="Let me look.")``.

    A call given as ``(name, raw_json_string)`` streams that string as its input verbatim (for
    invalid input). Call ids are ``call_<request number>_<index>``.
    """

    calls: tuple[tuple[str, dict[str, Any] | str], ...]
    text: str = ""

    def __init__(self, *calls: tuple[str, dict[str, Any] | str], text: str = "") -> None:
        object.__setattr__(self, "calls", tuple(calls))
        object.__setattr__(self, "text", text)


class ScriptedModelClient:
    def __init__(
        self, scripts: Iterable[str | Fail | Calls | ProviderError] = (), *, word_delay_s: float = 0.0
    ) -> None:
        self._scripts: deque[str | Fail | Calls | ProviderError] = deque(scripts)
        self.word_delay_s = word_delay_s
        self.requests: list[ModelRequest] = []
        self.closed_early = 0  # streams the caller closed before the end
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0

    def add(self, *scripts: str | Fail | Calls | ProviderError) -> None:
        self._scripts.extend(scripts)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        script = self._scripts.popleft() if self._scripts else "ok"
        if isinstance(script, BaseException):  # a ProviderError, or what a test needs raised
            raise script
        text = (
            script.after_words
            if isinstance(script, Fail)
            else script.text
            if isinstance(script, Calls)
            else script
        )
        n = len(self.requests)
        finished = False
        try:
            yield ModelStart(message_id=f"msg_scripted_{n}", model=request.model)
            words = text.split(" ") if text else []
            for i, word in enumerate(words):
                if self.word_delay_s:
                    await asyncio.sleep(self.word_delay_s)
                yield TextDelta(word if i == 0 else " " + word)
            if isinstance(script, Fail):
                raise script.error
            calls = script.calls if isinstance(script, Calls) else ()
            for index, (name, arguments) in enumerate(calls):
                call_id = f"call_{n}_{index}"
                raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
                yield ToolCallStart(call_id, name)
                for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                    if piece:
                        yield ToolCallDelta(call_id, piece)
                parsed, problem = parse_tool_input(raw)
                yield ToolCallEnd(call_id, name, parsed, input_error=problem)
            finished = True
            yield ModelStop(
                "tool_use" if calls else "end_turn",
                input_tokens=sum(len(m.text.split()) for m in request.messages)
                + self.cache_read_tokens
                + self.cache_write_tokens,
                output_tokens=len(words) + len(calls),
                cache_read_tokens=self.cache_read_tokens,
                cache_write_tokens=self.cache_write_tokens,
            )
        finally:
            if not finished:
                self.closed_early += 1


class SingleModelResolver:
    """Resolves every model reference to one client (tests, benchmarks)."""

    def __init__(self, client: object, ref: str = "scripted/test-1") -> None:
        self.client = client
        self.ref = ref

    def resolve(self, ref: str | None) -> tuple[object, str, str]:
        provider, _, name = (ref or self.ref).partition("/")
        return self.client, name or provider, ref or self.ref


__all__ = ["Calls", "Fail", "ScriptedModelClient", "SingleModelResolver"]
