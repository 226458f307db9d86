"""``/docs`` works without internet: the page loads Swagger UI from this server, never from a CDN."""

from __future__ import annotations

import re

import httpx

from agentvm.api.app import create_app


async def test_the_docs_pages_load_their_scripts_and_styles_from_this_server(harness) -> None:
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as http:
        for page in ("/docs", "/redoc"):
            answer = await http.get(page)
            assert answer.status_code == 200
            assets = re.findall(r'(?:src|href)="([^"]+)"', answer.text)
            assert assets, answer.text[:500]
            assert not [a for a in assets if a.startswith(("http:", "https:", "//"))], assets
            for asset in assets:
                if asset.endswith((".js", ".css")):
                    fetched = await http.get(asset)
                    assert fetched.status_code == 200, asset
                    assert len(fetched.content) > 10_000, asset  # the real bundle, not a stub
        swagger = (await http.get("/docs")).text
        assert "/openapi.json" in swagger
