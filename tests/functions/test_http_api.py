"""The HTTP API: API Gateway payload-format-2.0 events through Mangum into the FastAPI app."""

from __future__ import annotations

import json

from agentvm import __version__
from functions.http_api.app import build_handler


def test_get_health_returns_200_with_the_version(rt, load_event, context):
    response = build_handler(rt)(load_event("apigw-http-get-health.json"), context)
    assert response["statusCode"] == 200
    assert response["headers"]["content-type"] == "application/json"
    assert json.loads(response["body"]) == {"status": "ok", "version": __version__}


def test_unknown_route_returns_404(rt, load_event, context):
    response = build_handler(rt)(load_event("apigw-http-get-unknown.json"), context)
    assert response["statusCode"] == 404


def test_handler_serves_repeated_invocations(rt, load_event, context):
    # A warm execution environment: the same handler, loop and app for every request.
    handler = build_handler(rt)
    codes = [handler(load_event("apigw-http-get-health.json"), context)["statusCode"] for _ in range(3)]
    assert codes == [200, 200, 200]
