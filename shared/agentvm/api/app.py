"""``create_app(runtime)``: the FastAPI application both hosts serve.

Local: ``avm serve`` adds the ``/ws`` WebSocket route and the queue consumer around it.
Lambda: ``functions/http_api`` wraps the same object in Mangum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI
from pydantic import BaseModel

from agentvm import __version__

if TYPE_CHECKING:
    from agentvm.core.runtime import Runtime


class Health(BaseModel):
    status: str
    version: str


def create_app(runtime: Runtime, **fastapi_kwargs: object) -> FastAPI:
    app = FastAPI(
        title="AgentVM",
        version=__version__,
        description="AI agent runtime. WebSocket: AgentX v1 protocol at /ws (see docs/protocol.md).",
        **fastapi_kwargs,  # type: ignore[arg-type]
    )
    app.state.runtime = runtime

    @app.get("/health", response_model=Health, tags=["ops"])
    async def health() -> Health:
        return Health(status="ok", version=__version__)

    return app


__all__ = ["create_app"]
