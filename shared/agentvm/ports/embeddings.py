"""The embeddings port: text to vectors, from the tenant's embedding model (knowledge search).

Synchronous, as the indexers that call it run off the event loop (in a worker thread). ``model``
is the provider's model name; ``dimensions`` the length of every vector ``embed`` returns.
``purpose`` says whether the texts are documents to index or a query to search with: a model that
embeds the two differently (Cohere's ``input_type``) is told; the others ignore it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence


EmbedPurpose = Literal["document", "query"]


class Embedder(Protocol):
    model: str
    dimensions: int

    def embed(self, texts: Sequence[str], *, purpose: EmbedPurpose) -> list[list[float]]: ...


__all__ = ["EmbedPurpose", "Embedder"]
