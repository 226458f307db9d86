"""Images over HTTP: ``POST /v1/images/{imageId}/rebuild`` moves an image built from an agent
resource to what its definition resolves to now (``agentvm.resources.build``), as
``image_update_request`` with ``rebuild: true`` does over the WebSocket."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal


class Rebuild(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{}, {"agent": "resource://agents/support@stable"}]},
    )

    agent: StrictStr | None = Field(
        default=None, max_length=1000, description="build from this definition instead (recorded)"
    )


def image_routes(
    runtime: Runtime,
    errors: Callable[..., dict[int | str, dict[str, Any]]],
    admin: Callable[[Request], Principal],
) -> APIRouter:
    router = APIRouter(prefix="/images", tags=["images"])

    @router.post("/{image_id}/rebuild", responses=errors(400, 404))
    async def rebuild(request: Request, image_id: str, body: Rebuild | None = None) -> dict[str, Any]:
        """Resolve the image's agent definition again and pin the image to the versions it resolves
        to now; the build is recorded in ``record.build.history``."""
        from agentvm.gateway.commands import CommandContext, image_of, rebuild_image

        principal = admin(request)
        ctx = CommandContext(
            runtime, principal.tenant_id, "http", "http", admin=True, key_id=principal.key_id
        )
        image = await rebuild_image(ctx, await image_of(ctx, image_id), body.agent if body else None)
        return {"record": image.to_wire()}

    return router


__all__ = ["image_routes"]
