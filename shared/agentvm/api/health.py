"""``GET /health``: the one open route (no key), for load balancers and ``avm`` itself."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from agentvm import __version__
from agentvm.api import examples as doc
from agentvm.api.errors import error_responses
from agentvm.api.openapi import ok

router = APIRouter()


class Health(BaseModel):
    status: str
    version: str


@router.get(
    "/health",
    response_model=Health,
    tags=["ops"],
    responses={**ok(200, None, doc.HEALTH, "the server is up"), **error_responses(413)},
)
async def health() -> Health:
    return Health(status="ok", version=__version__)


__all__ = ["Health", "router"]
