"""ResourceX compatibility: ``/v1/registry/*`` as Deepractice's AgentVM serves it, over the
resource centre (docs/resources.md, "ResourceX registry").

The routes and shapes are Deepractice AgentVM's (``resource``, ``resolve``, ``exists``, ``delete``,
``search``, ``link``), with the differences its own tests expect: deleting what is not there is a
404, and ``search`` reports the real ``total``. ``link`` by a folder on the server's disk is
refused (a Lambda has no user folders, and reading server paths is a hole): ``publish`` (and
``link``) take the content in the body instead, as Deepractice's first registry did. Locators in
both ResourceX grammars map onto resource URIs in the caller's tenant (``agentvm.resources.locator``);
errors have AgentVM's shape with stable codes (``invalid_locator``, ``not_found``, ...).

Reading needs any key of the tenant; publishing and deleting need the admin scope, as for
``/v1/resources``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok, stated
from agentvm.errors import BadRequest, InvalidLocator, InvalidResource, NotFound, UnsupportedUpload
from agentvm.resources.locator import (
    MAX_LOCATOR,
    TYPES,
    Locator,
    format_locator,
    manifest_parts,
    parse_locator,
    registry_type,
    type_of,
)
from agentvm.resources.uri import LATEST, TAG, is_version

if TYPE_CHECKING:
    from agentvm.ports import ResourceRegistry
    from agentvm.records import ResourceVersion
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

MAX_SEARCH_PAGE = 100
MAX_OFFSET = 10**9
MAX_TYPE = 64  # the longest type name or alias has 13 characters
MAX_FOLDER_PATH = 4096  # refused whatever it is (never read): bounded as a path
# Checked by parse_locator (invalid_locator) and the resource centre (invalid_resource): stated only.
LocatorText = Annotated[StrictStr, stated(minLength=1, maxLength=MAX_LOCATOR)]
TagName = Annotated[StrictStr, stated(maxLength=64, pattern=TAG.pattern)]
_LOCATOR = "deepractice.ai/prompts/assistant.prompt@1.0.0"


# Real answers of a test server, for the documented examples.
_PARTS = {
    "domain": "deepractice.ai",
    "name": "assistant",
    "path": "prompts",
    "type": "prompt",
    "version": "1.0.0",
}
_MANIFEST = {
    **_PARTS,
    "digest": "sha256:53263a55feee7292157372cfd5b69e35741ffa175076b195f659a45b0034e68e",
    "description": "The assistant's system prompt",
}
_ARGS_SCHEMA = {
    "type": "object",
    "properties": {"product": {"type": "string"}},
    "additionalProperties": False,
}
_RESOURCE = {"locator": _LOCATOR, "manifest": _MANIFEST, "schema": _ARGS_SCHEMA}
_RESOLVED = {
    "locator": _LOCATOR,
    "manifest": _MANIFEST,
    "content": "You are a helpful assistant for Acme.",
    "schema": _ARGS_SCHEMA,
}
_PUBLISHED = {
    "id": "resource://prompts/deepractice.ai/prompts/assistant@1.0.0",
    "uri": "resource://prompts/deepractice.ai/prompts/assistant@1.0.0",
    "locator": _LOCATOR,
    **_MANIFEST,
    "tags": ["stable"],
    "createdAt": 1795603943877,
    "updatedAt": 1795603943877,
}
_SEARCH = {"results": [{"locator": _LOCATOR, **_PARTS}], "total": 1, "limit": 20, "offset": 0}
_TYPES = {
    "types": [
        {
            "name": "prompt",
            "aliases": ["template", "system-prompt"],
            "description": "a prompt template; resolves to its text",
        },
        {"name": "json", "aliases": ["config", "manifest"], "description": "any JSON value; resolves to it"},
    ]
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Upload(_Body):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples(
            {
                "locator": _LOCATOR,
                "content": "You are a helpful assistant for {{product}}.",
                "description": "The assistant's system prompt",
                "tags": ["stable"],
            },
            {"locator": "localhost/settings:stable", "type": "json", "content": {"retries": 3}},
        ),
    )

    locator: LocatorText | None = Field(default=None, description="RXL name.type@version or RXI name:tag")
    content: Any = Field(
        default=None,
        description="a prompt, text or skill: the text; json: a JSON value (a string is JSON text); "
        "binary: base64; tool, sandbox, agent, knowledge: the spec",
    )
    type: StrictStr | None = Field(
        default=None, min_length=1, max_length=MAX_TYPE, description="the type, when the locator has none"
    )
    description: StrictStr | None = Field(default=None, max_length=2000)
    tags: list[TagName] = Field(default_factory=list, max_length=16)
    folderPath: StrictStr | None = Field(  # noqa: N815 (Deepractice's name)
        default=None,
        max_length=MAX_FOLDER_PATH,
        description="refused: folders on the server's disk are not read; send the content",
    )


class LocatorRef(_Body):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=examples({"locator": _LOCATOR}))

    locator: LocatorText


class Resolve(_Body):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples({"locator": _LOCATOR, "args": {"product": "Acme"}}),
    )

    locator: LocatorText
    args: dict[str, Any] = Field(default_factory=dict, description="a prompt's variables")


router = APIRouter(prefix="/registry", tags=["registry (ResourceX compatibility)"])


def centre(runtime: Runtime) -> ResourceRegistry:
    if runtime.resources is None:
        raise NotFound("this server has no resource centre")
    return runtime.resources


@router.get(
    "/types", response_model=None, responses=ok(200, "RegistryTypes", _TYPES, "the types (two shown)")
)
async def types() -> dict[str, Any]:
    """The types this registry stores, with their aliases."""
    return {
        "types": [{"name": t.name, "aliases": list(t.aliases), "description": t.description} for t in TYPES]
    }


@router.get(
    "/resource",
    response_model=None,
    responses={**ok(200, "RegistryResource", _RESOURCE, "the manifest"), **error_responses(400, 404)},
)
async def resource(
    runtime: RuntimeDep, caller: Caller, locator: str = Query(max_length=300)
) -> dict[str, Any]:
    """A resource's manifest (and the JSON Schema of a prompt's arguments)."""
    found = await find(centre(runtime), caller.tenant_id, parse_locator(locator))
    return {"locator": locator_of(found), "manifest": manifest(found), **schema_of(found)}


@router.post(
    "/resolve",
    response_model=None,
    responses={
        **ok(200, "RegistryResolved", _RESOLVED, "the manifest and the content"),
        **error_responses(400, 404),
    },
)
async def resolve(runtime: RuntimeDep, caller: Caller, body: Resolve) -> dict[str, Any]:
    """A resource's content: a prompt's text (rendered when ``args`` are given), a file's
    content, or the spec of one of AgentVM's own kinds."""
    found = await find(centre(runtime), caller.tenant_id, parse_locator(body.locator))
    return {
        "locator": locator_of(found),
        "manifest": manifest(found),
        "content": content_of(found, body.args),
        **schema_of(found),
    }


@router.get(
    "/exists",
    response_model=None,
    responses={**ok(200, "RegistryExists", {"exists": True}, "whether it resolves"), **error_responses(400)},
)
async def exists(runtime: RuntimeDep, caller: Caller, locator: str = Query(max_length=300)) -> dict[str, Any]:
    """Whether the locator resolves."""
    try:
        await find(centre(runtime), caller.tenant_id, parse_locator(locator))
    except NotFound:
        return {"exists": False}
    return {"exists": True}


@router.get(
    "/search",
    response_model=None,
    responses={**ok(200, "RegistrySearch", _SEARCH, "a page of matches"), **error_responses(400)},
)
async def search(
    runtime: RuntimeDep,
    caller: Caller,
    query: str = Query(default="", max_length=200, description="a substring of domain, path, name or type"),
    limit: int = Query(default=20, ge=1, le=MAX_SEARCH_PAGE),
    offset: int = Query(default=0, ge=0, le=MAX_OFFSET),
) -> dict[str, Any]:
    """The tenant's resources (and the platform's) whose domain, path, name or type holds
    ``query`` (case-insensitive); ``total`` counts every match."""
    needle = query.lower()
    rows = []
    for head, _platform in await centre(runtime).heads(caller.tenant_id):
        kind_type = type_of(head.kind, head.type)
        parts = manifest_parts(head.name)
        haystack = " ".join((parts["domain"], parts.get("path", ""), parts["name"], kind_type)).lower()
        if needle in haystack:
            locator = format_locator(head.name, kind_type, head.latest)
            rows.append({"locator": locator, **parts, "type": kind_type, "version": head.latest})
    return {
        "results": rows[offset : offset + limit],
        "total": len(rows),
        "limit": limit,
        "offset": offset,
    }


async def publish_upload(runtime: Runtime, caller: Principal, body: Upload) -> dict[str, Any]:
    principal = admin(caller)
    if body.folderPath is not None:
        raise UnsupportedUpload(
            "folderPath: this registry does not read folders on the server; send "
            '{"locator", "content"} (POST /v1/registry/publish)'
        )
    if body.locator is None:
        raise BadRequest("locator: required")
    if "content" not in body.model_fields_set:
        raise BadRequest("content: required")
    loc = parse_locator(body.locator)
    if loc.digest is not None:
        raise InvalidLocator("locator: the registry computes the digest; publish without @sha256:...")
    rtype = _upload_type(loc, body.type)
    tags = list(body.tags)
    if loc.selector != LATEST and not is_version(loc.selector):
        tags.append(loc.selector)  # name:stable publishes the next version and tags it
    published = await centre(runtime).publish(
        principal.tenant_id,
        rtype.kind,
        loc.resource_name,
        spec=_spec(rtype.name, rtype.kind, body.content),
        version=loc.selector if is_version(loc.selector) else None,
        description=body.description,
        tags=tags,
        by=principal.key_id,
    )
    return {
        "id": published.uri,
        "uri": published.uri,
        "locator": locator_of(published),
        **manifest(published),
        "tags": sorted(set(tags)),
        "createdAt": published.createdAt,
        "updatedAt": published.createdAt,
    }


_PUBLISH_RESPONSES = {
    **ok(201, "RegistryPublished", _PUBLISHED, "the published version"),
    **error_responses(400, 404, 409),
}


@router.post("/publish", status_code=201, response_model=None, responses=_PUBLISH_RESPONSES)
async def publish(runtime: RuntimeDep, caller: Caller, body: Upload) -> dict[str, Any]:
    """Publish a version by upload (versions are immutable: ``409 version_exists``; a tag in
    the locator, ``name:stable``, publishes the next version and moves the tag to it)."""
    return await publish_upload(runtime, caller, body)


@router.post("/link", status_code=201, response_model=None, responses=_PUBLISH_RESPONSES)
async def link(runtime: RuntimeDep, caller: Caller, body: Upload) -> dict[str, Any]:
    """Deepractice's ``link``, by upload: the same as ``publish``. A ``folderPath`` is refused
    with ``folder_path_unsupported``."""
    return await publish_upload(runtime, caller, body)


@router.post(
    "/delete",
    response_model=None,
    responses={**ok(200, "RegistryDeleted", {"deleted": True}, "deleted"), **error_responses(400, 404, 409)},
)
async def delete(runtime: RuntimeDep, caller: Caller, body: LocatorRef) -> dict[str, Any]:
    """Delete a version (a locator with a version or a digest; its tags go with it) or the whole
    resource (without one); ``404`` when there is nothing to delete, ``409 resource_in_use``
    while other resources or images need it."""
    tenant = admin(caller).tenant_id
    loc = parse_locator(body.locator)
    if loc.selector != LATEST and not is_version(loc.selector):
        raise InvalidLocator("locator: delete names a version (or none, for every version), not a tag")
    found = await find(centre(runtime), tenant, loc, own=True)
    version = found.version if (loc.digest is not None or loc.selector != LATEST) else None
    await centre(runtime).delete(tenant, found.kind, found.name, version, untag=True)
    return {"deleted": True}


async def find(
    centre: ResourceRegistry, tenant_id: str, loc: Locator, *, own: bool = False
) -> ResourceVersion:
    """The version a locator names, in the caller's tenant (or the platform's unless ``own``)."""
    hits: list[ResourceVersion] = []
    for kind in loc.kinds:
        try:
            version = await _version(centre, tenant_id, loc, kind)
        except NotFound:
            continue
        if own and version.tenantId != tenant_id:
            continue
        if loc.type is not None and type_of(version.kind, version.spec.get("type")) != loc.type:
            continue  # localhost/notes.json is not the text file localhost/notes
        hits.append(version)
    if not hits:
        raise NotFound(f"Resource not found: {_shown(loc)}")
    if len(hits) > 1:
        kinds = ", ".join(type_of(v.kind, v.spec.get("type")) for v in hits)
        raise InvalidLocator(
            f"{_shown(loc)} names more than one resource ({kinds}): add the type, name.<type>"
        )
    return hits[0]


async def _version(centre: ResourceRegistry, tenant_id: str, loc: Locator, kind: str) -> ResourceVersion:
    found = await centre.get_version(tenant_id, loc.ref(kind))
    if loc.digest is None or found.digest == loc.digest:
        return found
    if loc.selector == LATEST:  # name@sha256:...: whichever version has that content, newest first
        _head, versions = await centre.get_head(tenant_id, kind, loc.resource_name)
        for v in reversed(versions):
            if v.digest == loc.digest:
                return v
    raise NotFound(f"Resource not found: {_shown(loc)}")


def _shown(loc: Locator) -> str:
    return loc.raw


def _upload_type(loc: Locator, given: str | None) -> Any:
    if given is None and loc.type is None:
        raise BadRequest(
            "type: required when the locator has none (name.<type>@<version>, or the type field)"
        )
    rtype = registry_type(given or loc.type or "")
    if loc.type is not None and rtype.name != loc.type:
        raise BadRequest(f"type: {given!r} contradicts the locator's type {loc.type!r}")
    return rtype


def _spec(type_name: str, kind: str, content: Any) -> dict[str, Any]:
    """The resource spec an upload's content becomes."""
    from agentvm.resources.kinds import PLACEHOLDER

    if kind == "prompt":
        if not isinstance(content, str):
            raise InvalidResource("content: a prompt is its text")
        variables = dict.fromkeys(PLACEHOLDER.findall(content))  # each {{name}}, an optional string
        return {
            "template": content,
            "variables": {v: {"type": "string", "required": False} for v in variables},
        }
    if kind == "file":
        if type_name == "json" and isinstance(content, str):
            try:
                content = json.loads(content)  # a json file's text; a JSON string value is "\"...\""
            except ValueError:
                raise InvalidResource("content: not JSON text (send a JSON value, or its text)") from None
        return {"type": type_name, "content": content}
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            raise InvalidResource(f"content: a {type_name} is a JSON spec (docs/resources.md)") from None
    return content


def locator_of(v: ResourceVersion) -> str:
    return format_locator(v.name, type_of(v.kind, v.spec.get("type")), v.version)


def manifest(v: ResourceVersion) -> dict[str, Any]:
    out: dict[str, Any] = {
        **manifest_parts(v.name),
        "type": type_of(v.kind, v.spec.get("type")),
        "version": v.version,
        "digest": f"sha256:{v.digest}",
    }
    if v.description is not None:
        out["description"] = v.description
    return out


def schema_of(v: ResourceVersion) -> dict[str, Any]:
    """``{"schema": <JSON Schema of a prompt's arguments>}``, or nothing (Deepractice leaves it
    undefined for types that take no arguments)."""
    if v.kind != "prompt" or not v.spec.get("variables"):
        return {}
    names = {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean"}
    properties: dict[str, Any] = {}
    for name, var in v.spec["variables"].items():
        prop: dict[str, Any] = {"type": names[var.get("type", "string")]}
        for key in ("description", "default"):
            if var.get(key) is not None:
                prop[key] = var[key]
        properties[name] = prop
    required = [
        n for n, var in v.spec["variables"].items() if var.get("required", True) and "default" not in var
    ]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return {"schema": schema}


def content_of(v: ResourceVersion, args: dict[str, Any]) -> Any:
    if v.kind == "prompt":
        from agentvm.resources.kinds import render

        return render(v.spec, args) if args else v.spec["template"]
    if args:
        raise InvalidResource(f"args: a {type_of(v.kind, v.spec.get('type'))} takes no arguments")
    return v.spec["content"] if v.kind == "file" else v.spec


__all__ = ["router"]
