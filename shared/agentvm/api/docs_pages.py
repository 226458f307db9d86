"""``/docs`` (Swagger UI) and ``/redoc`` that work without internet.

FastAPI's own pages load Swagger UI's and ReDoc's JavaScript and CSS from a CDN, so ``/docs`` is
blank on a machine without internet. fastapi-offline (the local extra) packages those files; this
module serves them at ``/docs-assets`` and renders the pages with FastAPI's own HTML helpers,
pointed at them. Where fastapi-offline is not installed (the Lambda layer) ``create_app`` keeps
FastAPI's pages (``offline_assets()`` is None).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

ASSETS_URL = "/docs-assets"

router = APIRouter(include_in_schema=False)


def offline_assets() -> Path | None:
    """The directory of fastapi-offline's copies of Swagger UI and ReDoc, when it is installed.
    Found without importing the package (its ``__init__`` builds FastAPI apps): ``create_app``
    runs in every Lambda's init, where this costs one path lookup."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "static"


@router.get("/docs", response_class=HTMLResponse)
async def swagger_page(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}/openapi.json",
        title="AgentVM - Swagger UI",
        swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
    )


@router.get("/redoc", response_class=HTMLResponse)
async def redoc_page(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_redoc_html(
        openapi_url=f"{root}/openapi.json",
        title="AgentVM - ReDoc",
        redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )


__all__ = ["ASSETS_URL", "offline_assets", "redoc_page", "router", "swagger_page"]
