"""Model ports: a provider client (``ModelClient``) and the resolver from a model reference to one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.llm import ModelEvent, ModelRequest


class ModelClient(Protocol):
    """A model provider. See ``agentvm.llm`` for the event contract."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


class ModelResolver(Protocol):
    """Maps a model reference like ``anthropic/claude-haiku-4-5`` to a client and model name."""

    def resolve(self, ref: str | None) -> tuple[ModelClient, str, str]:
        """Returns (client, provider model name, canonical "provider/name"). None = default."""
        ...


__all__ = [
    "ModelClient",
    "ModelResolver",
]
