"""Hybrid retrieval over a knowledge version: words and vectors, fused by reciprocal rank.

``hybrid_search`` asks the index for two ranked lists, the full-text one (``search_words``) and,
when an ``Embedder`` is given, the nearest-neighbour one (``search_vectors`` with the query's
vector), and fuses them with reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): a
chunk's score is the sum over the lists it appears in of ``1 / (RRF_K + rank)``, rank from 1.
RRF needs no score calibration between BM25 and cosine distance (their scales differ), and
``RRF_K = 60`` is the paper's constant, which later evaluations keep finding hard to beat.

Without an embedder (or when the version has no vectors) the words list is the answer, and the
result says so: ``mode`` is ``"words"``, not ``"hybrid"``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agentvm.ports import KnowledgeHit

if TYPE_CHECKING:
    from agentvm.ports import Embedder, KnowledgeChunk, KnowledgeIndex

RRF_K = 60
CANDIDATES = 4  # each list is asked for this many times ``limit`` candidates before fusing


@dataclass(frozen=True)
class HybridResult:
    """The fused hits, best first, and how they were found."""

    hits: list[KnowledgeHit]
    mode: Literal["hybrid", "words"]


def reciprocal_rank_fusion(*ranked: list[KnowledgeHit], k: int = RRF_K) -> list[KnowledgeHit]:
    """One list from several ranked ones: ``sum(1 / (k + rank))`` per chunk, best first (ties:
    first seen first). The hits carry the fused score."""
    scores: dict[tuple[str, int], float] = {}
    chunks: dict[tuple[str, int], KnowledgeChunk] = {}
    for hits in ranked:
        for rank, hit in enumerate(hits, 1):
            key = (hit.chunk.document_id, hit.chunk.ordinal)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            chunks.setdefault(key, hit.chunk)
    order = sorted(scores, key=lambda key: -scores[key])  # stable: first seen wins a tie
    return [KnowledgeHit(chunks[key], scores[key]) for key in order]


async def hybrid_search(
    index: KnowledgeIndex,
    embedder: Embedder | None,
    owner: str,
    resource: str,
    version: str,
    query: str,
    limit: int,
) -> HybridResult:
    """The best ``limit`` chunks of a version for ``query``: words and vectors fused, or words
    alone when there is no embedder or the version has no vectors."""
    wide = max(limit * CANDIDATES, limit)
    words = await index.search_words(owner, resource, version, query, wide)
    if embedder is None:
        return HybridResult(words[:limit], "words")
    # Embedding is a model call (blocking): off the event loop.
    vector = (await asyncio.to_thread(embedder.embed, [query], purpose="query"))[0]
    nearest = await index.search_vectors(owner, resource, version, vector, wide)
    if not nearest:
        return HybridResult(words[:limit], "words")
    return HybridResult(reciprocal_rank_fusion(words, nearest)[:limit], "hybrid")


__all__ = ["CANDIDATES", "RRF_K", "HybridResult", "hybrid_search", "reciprocal_rank_fusion"]
