"""Containers: the tenant's groups of images. An image only exists inside a container made with it
(``image_create`` makes the container on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.events import event
from agentvm.records import ContainerRecord

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.runtime import Runtime


async def ensure_container(rt: Runtime, tenant_id: str, container_id: str, *, notices: list[Json]) -> bool:
    """Create the container if it does not exist; a new one is told to the caller
    (``container_created``, appended to ``notices``). True: this call created it."""
    now = rt.clock.now_ms()
    created = await rt.store.put_container(
        ContainerRecord(tenantId=tenant_id, containerId=container_id, createdAt=now, updatedAt=now)
    )
    if created:
        notices.append(
            event(
                "container_created",
                {"containerId": container_id, "createdAt": now},
                now_ms=now,
                source="container",
                category="lifecycle",
            )
        )
    return created


__all__ = ["ensure_container"]
