"""The web playground's static files (``agentvm/playground/``), served by ``avm serve`` at ``/``.

The page is plain HTML, CSS and ES modules (no build step); it talks to the server through the
public APIs only (the ``/ws`` WebSocket and ``/v1`` with the user's key), so these routes need no
key and serve nothing but the files named in ``FILES``: one exact route each, no path parameter,
so nothing else on disk is reachable and ``/health``, ``/docs``, ``/openapi.json``, ``/v1`` and
``/ws`` are never shadowed (an unknown path stays the usual JSON 404).

Every answer carries a strict Content-Security-Policy: scripts and styles from this origin only
(no inline script, no ``eval``), connections to this origin and its WebSocket origin only, no
framing, no ``<base>``, no form posts; plus ``nosniff``, ``no-referrer`` and ``DENY`` framing.
The AWS stack does not serve the page from its HTTP API (that would be a Lambda call per file);
the same files are deployed as static files instead (docs/playground.md).
"""

from __future__ import annotations

import re
from importlib import resources

from fastapi import APIRouter, Request, Response

FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "protocol.js": "text/javascript; charset=utf-8",
    "view.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    # vendored, unmodified but for the source-map line (docs/playground.md): marked 15.0.12 (MIT,
    # LICENSE.marked.md) and DOMPurify 3.2.6 (Apache-2.0 or MPL-2.0, LICENSE.dompurify.txt)
    "marked.esm.js": "text/javascript; charset=utf-8",
    "purify.es.js": "text/javascript; charset=utf-8",
    "config.json": "application/json",
}

# A Host header fit to name the WebSocket origin (a name or address, and a port); anything else
# is left out of the policy, which then allows this origin ('self') alone.
_HOST = re.compile(r"^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")


def content_security_policy(host: str | None, *, secure: bool) -> str:
    """The page's policy. ``connect-src`` names the WebSocket origin besides ``'self'`` for
    browsers that do not count ws: as 'self' (CSP level 2)."""
    connect = "'self'"
    if host and _HOST.match(host):
        connect += f" {'wss' if secure else 'ws'}://{host}"
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src {connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def security_headers(host: str | None, *, secure: bool) -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(host, secure=secure),
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cache-Control": "no-cache",  # revalidate: a new version shows at the next load
    }


def playground_routes() -> APIRouter:
    """``GET /`` (the page) and ``GET /<file>`` for each of ``FILES``; read once, at start."""
    folder = resources.files("agentvm") / "playground"
    bodies = {name: (folder / name).read_bytes() for name in FILES}
    router = APIRouter(include_in_schema=False)

    def route(name: str) -> None:
        async def serve(request: Request) -> Response:
            headers = security_headers(request.headers.get("host"), secure=request.url.scheme == "https")
            return Response(bodies[name], media_type=FILES[name], headers=headers)

        paths = ["/", "/index.html"] if name == "index.html" else [f"/{name}"]
        for path in paths:
            router.add_api_route(path, serve, methods=["GET", "HEAD"], name=f"playground:{path}")

    for name in FILES:
        route(name)
    return router


__all__ = ["FILES", "content_security_policy", "playground_routes", "security_headers"]
