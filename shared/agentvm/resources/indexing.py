"""A knowledge version in the knowledge index: indexed at publish, searched, dropped at delete.

On a host with a ``KnowledgeIndex`` (the local host), a knowledge version's chunks live in the
index under ``(tenant, name, version)``, not in the version's record: the record's ``index`` says
so (``{"format": INDEX_FORMAT, "chunks", "bytes", "embedding"}``). Its chunks come from the
inline ``documents`` (each text read as Markdown, so its headings become heading paths) or, for
``{"draft": true}``, from the files uploaded to the resource's draft (``resources/uploads.py``),
copied under the new version. Words are always indexed; vectors too when the host has an
``Embedder`` (its model is recorded, so a search embeds its query with the same model or not at
all). The index's bytes are charged to the tenant's storage account, and given back when the
version is deleted.

A host without an index (an AWS stack without ``AVM_KNOWLEDGE_BUCKET``) keeps the BM25 chunk
offsets of ``resources/search.py`` in the record, and so do the versions an AWS stack published
before it had the index: those are still searched by that BM25 (``mode: "bm25"``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from agentvm.errors import InvalidResource
from agentvm.ports import DRAFT

if TYPE_CHECKING:
    from agentvm.ports import Embedder, KnowledgeChunk, KnowledgeIndex, StorageAccount
    from agentvm.records import ResourceVersion
    from agentvm.resources.passages import Passage

INDEX_FORMAT = "knowledge-index/1"
EMBED_BATCH = 64  # texts per embedding call


class MeteredEmbedder(Protocol):
    """A tenant's embedder, with its tokens billed: ``bill(usage_id)`` records what its calls since
    the last bill used (the host's ``hosts/knowledge.py``: usage kind ``embedding``)."""

    embedder: Embedder

    async def bill(self, usage_id: str) -> None: ...


class Unmetered:
    """An embedder whose calls are not billed (a host-wide embedder set on the runtime: tests)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    async def bill(self, usage_id: str) -> None:
        pass


EmbedderFor = Callable[[str], Awaitable["MeteredEmbedder | None"]]


def fixed_embedder(get: Callable[[], Embedder | None]) -> EmbedderFor:
    """``EmbedderFor`` that answers the same (unbilled) embedder for every tenant."""

    async def embedder_for(tenant_id: str) -> MeteredEmbedder | None:
        embedder = get()
        return None if embedder is None else Unmetered(embedder)

    return embedder_for


def is_indexed(version: ResourceVersion) -> bool:
    """Whether the version's chunks are in the knowledge index (else: BM25 offsets, or none)."""
    return version.index is not None and version.index.get("format") == INDEX_FORMAT


async def chunks_for(
    index: KnowledgeIndex, tenant_id: str, name: str, spec: dict[str, Any]
) -> tuple[dict[str, Any], list[KnowledgeChunk]]:
    """The spec to store and the chunks to index for a knowledge version being published."""
    if spec.get("draft"):
        chunks = await index.chunks(tenant_id, name, DRAFT)
        if not chunks:
            raise InvalidResource(
                f"spec.draft: resource://knowledge/{name} has no uploaded documents "
                "(POST /v1/knowledge/{name}/documents first)"
            )
        return {"uploads": _manifest(chunks)}, chunks
    return spec, inline_chunks(spec["documents"])


def inline_chunks(documents: list[dict[str, Any]]) -> list[KnowledgeChunk]:
    """The chunks of inline documents: each text read as Markdown (its headings kept)."""
    from agentvm.resources.chunking import chunk_sections
    from agentvm.resources.extract import read_document

    out: list[KnowledgeChunk] = []
    for n, document in enumerate(documents, 1):
        document_id = document.get("id") or f"document-{n}"
        extracted = read_document(document["text"].encode(), "markdown")
        out += chunk_sections(document_id, document.get("title") or document_id, extracted.sections)
    return out


def _manifest(chunks: list[KnowledgeChunk]) -> list[dict[str, Any]]:
    """Per document: id, title, chunks, bytes and a digest of its text (the version's digest
    changes when any document does)."""
    found: dict[str, dict[str, Any]] = {}
    digests: dict[str, Any] = {}
    for c in chunks:
        entry = found.setdefault(
            c.document_id, {"id": c.document_id, "title": c.title, "chunks": 0, "bytes": 0}
        )
        entry["chunks"] += 1
        entry["bytes"] += len(c.text.encode())
        digests.setdefault(c.document_id, hashlib.sha256()).update(
            f"{c.heading_path}\x00{c.text}\x00".encode()
        )
    for document_id, entry in found.items():
        entry["sha256"] = digests[document_id].hexdigest()
    return list(found.values())


def index_record(chunks: list[KnowledgeChunk], embedder: Embedder | None) -> dict[str, Any]:
    """What the version's record says of its chunks in the index."""
    return {
        "format": INDEX_FORMAT,
        "chunks": len(chunks),
        "bytes": sum(len(c.text.encode()) for c in chunks),
        "embedding": None
        if embedder is None
        else {"model": embedder.model, "dimensions": embedder.dimensions},
    }


async def embed_chunks(embedder: Embedder, chunks: list[KnowledgeChunk]) -> list[list[float]]:
    """One vector per chunk (its heading path and text), in batches, off the event loop."""
    texts = [f"{c.heading_path}\n{c.text}" if c.heading_path else c.text for c in chunks]
    vectors: list[list[float]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        batch = texts[start : start + EMBED_BATCH]
        vectors += await asyncio.to_thread(embedder.embed, batch, purpose="document")
    return vectors


async def index_version(
    index: KnowledgeIndex,
    embedder: Embedder | None,
    quota: StorageAccount | None,
    version: ResourceVersion,
    chunks: list[KnowledgeChunk],
) -> None:
    """Index a just-created version's chunks, their bytes charged first (refused past the account)."""
    assert version.index is not None
    size = int(version.index["bytes"])
    reserved = 0 if quota is None else await quota.reserve(version.tenantId, size)
    try:
        vectors = await embed_chunks(embedder, chunks) if embedder is not None and chunks else None
        await index.add_chunks(version.tenantId, version.name, version.version, chunks, vectors)
    except BaseException:
        await index.drop_version(version.tenantId, version.name, version.version)
        if quota is not None:
            await quota.give_back(version.tenantId, reserved)
        raise


async def unindex_version(
    index: KnowledgeIndex | None, quota: StorageAccount | None, version: ResourceVersion
) -> None:
    """Drop a deleted version's chunks and give their bytes back."""
    if not is_indexed(version) or index is None:
        return
    assert version.index is not None
    await index.drop_version(version.tenantId, version.name, version.version)
    if quota is not None:
        await quota.give_back(version.tenantId, int(version.index["bytes"]))


async def search_indexed(
    index: KnowledgeIndex, embedder: Embedder | None, version: ResourceVersion, query: str, limit: int
) -> tuple[list[Passage], str]:
    """The best passages of an indexed version and the mode (``hybrid`` or ``words``): vectors
    join in only when the host's embedder is the model the version was embedded with."""
    from agentvm.resources.hybrid import hybrid_search
    from agentvm.resources.passages import Passage

    assert version.index is not None
    embedded = version.index.get("embedding")
    same = (
        embedder is not None
        and embedded is not None
        and embedded.get("model") == embedder.model
        and embedded.get("dimensions") == embedder.dimensions
    )
    result = await hybrid_search(
        index, embedder if same else None, version.tenantId, version.name, version.version, query, limit
    )
    return [Passage.of(hit) for hit in result.hits], result.mode


__all__ = [
    "INDEX_FORMAT",
    "chunks_for",
    "embed_chunks",
    "index_record",
    "index_version",
    "inline_chunks",
    "is_indexed",
    "search_indexed",
    "unindex_version",
]
