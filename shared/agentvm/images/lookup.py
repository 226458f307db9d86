"""Finding a tenant's image: by its id, by its running agent, or by whichever of the two a request
gives. Every lookup is scoped by the caller's tenant: another tenant's ids read exactly like ids
that do not exist (``NotFound``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.errors import BadRequest, NotFound

if TYPE_CHECKING:
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime


async def image_of(rt: Runtime, tenant_id: str, image_id: str) -> ImageRecord:
    image = await rt.store.get_image(tenant_id, image_id)
    if image is None:
        raise NotFound(f"Image not found: {image_id}")
    return image


async def image_by_agent(rt: Runtime, tenant_id: str, agent_id: str) -> ImageRecord | None:
    for image in await rt.store.list_images(tenant_id):
        if image.agentId == agent_id:
            return image
    return None


async def image_for(
    rt: Runtime, tenant_id: str, *, image_id: str | None, agent_id: str | None
) -> ImageRecord:
    """The image a request names by ``imageId`` (preferred) or by its running ``agentId``."""
    if image_id:
        return await image_of(rt, tenant_id, image_id)
    if agent_id:
        found = await image_by_agent(rt, tenant_id, agent_id)
        if found is None:
            raise NotFound(f"Agent not found: {agent_id}")
        return found
    raise BadRequest("Either imageId or agentId must be provided")


__all__ = ["image_by_agent", "image_for", "image_of"]
