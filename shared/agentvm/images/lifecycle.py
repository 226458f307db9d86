"""An image's lifecycle: create (inline, or built from an agent resource: ``images.built``),
update (rebuilding a built one), delete.

Plain use cases of ``(rt, tenant_id, …)``: the WebSocket commands and the HTTP routes parse and
render around them. ``admin``: the caller may do what needs the admin scope (declaring stdio MCP
servers); ``by``: the caller's API key (None: the open dev mode), recorded in builds; ``notices``:
frames for the caller only, sent before its answer (``container_created``, ``agent_unregistered``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.errors import BadRequest
from agentvm.images.agents import stop_agent
from agentvm.images.built import create_built, rebuild
from agentvm.images.config import check_tool_sources, context_diet_policy, reply_cache_policy, tool_decls
from agentvm.images.containers import ensure_container
from agentvm.images.lookup import image_of
from agentvm.images.quota import create_counted, give_back_deleted, put_counted
from agentvm.records import DEFAULT_IMAGE_NAME, ImageRecord, SessionRecord

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.images.config import ImageConfig
    from agentvm.runtime import Runtime


async def create(
    rt: Runtime,
    tenant_id: str,
    container_id: str,
    config: ImageConfig,
    *,
    admin: bool,
    by: str | None,
    notices: list[Json],
) -> ImageRecord:
    """A new image (and its session) in the container, made on first use."""
    if config.rebuild is not None:
        raise BadRequest("config.rebuild: only image_update rebuilds an image")
    if config.agent is not None:
        return await create_built(rt, tenant_id, container_id, config, admin=admin, by=by, notices=notices)
    await ensure_container(rt, tenant_id, container_id, notices=notices)
    now = rt.clock.now_ms()
    image = ImageRecord(
        tenantId=tenant_id,
        imageId=rt.ids.new("img"),
        containerId=container_id,
        sessionId=rt.ids.new("sess"),
        name=config.name or DEFAULT_IMAGE_NAME,
        description=config.description,
        systemPrompt=config.systemPrompt,
        model=config.model,
        mcpServers=config.mcpServers,
        tools=tool_decls(config.tools),
        maxSteps=config.maxSteps,
        promptCaching=config.promptCaching,
        approval=config.approval.model_dump() if config.approval is not None else None,
        concurrency=config.concurrency or "queue",
        cadence=config.cadence,
        sideModel=config.sideModel,
        fastModel=config.fastModel,
        fastMaxChars=config.fastMaxChars,
        replyCache=reply_cache_policy(config),
        contextDiet=context_diet_policy(config),
        customData=config.customData,
        createdAt=now,
        updatedAt=now,
    )
    if image.model:
        rt.models.resolve(image.model)  # reject an unknown provider now, not at the first turn
    for ref in (image.sideModel, image.fastModel):
        if ref:
            rt.models.resolve(ref)
    check_tool_sources(rt, image.mcpServers, admin=admin)
    session = SessionRecord(
        tenantId=tenant_id,
        sessionId=image.sessionId,
        imageId=image.imageId,
        containerId=image.containerId,
        createdAt=now,
        updatedAt=now,
    )
    await create_counted(rt, tenant_id, image, session)
    return image


async def update(
    rt: Runtime, tenant_id: str, image_id: str, updates: ImageConfig, *, admin: bool, by: str | None
) -> ImageRecord:
    """Change the image's config (the fields given), or rebuild it (``updates.rebuild``, or
    ``updates.agent``: another definition) with its name, description and concurrency changed."""
    from agentvm.resources.build import BUILT_FIELDS

    image = await image_of(rt, tenant_id, image_id)
    changes: dict[str, Any] = updates.model_dump(exclude_unset=True, exclude_none=True)
    again, agent = changes.pop("rebuild", False), changes.pop("agent", None)
    built = [k for k in BUILT_FIELDS if k in changes]
    if built and (again or agent or image.build):
        raise BadRequest(
            f"updates.{built[0]}: this image is built from an agent resource; publish a new version "
            "of the agent and rebuild (updates.rebuild), or give updates.agent"
        )
    if again or agent:
        image = await rebuild(rt, tenant_id, image, agent, admin=admin, by=by)
        if changes:  # name, description, concurrency
            changed = image.model_copy(update={**changes, "updatedAt": rt.clock.now_ms()})
            await put_counted(rt, tenant_id, image, changed)
            image = changed
        return image
    if "model" in changes:
        rt.models.resolve(changes["model"])
    for field in ("sideModel", "fastModel"):
        if changes.get(field):
            rt.models.resolve(changes[field])
    if "tools" in changes:
        changes["tools"] = tool_decls(updates.tools)
    if "replyCache" in changes:  # whole, defaults included (a dump of what was set leaves them out)
        changes["replyCache"] = reply_cache_policy(updates)
    if "contextDiet" in changes:
        changes["contextDiet"] = context_diet_policy(updates)
    check_tool_sources(rt, changes.get("mcpServers"), admin=admin)
    changed = image.model_copy(update={**changes, "updatedAt": rt.clock.now_ms()})
    await put_counted(rt, tenant_id, image, changed)
    return changed


async def delete(rt: Runtime, tenant_id: str, image_id: str, *, notices: list[Json]) -> ImageRecord:
    """Stop the image's agent and delete the image; returns what was deleted."""
    image = await image_of(rt, tenant_id, image_id)
    await stop_agent(rt, image, notices=notices)
    await rt.store.delete_image(tenant_id, image.imageId)
    await give_back_deleted(rt, tenant_id, image)  # its config; its session's messages stay counted
    if image.build is not None and rt.resources is not None:  # its pins no longer hold versions
        from agentvm.resources.build import move_edges

        await move_edges(rt.resources, image.model_copy(update={"build": None}), image.build)
    return image


__all__ = ["create", "delete", "update"]
