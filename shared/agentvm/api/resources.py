"""The resource centre over HTTP: ``/v1/resources`` (``agentvm.resources``).

Reading (discover, get, resolve, render) needs any key of the tenant; publishing, tagging and
deleting need the admin scope. A name may hold ``/``; ``@<version>`` (or a tag, or ``latest``)
after it selects a version, as in the resource's URI: ``GET /v1/resources/prompts/greeting@2``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok, stated
from agentvm.errors import BadRequest, NotFound
from agentvm.resources.centre import MAX_PAGE, head_wire, version_wire
from agentvm.resources.uri import KIND_OF, KINDS, LATEST, MAX_NAME, NAME, TAG, ResourceRef, parse

if TYPE_CHECKING:
    from agentvm.ports import ResourceRegistry
    from agentvm.runtime import Runtime

_PROMPT_EXAMPLE = {
    "kind": "prompt",
    "name": "support/greeting",
    "description": "How the support agent greets",
    "spec": {
        "template": "You help {{product}} users. Be brief.",
        "variables": {"product": {"type": "string"}},
    },
    "tags": ["stable"],
}


# Real answers of a test server, for the documented examples.
_VERSION_1 = {
    "uri": "resource://prompts/support/greeting@1",
    "kind": "prompt",
    "name": "support/greeting",
    "version": "1",
    "description": "How the support agent greets",
    "spec": {
        "template": "You help {{product}} users. Be brief.",
        "variables": {"product": {"type": "string", "required": True}},
    },
    "dependencies": [],
    "digest": "128602beab104f2b87ca51a15a953055ef8d9f017a86f3c7cc9fc1d06993b56f",
    "createdAt": 1795603943836,
}
_VERSION_2 = {
    **_VERSION_1,
    "uri": "resource://prompts/support/greeting@2",
    "version": "2",
    "description": "Kinder",
    "spec": {
        "template": "You help {{product}} users. Be kind.",
        "variables": {"product": {"type": "string", "required": True}},
    },
    "digest": "6f76eb6b0d91a5e547dd0de258066d511fb1a2dc2edf7074a81d45abe0d75de3",
    "createdAt": 1795603943839,
}
_HEAD = {
    "uri": "resource://prompts/support/greeting",
    "kind": "prompt",
    "name": "support/greeting",
    "latest": "2",
    "versions": 2,
    "tags": {"stable": "2"},
    "description": "Kinder",
    "updatedAt": 1795603943840,
    "platform": False,
}
_AGENT = {
    "uri": "resource://agents/support@1",
    "kind": "agent",
    "name": "support",
    "version": "1",
    "description": "Answers support questions",
    "spec": {
        "prompt": {"uri": "resource://prompts/support/greeting@stable", "arguments": {"product": "Acme"}},
        "model": "anthropic/claude-haiku-4-5",
        "tools": ["resource://tools/calc@1"],
        "knowledge": ["resource://knowledge/handbook@1"],
    },
    "dependencies": [
        "resource://prompts/support/greeting@stable",
        "resource://tools/calc@1",
        "resource://knowledge/handbook@1",
    ],
    "digest": "80da17217fc6d0d70852d665f4f43c7a4071ffd2b0bbf4f739ae583fceb97a4d",
    "createdAt": 1795603943852,
}
_TOOL: dict[str, Any] = {
    "uri": "resource://tools/calc@1",
    "kind": "tool",
    "name": "calc",
    "version": "1",
    "description": None,
    "spec": {"tool": {"type": "builtin", "name": "calculator"}},
    "dependencies": [],
    "digest": "46d2283b44370f6179cb5799f44da6fd0d7f7f6de356df525dfbfffba180ad58",
    "createdAt": 1795603943850,
}
_HANDBOOK: dict[str, Any] = {
    "uri": "resource://knowledge/handbook@1",
    "kind": "knowledge",
    "name": "handbook",
    "version": "1",
    "description": None,
    "spec": {
        "documents": [
            {"id": "refunds", "title": "Refunds", "text": "Refunds are paid within 14 days of a return."},
            {"id": "shipping", "title": "Shipping", "text": "Orders ship in 2 days."},
        ]
    },
    "dependencies": [],
    "digest": "51778a4886dc60f23c189b91f228ef4062b98d97c0d5cb729a6ef32bce70c36e",
    "createdAt": 1795603943847,
    "chunks": 2,
}
_RESOLVED = {
    "resource": _AGENT,
    "dependencies": {
        "resource://prompts/support/greeting@stable": _VERSION_2,
        "resource://tools/calc@1": _TOOL,
        "resource://knowledge/handbook@1": _HANDBOOK,
    },
}
_SUMMARY = ("version", "description", "digest", "createdAt")
_WITH_VERSIONS = {
    "resource": _HEAD,
    "versions": [{k: v[k] for k in _SUMMARY} for v in (_VERSION_1, _VERSION_2)],
}
_HITS = {
    "uri": "resource://knowledge/handbook@1",
    "mode": "words",
    "hits": [
        {
            "documentId": "refunds",
            "title": "Refunds",
            "headingPath": "",
            "location": "",
            "chunk": 0,
            "score": 1.2e-05,
            "citation": "[refunds]",
            "text": "Refunds are paid within 14 days of a return.",
        }
    ],
}


# Bounds the resource centre checks itself (invalid_resource, not_found): stated, not checked again.
KindName = Annotated[StrictStr, stated(enum=list(KINDS))]
ResourceName = Annotated[StrictStr, stated(maxLength=MAX_NAME, pattern=NAME.pattern)]
TagName = Annotated[StrictStr, stated(maxLength=64, pattern=TAG.pattern)]  # not "latest", not a version
# Bounds nothing else checks: a version is an integer of at most 9 digits or a semantic version (of
# any length, so bounded here); a URI or a name with its @selector: the name's 200 and a selector.
MAX_VERSION = 64
MAX_URI = 300
MAX_OFFSET = 10**9  # a page cursor: an offset into the matches
PLURAL = Path(json_schema_extra={"enum": list(KIND_OF)})  # another: 404 (unknown kind)
NAME_AT_SELECTOR = Path(min_length=1, max_length=MAX_URI, description="a name, @<version|tag|latest>")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewVersion(_Body):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples(
            {
                "description": "Kinder",
                "spec": {
                    "template": "You help {{product}} users. Be kind.",
                    "variables": {"product": {"type": "string"}},
                },
            },
            {"version": "1.1.0", "spec": {"template": "Hello!"}, "tags": ["stable"]},
        ),
    )

    version: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_VERSION,
        description="an integer or semver; default: the next integer",
    )
    description: StrictStr | None = Field(default=None, max_length=2000)
    spec: dict[str, Any] = Field(description="what the kind holds (docs/resources.md)")
    tags: list[TagName] = Field(default_factory=list, max_length=16, description="tags moved to this version")


class Publish(NewVersion):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=examples(_PROMPT_EXAMPLE))

    kind: KindName = Field(description="prompt, tool, sandbox, agent or knowledge")
    name: ResourceName


class Render(_Body):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples(
            {"uri": "resource://prompts/support/greeting@stable", "arguments": {"product": "Acme"}}
        ),
    )

    uri: StrictStr = Field(min_length=1, max_length=MAX_URI)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Search(_Body):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples(
            {"uri": "resource://knowledge/handbook@1", "query": "refund policy", "limit": 3}
        ),
    )

    uri: StrictStr = Field(min_length=1, max_length=MAX_URI, description="a knowledge resource")
    query: StrictStr = Field(min_length=1, max_length=1000)
    limit: int = Field(default=5, ge=1, le=10)


class Tag(_Body):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples({"uri": "resource://prompts/support/greeting@1", "tag": "stable"}),
    )

    uri: StrictStr = Field(
        min_length=1, max_length=MAX_URI, description="a version: resource://prompts/greeting@2"
    )
    tag: TagName


router = APIRouter(prefix="/resources", tags=["resources"])


def centre(runtime: Runtime) -> ResourceRegistry:
    if runtime.resources is None:
        raise NotFound("this server has no resource centre")
    return runtime.resources


def _kind(plural: str) -> str:
    kind = KIND_OF.get(plural)
    if kind is None:
        raise NotFound(f"unknown kind {plural!r} (one of {', '.join(KIND_OF)})")
    return kind


@router.post(
    "",
    status_code=201,
    response_model=None,
    responses={
        **ok(201, "OneVersion", {"resource": _AGENT}, "the new version"),
        **error_responses(400, 404, 409),
    },
)
async def publish(runtime: RuntimeDep, caller: Caller, body: Publish) -> dict[str, Any]:
    """Publish a resource's first or next version (versions are immutable)."""
    principal = admin(caller)
    published = await centre(runtime).publish(
        principal.tenant_id,
        body.kind,
        body.name,
        spec=body.spec,
        version=body.version,
        description=body.description,
        tags=body.tags,
        by=principal.key_id,
    )
    return {"resource": version_wire(published)}


@router.get(
    "",
    response_model=None,
    responses={
        **ok(200, "ResourcePage", {"resources": [_HEAD], "next": None}, "a page"),
        **error_responses(400),
    },
)
async def discover(
    runtime: RuntimeDep,
    caller: Caller,
    kind: Annotated[str, stated(enum=list(KINDS))] | None = Query(default=None),
    prefix: str | None = Query(default=None, max_length=200),
    tag: str | None = Query(default=None, max_length=64),
    q: str | None = Query(default=None, max_length=200, description="free text: name and description"),
    limit: int = Query(default=20, ge=1, le=MAX_PAGE),
    cursor: int = Query(default=0, ge=0, le=MAX_OFFSET),
) -> dict[str, Any]:
    """The tenant's resources (and the platform's), filtered; ``next`` pages on."""
    page, more = await centre(runtime).discover(
        caller.tenant_id, kind=kind, prefix=prefix, tag=tag, text=q, limit=limit, cursor=cursor
    )
    return {"resources": page, "next": more}


@router.get(
    "/resolve",
    response_model=None,
    responses={
        **ok(200, "ResolvedResource", _RESOLVED, "the resource and its closure"),
        **error_responses(400, 404),
    },
)
async def resolve(runtime: RuntimeDep, caller: Caller, uri: str = Query(max_length=300)) -> dict[str, Any]:
    """The resource and its dependency closure, each pinned to the exact version it resolves to now."""
    resolved = await centre(runtime).resolve(caller.tenant_id, parse(uri))
    return resolved.to_wire()


@router.post(
    "/render",
    response_model=None,
    responses={
        **ok(
            200,
            "Rendered",
            {"uri": "resource://prompts/support/greeting@2", "text": "You help Acme users. Be kind."},
            "the rendered text",
        ),
        **error_responses(400, 404),
    },
)
async def render_prompt(runtime: RuntimeDep, caller: Caller, body: Render) -> dict[str, Any]:
    """A prompt's template filled with checked arguments."""
    from agentvm.resources.kinds import render

    found = await centre(runtime).get_version(caller.tenant_id, parse(body.uri, kind="prompt"))
    return {"uri": found.uri, "text": render(found.spec, body.arguments)}


@router.post(
    "/search",
    response_model=None,
    responses={**ok(200, "SearchHits", _HITS, "the best passages"), **error_responses(400, 404)},
)
async def search(runtime: RuntimeDep, caller: Caller, body: Search) -> dict[str, Any]:
    """The best passages of a knowledge resource for a query: what an agent's ``search_<name>``
    tool answers. ``mode``: ``hybrid`` (words and vectors fused), ``words`` (full text only) or
    ``bm25`` (a host without a knowledge index)."""
    registry = centre(runtime)
    version = await registry.get_version(caller.tenant_id, parse(body.uri, kind="knowledge"))
    hits, mode = await registry.search_in(version, body.query, body.limit)
    return {"uri": version.uri, "mode": mode, "hits": [h.to_wire() for h in hits]}


@router.post(
    "/tags",
    response_model=None,
    responses={
        **ok(200, "OneHead", {"resource": {**_HEAD, "tags": {"stable": "1"}}}, "the resource"),
        **error_responses(400, 404),
    },
)
async def move_tag(runtime: RuntimeDep, caller: Caller, body: Tag) -> dict[str, Any]:
    """Point a tag at a version (tags are movable; versions are not)."""
    principal = admin(caller)
    ref = parse(body.uri)
    if not ref.pinned:
        raise BadRequest(f"{body.uri}: name the version the tag points at (…@<version>)")
    head = await centre(runtime).tag(principal.tenant_id, ref.kind, ref.name, ref.selector, body.tag)
    return {"resource": head_wire(head)}


@router.get(
    "/{plural}/{name:path}",
    response_model=None,
    responses={
        **ok(
            200,
            "ResourceOrVersion",
            _WITH_VERSIONS,
            "the resource and its versions; with @<version|tag|latest>: that version",
            more={"one version (…@stable)": {"resource": _VERSION_2}},
        ),
        **error_responses(400, 404),
    },
)
async def get(
    runtime: RuntimeDep, caller: Caller, plural: str = PLURAL, name: str = NAME_AT_SELECTOR
) -> dict[str, Any]:
    """A resource by name (its versions and tags), or one version with ``@<version|tag|latest>``."""
    kind, tenant = _kind(plural), caller.tenant_id
    base, at, selector = name.partition("@")
    if at:
        found = await centre(runtime).get_version(tenant, parse(f"resource://{plural}/{name}"))
        return {"resource": version_wire(found)}
    head, versions = await centre(runtime).get_head(tenant, kind, base)
    return {
        "resource": head_wire(head, platform=head.tenantId != tenant),
        "versions": [
            {
                "version": v.version,
                "description": v.description,
                "digest": v.digest,
                "createdAt": v.createdAt,
            }
            for v in versions
        ],
    }


@router.put(
    "/{plural}/{name:path}",
    status_code=201,
    response_model=None,
    responses={
        **ok(201, "OneVersion", {"resource": _VERSION_2}, "the new version"),
        **error_responses(400, 404, 409),
    },
)
async def publish_next(
    runtime: RuntimeDep, caller: Caller, body: NewVersion, plural: str = PLURAL, name: str = NAME_AT_SELECTOR
) -> dict[str, Any]:
    """Publish the next version of a resource (a new immutable version; the old ones stay)."""
    principal = admin(caller)
    if "@" in name:
        raise BadRequest("publish to the resource's name; give the version in the body")
    published = await centre(runtime).publish(
        principal.tenant_id,
        _kind(plural),
        name,
        spec=body.spec,
        version=body.version,
        description=body.description,
        tags=body.tags,
        by=principal.key_id,
    )
    return {"resource": version_wire(published)}


@router.delete(
    "/{plural}/{name:path}",
    response_model=None,
    responses={
        **ok(
            200,
            "DeletedVersions",
            {"deleted": ["resource://prompts/support/greeting@2"]},
            "what was deleted",
        ),
        **error_responses(400, 404, 409),
    },
)
async def delete(
    runtime: RuntimeDep, caller: Caller, plural: str = PLURAL, name: str = NAME_AT_SELECTOR
) -> dict[str, Any]:
    """Delete one version (``@<version>``) or every version; refused while others depend on it."""
    principal = admin(caller)
    kind = _kind(plural)
    base, at, selector = name.partition("@")
    if at and (selector == LATEST or not ResourceRef(kind, base, selector).pinned):
        raise BadRequest("delete names a version (…@<version>), not a tag or latest")
    parse(f"resource://{plural}/{base}")  # a valid name, or a clear error
    deleted = await centre(runtime).delete(principal.tenant_id, kind, base, selector if at else None)
    return {"deleted": deleted}


__all__ = ["router"]
