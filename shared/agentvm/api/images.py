"""Images over HTTP: ``POST /v1/images/{imageId}/rebuild`` moves an image built from an agent
resource to what its definition resolves to now (``agentvm.images.rebuild``), as
``image_update_request`` with ``rebuild: true`` does over the WebSocket."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID

# A real answer of a test server, for the documented example.
_PINS_1 = [
    "resource://agents/support@1",
    "resource://knowledge/handbook@1",
    "resource://prompts/support/greeting@1",
    "resource://tools/calc@1",
]
_PINS_2 = [*_PINS_1[:2], "resource://prompts/support/greeting@2", _PINS_1[3]]
_REBUILT = {
    "record": {
        "imageId": "img_mww0869d_g0z8sjacw5",
        "containerId": "user-alice",
        "sessionId": "sess_mww0869d_g0z8sjcpen",
        "name": "support",
        "createdAt": 1795603943857,
        "updatedAt": 1795603943874,
        "online": False,
        "description": "Answers support questions",
        "systemPrompt": "You help Acme users. Be kind.",
        "model": "anthropic/claude-haiku-4-5",
        "build": {
            "agent": "resource://agents/support@stable",
            "resolved": "resource://agents/support@1",
            "pins": _PINS_2,
            "builtAt": 1795603943874,
            "builtBy": "95y23u39zzdo",
            "history": [
                {
                    "resolved": "resource://agents/support@1",
                    "pins": _PINS_1,
                    "builtAt": 1795603943857,
                    "builtBy": None,
                },
                {
                    "resolved": "resource://agents/support@1",
                    "pins": _PINS_2,
                    "builtAt": 1795603943874,
                    "builtBy": "95y23u39zzdo",
                },
            ],
        },
    }
}
_EXAMPLES = {
    "again": {"summary": "resolve the image's definition again", "value": {}},
    "another": {
        "summary": "build from another definition",
        "value": {"agent": "resource://agents/support@2"},
    },
}


class Rebuild(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples({}, {"agent": "resource://agents/support@stable"}),
    )

    agent: StrictStr | None = Field(
        default=None, max_length=1000, description="build from this definition instead (recorded)"
    )


router = APIRouter(prefix="/images", tags=["images"])


@router.post(
    "/{image_id}/rebuild",
    response_model=None,
    responses={**ok(200, "Rebuilt", _REBUILT, "the image, pinned anew"), **error_responses(400, 404)},
)
async def rebuild(
    runtime: RuntimeDep,
    caller: Caller,
    image_id: str = Path(min_length=1, max_length=MAX_ID),
    body: Annotated[Rebuild | None, Body(openapi_examples=_EXAMPLES)] = None,
) -> dict[str, Any]:
    """Resolve the image's agent definition again and pin the image to the versions it resolves
    to now; the build is recorded in ``record.build.history``."""
    from agentvm.images.built import rebuild as rebuild_image  # on first use: the build machinery
    from agentvm.images.lookup import image_of

    principal = admin(caller)
    tenant_id = principal.tenant_id
    image = await image_of(runtime, tenant_id, image_id)
    image = await rebuild_image(
        runtime, tenant_id, image, body.agent if body else None, admin=True, by=principal.key_id
    )
    return {"record": image.to_wire()}


__all__ = ["router"]
