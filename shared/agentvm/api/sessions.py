"""The session centre over HTTP (docs/sessions.md): export, import, search, fork and title.

Admin keys only, like every ``/v1`` route, and the caller's tenant only: another tenant's session
reads exactly like one that does not exist. Client keys read their conversations over the
WebSocket (``image_messages_request``); exports carry an image's whole config (tool declarations,
MCP servers), which is an admin's to see. What the routes do is in ``agentvm.sessions``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import BODY_LIMIT, examples, ok
from agentvm.api.params import MAX_ID
from agentvm.sessions.search import MAX_QUERY_CHARS

MEDIA_TYPE = "application/x-ndjson"
SESSION_ID = Path(min_length=1, max_length=MAX_ID)
_RECORD = {
    "imageId": "img_mjw1x2y3_0k4m5n6p7q",
    "containerId": "user-alice",
    "sessionId": "sess_mjw1x2y3_0k4m5n6p7r",
    "name": "Trip to Lisbon",
    "createdAt": 1767225600000,
    "updatedAt": 1767225600000,
    "online": False,
}
_EXPORT = "\n".join(
    [
        '{"type":"session","format":"agentvm.session","version":1,"exportId":"exp_mjw1x2y3_0k4m5n6p7s",'
        '"exportedAt":1767225600000,"source":{"containerId":"user-alice","imageId":"img_...","sessionId":"sess_...",'
        '"name":"Trip to Lisbon","createdAt":1767225000000}}',
        '{"type":"image","config":{"name":"Trip to Lisbon","systemPrompt":"Be brief.",'
        '"concurrency":"queue"}}',
        '{"type":"message","seq":1,"message":{"id":"msg_...","timestamp":1767225000000,"role":"user",'
        '"subtype":"user","content":"Where should I eat in Lisbon?"}}',
        '{"type":"message","seq":2,"message":{"id":"msg_...","timestamp":1767225001000,"role":"assistant",'
        '"subtype":"assistant","content":[{"type":"text","text":"Try Alfama."}],"parentId":"msg_..."}}',
        '{"type":"usage","turnId":"turn_...","containerId":"user-alice","imageId":"img_...",'
        '"sessionId":"sess_...","model":"anthropic/claude-haiku-4-5","inputTokens":12,"outputTokens":4,'
        '"kind":"turn","status":"completed","createdAt":1767225001000,"durationMs":900,"estimated":false}',
        '{"type":"end","messages":2,"usage":1,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}',
        "",
    ]
)

_SEARCH = {
    "results": [
        {
            "containerId": "user-alice",
            "imageId": "img_mjw1x2y3_0k4m5n6p7q",
            "sessionId": "sess_mjw1x2y3_0k4m5n6p7r",
            "name": "Trip to Lisbon",
            "messageId": "msg_mjw1x2y3_0k4m5n6p7t",
            "seq": 2,
            "role": "assistant",
            "timestamp": 1767225001000,
            "snippet": "Try Alfama.",
        }
    ],
    "next": None,
}
_IMPORTED = {"created": True, "exportId": "exp_mjw1x2y3_0k4m5n6p7s", "messages": 2, "record": _RECORD}
_FORKED = {
    "created": True,
    "messages": 2,
    "forkedFrom": {
        "sessionId": "sess_mjw1x2y3_0k4m5n6p7r",
        "messageId": "msg_mjw1x2y3_0k4m5n6p7t",
        "seq": 2,
    },
    "record": {**_RECORD, "name": "Lisbon, take two"},
}
_TITLED = {"record": _RECORD}


class Record(BaseModel):
    """An image as ``image_list`` shows it (AgentX's ImageListItem): ``name`` is the session's title."""

    model_config = ConfigDict(extra="allow", json_schema_extra=examples(_RECORD))

    imageId: str
    containerId: str
    sessionId: str
    name: str
    createdAt: int
    updatedAt: int
    online: bool


class Imported(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_IMPORTED))

    created: bool = Field(description="false: this export was imported into this container before")
    exportId: str
    messages: int
    record: Record


class SearchResult(BaseModel):
    containerId: str
    imageId: str
    sessionId: str
    name: str = Field(description="the session's title (its image's name)")
    messageId: str
    seq: int
    role: str
    timestamp: int
    snippet: str = Field(description="a passage of the message around its first match")


class SearchResults(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_SEARCH))

    results: list[SearchResult]
    next: str | None = Field(description="the cursor of the next page; null at the end")


class Fork(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples({"messageId": "msg_mjw1x2y3_0k4m5n6p7t", "name": "Lisbon, take two"}),
    )

    messageId: StrictStr = Field(min_length=1, max_length=128, description="the last message the fork keeps")
    name: StrictStr | None = Field(
        default=None, min_length=1, max_length=200, description="default: the source's"
    )
    requestId: StrictStr | None = Field(
        default=None, min_length=1, max_length=128, description="a retried fork with it returns the first one"
    )


class Forked(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_FORKED))

    created: bool
    messages: int = Field(description="how many messages the fork's history holds")
    forkedFrom: dict[str, Any]
    record: Record


class Title(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra=examples({"title": "Trip to Lisbon"})
    )

    title: StrictStr = Field(min_length=1, max_length=200)


class Titled(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_TITLED))

    record: Record


def _again(model: Any, example: Any) -> dict[int | str, dict[str, Any]]:
    """The 200 of a request made before (import, fork): its first result."""
    return ok(200, model, {**example, "created": False}, "the same request made before: its first result")


router = APIRouter(tags=["sessions"])


@router.get(
    "/sessions/search",
    response_model=SearchResults,
    responses={
        **ok(200, SearchResults, _SEARCH, "one page of matching messages, newest first"),
        **error_responses(400),
    },
)
async def search_sessions(
    runtime: RuntimeDep,
    caller: Caller,
    q: str = Query(
        json_schema_extra={"maxLength": MAX_QUERY_CHARS},  # stated: longer is invalid_query
        description='plain words and "quoted phrases" (all must occur); a trailing * for a prefix',
    ),
    containerId: str | None = Query(default=None, min_length=1, max_length=MAX_ID),  # noqa: N803
    limit: int = Query(default=20, ge=1, le=100),
    cursor: str | None = Query(default=None, max_length=400, description="`next` of the previous page"),
) -> dict[str, Any]:
    """Full-text search over the tenant's messages (of one container with ``containerId``): the
    text of user and assistant messages, case and accents ignored. A page may hold fewer
    results than ``limit`` (even none) and still have a ``next``: keep going until it is null."""
    from agentvm.sessions.search import search_sessions

    principal = admin(caller)
    return await search_sessions(
        runtime, principal.tenant_id, q, container_id=containerId, limit=limit, cursor=cursor
    )


@router.get(
    "/sessions/{session_id}/export",
    response_class=Response,
    responses={
        200: {
            "description": "the session as JSON Lines (docs/sessions.md, format version 1)",
            "content": {MEDIA_TYPE: {"schema": {"type": "string"}, "example": _EXPORT}},
        },
        **error_responses(400, 404),
    },
)
async def export_session(runtime: RuntimeDep, caller: Caller, session_id: str = SESSION_ID) -> Response:
    """The session's messages, its image's pinned config, its compaction summary and its usage
    records, one JSON object per line (400 ``export_too_large`` past 4 MiB)."""
    from agentvm.sessions.export import export_session

    principal = admin(caller)
    body = await export_session(runtime, principal.tenant_id, session_id)
    disposition = f'attachment; filename="{_filename(session_id)}.jsonl"'
    return Response(body, media_type=MEDIA_TYPE, headers={"Content-Disposition": disposition})


@router.post(
    "/containers/{container_id}/sessions/import",
    status_code=201,
    response_model=Imported,
    responses={
        **ok(201, Imported, _IMPORTED, "imported: a new image in the container"),
        **_again(Imported, _IMPORTED),
        **error_responses(400, 409, 507),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                MEDIA_TYPE: {
                    # bytes, refused past AVM_MAX_BODY_BYTES (413): never more characters than that
                    "schema": {"type": "string", **BODY_LIMIT},
                    "example": _EXPORT,
                }
            },
        }
    },
)
async def import_session(
    request: Request,
    runtime: RuntimeDep,
    caller: Caller,
    response: Response,
    container_id: str = Path(min_length=1, max_length=MAX_ID),
) -> dict[str, Any]:
    """Import an export (the body, JSON Lines) into the container (created if need be): a new
    image with new ids and the same history. Idempotent by the export's ``exportId`` per
    container; all or nothing (a refused or failed import leaves nothing behind)."""
    from agentvm.sessions.imports import import_session

    principal = admin(caller)
    result = await import_session(runtime, principal.tenant_id, container_id, await request.body())
    if not result["created"]:
        response.status_code = 200
    return result


@router.post(
    "/sessions/{session_id}/fork",
    status_code=201,
    response_model=Forked,
    responses={
        **ok(201, Forked, _FORKED, "a new image whose history ends at messageId"),
        **_again(Forked, _FORKED),
        **error_responses(400, 404, 409, 507),
    },
)
async def fork_session(
    runtime: RuntimeDep, caller: Caller, response: Response, body: Fork, session_id: str = SESSION_ID
) -> dict[str, Any]:
    """A new image in the same container, with the same config, whose history is the session's
    messages up to and including ``messageId`` (404 ``message_not_found`` if it has no such message)."""
    from agentvm.sessions.fork import fork_session

    principal = admin(caller)
    result = await fork_session(
        runtime,
        principal.tenant_id,
        session_id,
        body.messageId,
        name=body.name,
        request_id=body.requestId,
    )
    if not result["created"]:
        response.status_code = 200
    return result


@router.put(
    "/sessions/{session_id}/title",
    response_model=Titled,
    responses={**ok(200, Titled, _TITLED, "the image, renamed"), **error_responses(400, 404)},
)
async def title_session(
    runtime: RuntimeDep, caller: Caller, body: Title, session_id: str = SESSION_ID
) -> dict[str, Any]:
    """Set the session's title: its image's ``name``, as ``image_list`` shows it."""
    from agentvm.turns.title import set_title

    principal = admin(caller)
    image = await set_title(runtime, principal.tenant_id, session_id, body.title)
    return {"record": image.to_wire()}


def _filename(session_id: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in session_id)[:128] or "session"


__all__ = ["router"]
