"""The HTTP API: one FastAPI app, served by uvicorn locally and by Mangum on Lambda."""

from agentvm.api.app import create_app

__all__ = ["create_app"]
