"""The provider-neutral shapes a ModelClient consumes and produces.

A model call is a ``ModelRequest`` in and an async stream of ``ModelEvent`` out:
``ModelStart`` first, then ``TextDelta``s, then exactly one ``ModelStop`` carrying the
provider-reported usage. Failures are raised as ``agentvm.errors.ProviderError`` subclasses.
Closing the stream early (``aclose()``) must close the provider connection, so tokens stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """One message of the conversation as a model sees it: plain text with a role."""

    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str  # the provider's own model name, e.g. "claude-haiku-4-5"
    messages: tuple[ChatTurn, ...]
    system: str | None = None
    max_tokens: int = 1024


@dataclass(frozen=True, slots=True)
class ModelStart:
    message_id: str
    model: str
    # Input tokens when the provider reports them up front (Anthropic's message_start), so a turn
    # cut before ModelStop (interrupt, budget, failure) still bills its input. None: not known yet.
    input_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ModelStop:
    stop_reason: StopReason = "end_turn"
    input_tokens: int = 0
    output_tokens: int = 0


ModelEvent = ModelStart | TextDelta | ModelStop


@dataclass(frozen=True, slots=True)
class ModelRef:
    """``"anthropic/claude-haiku-4-5"`` split into provider and the provider's model name."""

    provider: str
    name: str
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, ref: str) -> ModelRef:
        provider, sep, name = ref.partition("/")
        if not sep or not provider or not name:
            from agentvm.errors import BadRequest

            raise BadRequest(f"model must look like 'provider/model', got {ref!r}")
        return cls(provider=provider, name=name)

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


__all__ = [
    "ChatTurn",
    "ModelEvent",
    "ModelRef",
    "ModelRequest",
    "ModelStart",
    "ModelStop",
    "StopReason",
    "TextDelta",
]
