"""Ports of knowledge retrieval (``agentvm.resources``): the chunk index of knowledge resources
and the embedding model that turns text into vectors.

A knowledge resource's chunks are indexed per version: ``(owner, resource, version)`` keys every
chunk, every vector and every query (``owner`` is the tenant the resource lives in), so one
tenant's query can never reach another's chunks. ``version`` is a published version (``"3"``) or
``DRAFT``: the documents uploaded since the last publish (``resources/uploads.py``).

The index answers two ranked lists, words (full text) and vectors (nearest neighbours);
``resources.hybrid.hybrid_search`` fuses them. Adapters: SQLite FTS5 + sqlite-vec on the local
host (``adapters/local/sqlite/knowledge.py``); the same, one file per version in S3 (a draft: one
segment per upload), on AWS (``adapters/aws/s3_knowledge.py``); a ``tsvector`` and ``real[]``
vectors on PostgreSQL, the cluster host (``adapters/postgres/knowledge.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

DRAFT = "draft"  # the version key of the documents uploaded since the last publish


@dataclass(frozen=True, slots=True)
class KnowledgeLimits:
    """What uploads may add to one knowledge resource's draft (``AVM_KNOWLEDGE_*``)."""

    max_file_bytes: int = 50 * 1024 * 1024  # one uploaded file, as sent
    max_documents: int = 10_000  # documents in a draft
    max_bytes: int = 200 * 1024 * 1024  # extracted text in a draft


@dataclass(frozen=True)
class KnowledgeChunk:
    """One passage of a document, as cut at ingestion (``resources/chunking.py``).

    ``heading_path``: the headings above it (``"Billing > Refunds"``, ``""`` when none);
    ``location``: where it is in its document (``"p.4"`` for a PDF page, else its section's
    heading, or ``""``); ``ordinal``: its place among its document's chunks, from 0.
    """

    document_id: str
    title: str
    heading_path: str
    location: str
    ordinal: int
    text: str

    # The fields in order: what an index selects to rebuild a chunk (``from_row``).
    COLUMNS: ClassVar[str] = "document_id, title, heading_path, location, ordinal, text"

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> KnowledgeChunk:
        """The chunk of a row whose first six columns are ``COLUMNS`` (the ones after them, a
        score say, are the caller's)."""
        return cls(
            document_id=row[0],
            title=row[1],
            heading_path=row[2],
            location=row[3],
            ordinal=int(row[4]),
            text=row[5],
        )


@dataclass(frozen=True)
class KnowledgeHit:
    """A chunk a search found, with its score (higher is better, comparable within one list)."""

    chunk: KnowledgeChunk
    score: float


@dataclass(frozen=True)
class KnowledgeDocument:
    """A document of one version, summed over its chunks."""

    document_id: str
    title: str
    chunks: int
    bytes: int  # UTF-8 bytes of its chunks' text


def vector_dimensions(
    chunks: Sequence[KnowledgeChunk], vectors: Sequence[Sequence[float]] | None
) -> int | None:
    """The dimensions of ``add_chunks``' vectors (None: words only), checked as every index must:
    one vector per chunk, all of one dimension (``ValueError`` otherwise)."""
    if vectors is not None and len(vectors) != len(chunks):
        raise ValueError(f"{len(vectors)} vectors for {len(chunks)} chunks")
    dimensions = len(vectors[0]) if vectors else None
    if vectors and any(len(v) != dimensions for v in vectors):
        raise ValueError("every vector of one call has the same dimensions")
    return dimensions


class KnowledgeIndex(Protocol):
    """Chunks of knowledge resources, searchable by words and by vectors, per tenant and version."""

    async def add_chunks(
        self,
        owner: str,
        resource: str,
        version: str,
        chunks: Sequence[KnowledgeChunk],
        vectors: Sequence[Sequence[float]] | None,
    ) -> None:
        """Index ``chunks`` (``vectors``: one per chunk, in order, all of one dimension; None:
        words only). A chunk of the same document and ordinal replaces the one indexed."""
        ...

    async def search_words(
        self, owner: str, resource: str, version: str, query: str, limit: int
    ) -> list[KnowledgeHit]:
        """The best chunks for ``query``'s words, best first (an empty list when none matches)."""
        ...

    async def search_vectors(
        self, owner: str, resource: str, version: str, vector: Sequence[float], limit: int
    ) -> list[KnowledgeHit]:
        """The chunks nearest ``vector``, nearest first; ``[]`` when the version has no vectors
        (or none of that dimension)."""
        ...

    async def drop_version(self, owner: str, resource: str, version: str) -> None:
        """Forget every chunk and vector of a version."""
        ...

    async def stats(self, owner: str, resource: str) -> tuple[int, int, int]:
        """``(documents, chunks, bytes)`` over every version of the resource (draft included)."""
        ...

    # What the uploads of a draft need (resources/uploads.py) besides searching it.

    async def documents(self, owner: str, resource: str, version: str) -> list[KnowledgeDocument]:
        """The version's documents, by id."""
        ...

    async def chunks(self, owner: str, resource: str, version: str) -> list[KnowledgeChunk]:
        """Every chunk of the version, by document then ordinal (a publish copies the draft's)."""
        ...

    async def drop_document(self, owner: str, resource: str, version: str, document_id: str) -> int:
        """Forget one document's chunks and vectors; the bytes of text forgotten (0: none)."""
        ...

    async def drop_owner(self, owner: str) -> None:
        """Forget everything of a tenant being deleted (drafts never published included)."""
        ...


__all__ = [
    "DRAFT",
    "KnowledgeChunk",
    "KnowledgeDocument",
    "KnowledgeHit",
    "KnowledgeIndex",
    "KnowledgeLimits",
    "vector_dimensions",
]
