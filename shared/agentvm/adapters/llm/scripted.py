"""``ScriptedModelClient``: a model that plays back scripted replies (a shipped fake for tests).

Each call to ``stream`` takes the next script: a reply string (streamed word by word) or a
``ProviderError`` to raise, optionally after some words (``Fail(after_words, error)``).
``word_delay_s`` paces the words, so a test can interrupt a stream mid-way.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.llm import ModelStart, ModelStop, TextDelta

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from agentvm.errors import ProviderError
    from agentvm.llm import ModelEvent, ModelRequest


@dataclass(frozen=True)
class Fail:
    error: ProviderError
    after_words: str = ""  # text streamed before the failure


class ScriptedModelClient:
    def __init__(
        self, scripts: Iterable[str | Fail | ProviderError] = (), *, word_delay_s: float = 0.0
    ) -> None:
        self._scripts: deque[str | Fail | ProviderError] = deque(scripts)
        self.word_delay_s = word_delay_s
        self.requests: list[ModelRequest] = []
        self.closed_early = 0  # streams the caller closed before the end

    def add(self, *scripts: str | Fail | ProviderError) -> None:
        self._scripts.extend(scripts)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        script = self._scripts.popleft() if self._scripts else "ok"
        if isinstance(script, Exception):
            raise script
        text = script.after_words if isinstance(script, Fail) else script
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
            finished = True
            yield ModelStop(
                "end_turn",
                input_tokens=sum(len(m.text.split()) for m in request.messages),
                output_tokens=len(words),
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


__all__ = ["Fail", "ScriptedModelClient", "SingleModelResolver"]
