"""Import a session export into a container: ``POST /v1/containers/{containerId}/sessions/import``.

The export is read and checked whole before anything is written (``sessions.jsonl``); then the
image, its session and every message are written at once under a ledger claim keyed by the
export id and the container (``sessions.writer``): importing the same export into the same
container again returns the first import (``created: false``), into another container makes a
new image. New ids for the image, the session and every message; the history is otherwise as it
was (order, roles, content, timestamps, tool calls and results), and so is the compaction summary.

**The image's config is imported as a snapshot, inline.** The export's config (the fields a build
resolved, for a built image) becomes the new image's own config, checked as ``image_create``
checks an inline config (a model whose provider this server lacks, a stdio MCP server on AWS:
``invalid_import``). The build record is not kept: the imported image is pinned to no resource
version and holds none against deletion. One kind of tool still reads a resource at run time,
the search tool of a knowledge resource; it is kept only if the importing tenant can read that
exact version (its own, or a platform resource), else the import is refused with
``resource_unavailable`` (publish the knowledge in this tenant and build an agent on it instead).

Memory lines (the exporting container's agent memory, docs/memory.md) go into the importing
container's memory, each keyed on the export and its old id (imported once however often the export
is); a memory that fills up refuses the rest with ``memory_full`` after the session was written.

Usage lines are carried for the record and not imported: usage is what the exporting tenant was
billed for. Size: the body is at most ``AVM_MAX_BODY_BYTES`` (``payload_too_large``, 413).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentvm.agent.memory import clean_text, clean_topic, memory_of
from agentvm.errors import AgentVMError, BadRequest, InvalidImport, ResourceUnavailable
from agentvm.ports import MEMORY_SOURCES, container_scope
from agentvm.records import DEFAULT_IMAGE_NAME, ImageRecord, SessionSummary
from agentvm.sessions.jsonl import read_export
from agentvm.sessions.writer import archive_of, fresh_copies, write_session

if TYPE_CHECKING:
    from agentvm.runtime import Runtime
    from agentvm.sessions.jsonl import SessionExport


async def import_session(rt: Runtime, tenant_id: str, container_id: str, body: bytes) -> dict[str, Any]:
    archive_of(rt)  # no session centre: refused before reading the body
    export = read_export(body)
    for m in export.memory:  # checked before anything is written
        try:
            clean_text(m["text"]), clean_topic(m.get("topic"))
        except BadRequest as exc:
            raise InvalidImport(f"memory {m['id']!r}: {exc.message}") from None
    fields = await _config(rt, tenant_id, export)
    messages = fresh_copies(export.messages, rt.ids)
    summary = None
    if export.summary is not None:
        s = export.summary
        summary = SessionSummary(
            sessionId="",
            upToSeq=s["upToSeq"],
            text=s["text"],
            model=s["model"],
            messages=s["messages"] if isinstance(s.get("messages"), int) else s["upToSeq"],
            createdAt=rt.clock.now_ms(),
        )

    def make_image(image_id: str, session_id: str, now: int) -> ImageRecord:
        return ImageRecord(
            tenantId=tenant_id,
            imageId=image_id,
            containerId=container_id,
            sessionId=session_id,
            createdAt=now,
            updatedAt=now,
            **fields,
        )

    image, created = await write_session(
        rt,
        tenant_id=tenant_id,
        container_id=container_id,
        key=f"import:{export.export_id}:{container_id}",
        make_image=make_image,
        messages=messages,
        summary=summary,
        source={"exportId": export.export_id, **export.source, **_built(export)},
    )
    await _import_memory(rt, tenant_id, container_id, export)
    return {
        "created": created,
        "exportId": export.export_id,
        "messages": len(export.messages),
        "record": image.to_wire(),
    }


async def _import_memory(rt: Runtime, tenant_id: str, container_id: str, export: SessionExport) -> None:
    """The export's memory items, into the container's memory: each keyed on the export and its old
    id, so importing one export twice stores them once (a full memory refuses the rest)."""
    memory = memory_of(rt)
    if memory is None or not export.memory:
        return
    scope = container_scope(container_id)
    for m in export.memory:
        source = str(m["source"]) if m.get("source") in MEMORY_SOURCES else "api"
        origin = f"import:{export.export_id}:{m['id']}"
        await memory.remember(tenant_id, scope, m["text"], topic=m.get("topic"), source=source, origin=origin)


def _built(export: SessionExport) -> dict[str, Any]:
    agent = (export.build or {}).get("agent")
    return {"builtFrom": agent} if isinstance(agent, str) else {}


async def _config(rt: Runtime, tenant_id: str, export: SessionExport) -> dict[str, Any]:
    """The image fields of the export's config, checked as an inline ``image_create`` config."""
    from agentvm.agent.tools.declarations import parse_mcp_servers
    from agentvm.images.config import ImageConfig
    from agentvm.resources.knowledge_tool import KnowledgeToolDecl

    line = export.image_line
    raw = dict(export.config)
    tools = raw.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise InvalidImport("config.tools: must be a list", line=line)
    positions = [i for i, t in enumerate(tools or []) if isinstance(t, dict) and t.get("type") == "knowledge"]
    inline = [t for i, t in enumerate(tools or []) if i not in positions]
    for key in ("agent", "rebuild"):
        if raw.pop(key, None) is not None:
            raise InvalidImport(
                f"config.{key}: an export carries the built config, not a definition", line=line
            )
    try:
        config = ImageConfig.model_validate({**raw, "tools": inline if tools is not None else None})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = list(err["loc"])
        if loc[:1] == ["tools"] and len(loc) > 1 and isinstance(loc[1], int):  # its index in the export
            loc[1] = [i for i in range(len(tools or [])) if i not in positions][loc[1]]
        where = ".".join(str(p) for p in loc)
        raise InvalidImport(f"config.{where}: {err['msg']}", line=line) from None
    if config.model:
        try:
            rt.models.resolve(config.model)
        except AgentVMError as exc:
            raise InvalidImport(f"config.model: {exc.message}", line=line) from None
    if config.mcpServers:
        allow_stdio = rt.tools.allow_stdio if rt.tools is not None else True
        try:
            parse_mcp_servers(config.mcpServers, allow_stdio=allow_stdio)
        except ValueError as exc:
            raise InvalidImport(f"config.mcpServers.{exc}", line=line) from None

    declared: list[dict[str, Any]] | None = None
    if tools is not None:
        checked = iter(decl.model_dump(exclude_none=True) for decl in config.tools or [])
        declared = []
        for i, raw_tool in enumerate(tools):
            if i not in positions:
                declared.append(next(checked))
                continue
            try:
                decl = KnowledgeToolDecl.model_validate(raw_tool)
            except ValidationError as exc:
                raise InvalidImport(f"config.tools.{i}: {exc.errors()[0]['msg']}", line=line) from None
            await _readable(rt, tenant_id, decl, i, line)
            declared.append(decl.model_dump())
    return {
        "name": config.name or DEFAULT_IMAGE_NAME,
        "description": config.description,
        "systemPrompt": config.systemPrompt,
        "model": config.model,
        "mcpServers": config.mcpServers,
        "tools": declared,
        "maxSteps": config.maxSteps,
        "promptCaching": config.promptCaching,
        "approval": config.approval.model_dump() if config.approval is not None else None,
        "concurrency": config.concurrency or "queue",
        "cadence": config.cadence,
        "sideModel": config.sideModel,
        "fastModel": config.fastModel,
        "fastMaxChars": config.fastMaxChars,
        "replyCache": None if config.replyCache is None else config.replyCache.model_dump(),
        "contextDiet": None if config.contextDiet is None else config.contextDiet.model_dump(),
        "customData": config.customData,
    }


async def _readable(rt: Runtime, tenant_id: str, decl: Any, index: int, line: int) -> None:
    """A knowledge tool may stay only if this tenant can read its exact version."""
    found = None
    if rt.resources is not None and decl.owner in (tenant_id, rt.platform_tenant):
        found = await rt.resources.store.get_version(decl.owner, "knowledge", decl.resource, decl.version)
    if found is None:
        raise ResourceUnavailable(
            f"config.tools.{index}: the knowledge resource {decl.resource}@{decl.version} is not readable "
            "by this tenant; publish it here and build an agent on it, or remove the tool from the export",
            line=line,
        )


__all__ = ["import_session"]
