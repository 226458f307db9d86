"""Knowledge uploads over HTTP: ``/v1/knowledge/<name>/documents`` (``resources/uploads.py``).

A file goes up as the raw request body, its name in ``?filename=`` and its type in
``Content-Type`` (or the name's extension): one file per request, no multipart encoding to parse
or buffer, so the handler streams the body after the caller is authenticated and stops at the
per-file limit. It lands in the resource's draft; ``PUT /v1/resources/knowledge/<name>`` with
``{"spec": {"draft": true}}`` publishes the draft as the next version. Uploading and removing need
the admin scope; listing needs any key of the tenant. Only the caller's own tenant is reached:
another tenant's resource answers as a missing one (an empty draft, or ``not_found``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Path, Query, Request

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import FILE_LIMIT, ok
from agentvm.api.resources import MAX_URI, MAX_VERSION, centre
from agentvm.errors import DocumentTooLarge
from agentvm.resources.uploads import MAX_DOCUMENT_ID

if TYPE_CHECKING:
    from agentvm.runtime import Runtime

router = APIRouter(prefix="/knowledge", tags=["knowledge"])

UPLOAD_PATH = re.compile(r"/v1/knowledge/.+/documents")


def upload_limits(runtime: Runtime) -> tuple[tuple[str, re.Pattern[str], int], ...]:
    """The upload route's own body limit (``api/body_limit.py``: ``wider``): the per-file limit."""
    return (("POST", UPLOAD_PATH, runtime.knowledge_limits.max_file_bytes),)


NAME = Path(min_length=1, max_length=MAX_URI, description="the knowledge resource's name")

_UPLOADED = {
    "document": {
        "id": "handbook.pdf",
        "title": "Employee handbook",
        "type": "pdf",
        "chunks": 42,
        "bytes": 51234,
        "replaced": False,
    },
    "draft": {"documents": 3, "bytes": 80311},
}
_DOCUMENTS = {
    "resource": "resource://knowledge/handbook",
    "version": "draft",
    "documents": [{"id": "handbook.pdf", "title": "Employee handbook", "chunks": 42, "bytes": 51234}],
}


async def _read_file(request: Request, limit: int) -> bytes:
    """The body, refused once it passes the per-file limit (``document_too_large``)."""
    parts: list[bytes] = []
    size = 0
    async for piece in request.stream():
        size += len(piece)
        if size > limit:
            raise DocumentTooLarge(f"the file is over {limit} bytes (the per-file limit)")
        parts.append(piece)
    return b"".join(parts)


@router.post(
    "/{name:path}/documents",
    status_code=201,
    response_model=None,
    responses={
        **ok(201, "Uploaded", _UPLOADED, "the document and the draft it joined"),
        **error_responses(400, 404, 507),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                # bytes, at most AVM_KNOWLEDGE_MAX_FILE_BYTES (413 past it)
                "application/octet-stream": {"schema": {"type": "string", "format": "binary", **FILE_LIMIT}}
            },
        }
    },
)
async def upload_document(
    request: Request,
    runtime: RuntimeDep,
    caller: Caller,
    name: str = NAME,
    filename: str = Query(min_length=1, max_length=MAX_DOCUMENT_ID, description="the document's id"),
) -> dict[str, Any]:
    """Upload one file (PDF, .docx, HTML, Markdown or text) into the resource's draft; the same
    file name again replaces that document."""
    from agentvm.resources.uploads import upload

    principal = admin(caller)
    registry = centre(runtime)
    data = await _read_file(request, runtime.knowledge_limits.max_file_bytes)
    return await upload(
        registry,
        runtime.storage_quota,
        principal.tenant_id,
        name,
        filename=filename,
        content_type=request.headers.get("content-type"),
        data=data,
        limits=runtime.knowledge_limits,
    )


@router.get(
    "/{name:path}/documents",
    response_model=None,
    responses={**ok(200, "KnowledgeDocuments", _DOCUMENTS, "the documents"), **error_responses(400, 404)},
)
async def list_documents(
    runtime: RuntimeDep,
    caller: Caller,
    name: str = NAME,
    version: str | None = Query(
        default=None, max_length=MAX_VERSION, description="a published version; default: the draft"
    ),
) -> dict[str, Any]:
    """The documents of the resource's draft (or of one of its published versions)."""
    from agentvm.resources.uploads import document_wire, documents

    found = await documents(centre(runtime), caller.tenant_id, name, version)
    return {
        "resource": f"resource://knowledge/{name}",
        "version": version or "draft",
        "documents": [document_wire(d) for d in found],
    }


@router.delete(
    "/{name:path}/documents/{document_id}",
    response_model=None,
    responses={
        **ok(200, "DeletedDocument", {"deleted": "handbook.pdf"}, "what was removed"),
        **error_responses(400, 404),
    },
)
async def delete_document(
    runtime: RuntimeDep,
    caller: Caller,
    name: str = NAME,
    document_id: str = Path(min_length=1, max_length=MAX_DOCUMENT_ID),
) -> dict[str, Any]:
    """Remove a document from the draft (published versions keep their documents)."""
    from agentvm.resources.uploads import remove

    principal = admin(caller)
    await remove(centre(runtime), runtime.storage_quota, principal.tenant_id, name, document_id)
    return {"deleted": document_id}


__all__ = ["router", "upload_limits"]
