"""Files uploaded into a knowledge resource's draft: the documents its next version will hold.

A knowledge resource has one draft per tenant: the documents uploaded since (``upload``), kept
in the knowledge index under the version key ``DRAFT`` and listed or removed one by one.
Publishing ``{"draft": true}`` (``PUT /v1/resources/knowledge/<name>``) copies the draft's chunks
into a new immutable version (``resources/indexing.py``); the draft stays, so the version after
next is this one's documents with whatever is uploaded or removed since.

A document's id is its file name (the last path segment): uploading the same name again replaces
it. Each file is read (``resources/extract.py``) and cut into chunks (``resources/chunking.py``)
off the event loop, and its text's bytes are charged to the tenant's storage account; removing it
gives them back.

Limits (``KnowledgeLimits``, the runtime's: ``AVM_KNOWLEDGE_MAX_FILE_BYTES``, ``..._DOCUMENTS``,
``..._BYTES``): a file's size as sent; a draft's documents and extracted text
(``document_too_large`` past any).
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from agentvm.errors import DocumentTooLarge, InvalidDocument, InvalidResource, NotFound
from agentvm.ports import DRAFT
from agentvm.resources.uri import check_name

if TYPE_CHECKING:
    from agentvm.ports import (
        KnowledgeDocument,
        KnowledgeIndex,
        KnowledgeLimits,
        ResourceRegistry,
        StorageAccount,
    )

MAX_DOCUMENT_ID = 200
_UNSAFE = re.compile(r"[^\w.\- ()+,@]+", re.UNICODE)


def document_id(filename: str) -> str:
    """The file name's last segment, in safe characters (``handbook v2.pdf`` stays so)."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    cleaned = _UNSAFE.sub("_", base).strip(" .")[:MAX_DOCUMENT_ID]
    if not cleaned:
        raise InvalidDocument(f"{filename!r}: a file name is needed (it is the document's id)")
    return cleaned


def index_of(registry: ResourceRegistry) -> KnowledgeIndex:
    knowledge = registry.knowledge_index()
    if knowledge is None:
        raise InvalidResource("this server keeps no uploaded documents (it has no knowledge index)")
    return knowledge


def document_wire(d: KnowledgeDocument) -> dict[str, Any]:
    return {"id": d.document_id, "title": d.title, "chunks": d.chunks, "bytes": d.bytes}


async def upload(
    registry: ResourceRegistry,
    quota: StorageAccount | None,
    tenant_id: str,
    name: str,
    *,
    filename: str,
    content_type: str | None,
    data: bytes,
    limits: KnowledgeLimits,
) -> dict[str, Any]:
    """Read one file into the draft (replacing the document of the same name); what it became."""
    from agentvm.resources.chunking import chunk_sections
    from agentvm.resources.extract import document_type, read_document

    check_name(name)
    knowledge = index_of(registry)
    if len(data) > limits.max_file_bytes:
        raise DocumentTooLarge(
            f"{filename}: {len(data)} bytes (a file may have at most {limits.max_file_bytes})"
        )
    if not data:
        raise InvalidDocument(f"{filename}: the file is empty")
    doc_id = document_id(filename)
    kind = document_type(filename, content_type)
    extracted = await asyncio.to_thread(read_document, data, kind)
    chunks = await asyncio.to_thread(chunk_sections, doc_id, extracted.title or doc_id, extracted.sections)
    if not chunks:
        raise InvalidDocument(f"{filename}: no text found in it")
    size = sum(len(c.text.encode()) for c in chunks)
    existing = await knowledge.documents(tenant_id, name, DRAFT)
    previous = next((d for d in existing if d.document_id == doc_id), None)
    count = len(existing) + (0 if previous else 1)
    if count > limits.max_documents:
        raise DocumentTooLarge(
            f"resource://knowledge/{name}: a draft holds at most {limits.max_documents} documents"
        )
    total = sum(d.bytes for d in existing) - (previous.bytes if previous else 0) + size
    if total > limits.max_bytes:
        raise DocumentTooLarge(
            f"resource://knowledge/{name}: {total} bytes of text with {filename} (at most {limits.max_bytes})"
        )
    reserved = 0 if quota is None else await quota.reserve(tenant_id, size)
    freed = 0
    try:
        if previous:  # the old text goes first (its bytes given back below, whatever happens next)
            freed = await knowledge.drop_document(tenant_id, name, DRAFT, doc_id)
        await knowledge.add_chunks(tenant_id, name, DRAFT, chunks, None)
    except BaseException:
        if quota is not None:
            await quota.give_back(tenant_id, reserved + freed)
        raise
    if quota is not None and freed:
        await quota.give_back(tenant_id, freed)
    return {
        "document": {
            "id": doc_id,
            "title": chunks[0].title,
            "type": extracted.type,
            "chunks": len(chunks),
            "bytes": size,
            "replaced": previous is not None,
        },
        "draft": {"documents": count, "bytes": total},
    }


async def documents(
    registry: ResourceRegistry, tenant_id: str, name: str, version: str | None
) -> list[KnowledgeDocument]:
    """The documents of the draft, or of a published version of the tenant's own resource."""
    check_name(name)
    knowledge = index_of(registry)
    published = version is not None and version != DRAFT
    if published and await registry.store.get_version(tenant_id, "knowledge", name, str(version)) is None:
        raise NotFound(f"resource://knowledge/{name}@{version} not found")
    return await knowledge.documents(tenant_id, name, version or DRAFT)


async def remove(
    registry: ResourceRegistry, quota: StorageAccount | None, tenant_id: str, name: str, doc_id: str
) -> None:
    """Remove one document from the draft (published versions keep theirs)."""
    check_name(name)
    freed = await index_of(registry).drop_document(tenant_id, name, DRAFT, doc_id)
    if not freed:
        raise NotFound(f"resource://knowledge/{name} has no document {doc_id!r} in its draft")
    if quota is not None:
        await quota.give_back(tenant_id, freed)


__all__ = [
    "MAX_DOCUMENT_ID",
    "document_id",
    "document_wire",
    "documents",
    "index_of",
    "remove",
    "upload",
]
