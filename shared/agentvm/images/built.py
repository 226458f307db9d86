"""Images built from an agent resource (``agentvm.resources.build``): created from a definition
resolved now, and rebuilt (resolved again, or moved to another definition; recorded in the image's
build history). A built image's fields are the definition's; it holds the versions it is pinned to
against deletion (``move_edges``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.errors import BadRequest
from agentvm.images.config import check_built, context_diet_policy, reply_cache_policy
from agentvm.images.containers import ensure_container
from agentvm.images.quota import create_counted, put_counted
from agentvm.records import DEFAULT_IMAGE_NAME, ImageRecord, SessionRecord

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.images.config import ImageConfig
    from agentvm.ports import ResourceRegistry
    from agentvm.runtime import Runtime


async def create_built(
    rt: Runtime,
    tenant_id: str,
    container_id: str,
    config: ImageConfig,
    *,
    admin: bool,
    by: str | None,
    notices: list[Json],
) -> ImageRecord:
    """An image built from an agent resource (``config.agent``): its fields are the definition's,
    resolved now. ``by``: the caller's API key, recorded in the build."""
    from agentvm.resources.build import BUILT_FIELDS, build_into, move_edges

    inline = [k for k in BUILT_FIELDS if getattr(config, k) is not None]
    if inline:
        raise BadRequest(
            f"config.{inline[0]}: an image built from config.agent takes it from the definition "
            "(publish a new version of the agent instead)"
        )
    centre = _centre(rt)
    now = rt.clock.now_ms()
    image = ImageRecord(
        tenantId=tenant_id,
        imageId=rt.ids.new("img"),
        containerId=container_id,
        sessionId=rt.ids.new("sess"),
        name=config.name or DEFAULT_IMAGE_NAME,
        description=config.description,
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
    assert config.agent is not None
    image, build = await build_into(centre, image, config.agent, now_ms=now, by=by)
    if config.name is None:
        image.name = build.agent.name
    if config.description is None:
        image.description = build.agent.description
    check_built(rt, image, admin=admin)
    await ensure_container(rt, tenant_id, container_id, notices=notices)
    session = SessionRecord(
        tenantId=tenant_id,
        sessionId=image.sessionId,
        imageId=image.imageId,
        containerId=image.containerId,
        createdAt=now,
        updatedAt=now,
    )
    await create_counted(rt, tenant_id, image, session)
    await move_edges(centre, image, None)
    return image


async def rebuild(
    rt: Runtime, tenant_id: str, image: ImageRecord, agent: str | None = None, *, admin: bool, by: str | None
) -> ImageRecord:
    """Resolve the image's definition again (or ``agent``, a new one) and move it there (recorded)."""
    from agentvm.resources.build import build_into, move_edges

    written = agent or (image.build or {}).get("agent")
    if written is None:
        raise BadRequest(
            "updates.rebuild: this image was not built from an agent resource (give updates.agent)"
        )
    before = image.build
    previous = image.model_copy()
    image, _ = await build_into(_centre(rt), image, written, now_ms=rt.clock.now_ms(), by=by)
    check_built(rt, image, admin=admin)
    await put_counted(rt, tenant_id, previous, image)
    await move_edges(_centre(rt), image, before)
    return image


def _centre(rt: Runtime) -> ResourceRegistry:
    if rt.resources is None:
        raise BadRequest("config.agent: this server has no resource centre")
    return rt.resources


__all__ = ["create_built", "rebuild"]
