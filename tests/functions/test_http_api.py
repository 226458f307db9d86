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


def _post_keys(load_event, body: str) -> dict:
    """A POST /v1/auth/keys with no key, as API Gateway delivers it."""
    event = load_event("apigw-http-get-health.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/auth/keys"
    event["requestContext"]["http"]["method"] = "POST"
    event["headers"].update({"content-type": "application/json", "content-length": str(len(body))})
    event["body"] = body
    return event


def test_a_body_over_the_limit_is_refused_413_before_authentication(rt, load_event, context):
    big = json.dumps({"name": "x" * (rt.turns.max_body_bytes + 1)})
    response = build_handler(rt)(_post_keys(load_event, big), context)
    assert response["statusCode"] == 413
    assert json.loads(response["body"])["error"]["code"] == "payload_too_large"
    small = build_handler(rt)(_post_keys(load_event, json.dumps({"name": "x"})), context)
    assert small["statusCode"] == 401  # a body under the limit reaches authentication
