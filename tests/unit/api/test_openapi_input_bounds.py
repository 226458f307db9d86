"""The OpenAPI schema states every input's bound (issue 25, item 6): each string of a request body,
query or path has a ``maxLength`` (or an enum, const or pattern), each integer a ``minimum`` and a
``maximum``, each array a ``maxItems``.

Every input states one now (the 87 without one when this test was first written are bounded): a new
input must state its bound too. A bound the code checks itself, with its own error code
(``invalid_locator``, ``invalid_config``, ...), is stated with ``agentvm.api.openapi.stated`` and
keeps that code; any other is declared on the model or parameter and refused ``bad_request``. Both
answer 400 in the error shape (``test_bounds_are_enforced_...`` below).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentvm.api.app import create_app
from tests.security_harness import ManualClock, new_key, secure


@pytest.fixture
def schema(harness):
    secure(harness, ManualClock())
    return create_app(harness.rt).openapi()


def _unbounded(schema: dict[str, Any]) -> set[str]:
    components = schema["components"]["schemas"]
    found: set[str] = set()

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = components[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def walk(node: dict[str, Any], where: str) -> None:
        node = resolve(node)
        for key in ("anyOf", "oneOf", "allOf"):
            for branch in node.get(key, []):
                walk(branch, where)
        kind = node.get("type")
        if kind == "string" and not {"maxLength", "enum", "const", "pattern"} & node.keys():
            found.add(where)
        if kind == "integer" and not {"minimum", "maximum"} <= node.keys():
            found.add(where)
        if kind == "array":
            if "maxItems" not in node:
                found.add(where)
            walk(node.get("items", {}), f"{where}[]")
        for name, child in node.get("properties", {}).items():
            walk(child, f"{where}.{name}")

    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            for param in op.get("parameters", []):
                walk(param.get("schema", {}), f"{method} {path} {param['in']}:{param['name']}")
            for content in op.get("requestBody", {}).get("content", {}).values():
                walk(content.get("schema", {}), f"{method} {path} body")
    return found


def test_every_input_states_its_bound(schema):
    assert sorted(_unbounded(schema)) == []


def test_the_budget_inputs_state_their_bounds(schema):
    body = schema["components"]["schemas"]["BudgetLimits"]["properties"]["dailyTokens"]["anyOf"][0]
    assert body == {"type": "integer", "minimum": 0, "maximum": 10**15}


@pytest.fixture
async def platform_admin(harness):
    """An HTTP client with a platform admin key (it may name other tenants)."""
    secure(harness, ManualClock())
    token = await new_key(harness.rt, "platform", "admin")
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
        yield client


LONG = "a" * 5000
# (method, url, params, body, the code of the 400): one input past its bound on each kind of route
PAST_THEIR_BOUNDS = [
    ("DELETE", f"/v1/auth/keys/{'k' * 129}", None, None, "bad_request"),
    ("POST", "/v1/auth/keys", None, {"scopes": ["client", "client", "admin"]}, "bad_request"),
    ("POST", "/v1/auth/keys", None, {"rate_limit_per_minute": 10**6 + 1}, "bad_request"),
    ("GET", "/v1/usage", {"containerId": LONG}, None, "bad_request"),
    ("GET", "/v1/usage/summary", {"month": LONG}, None, "bad_request"),
    ("GET", "/v1/usage/export", {"groupBy": LONG}, None, "bad_request"),
    ("GET", "/v1/containers/c1/workspace", {"path": LONG}, None, "bad_request"),
    ("GET", f"/v1/containers/{'c' * 129}/workspace/file", {"path": "a"}, None, "bad_request"),
    ("GET", "/v1/logs", {"cursor": LONG}, None, "bad_request"),
    ("GET", "/v1/logs", {"sessionId": ""}, None, "bad_request"),
    ("GET", "/v1/metrics", {"since": LONG}, None, "bad_request"),
    ("GET", "/v1/turns", {"status": LONG}, None, "bad_request"),
    ("POST", "/v1/turns/cancel", None, {"turnIds": ["t" * 129]}, "bad_request"),
    ("POST", f"/v1/turns/{'t' * 129}/cancel", None, None, "bad_request"),
    ("GET", "/v1/tenants", {"cursor": "t" * 65}, None, "bad_request"),
    ("GET", f"/v1/tenants/{'t' * 65}", None, None, "bad_request"),
    ("PATCH", "/v1/tenants/acme", None, {"limits": {"maxApiKeys": 10**6 + 1}}, "bad_request"),
    ("POST", "/v1/tenants/get", None, {"tenantId": "t" * 65}, "bad_request"),
    ("GET", "/v1/resources", {"cursor": 10**9 + 1}, None, "bad_request"),
    ("GET", f"/v1/resources/prompts/{'n' * 301}", None, None, "bad_request"),
    ("POST", "/v1/resources/render", None, {"uri": LONG}, "bad_request"),
    ("PUT", "/v1/resources/prompts/greeting", None, {"spec": {}, "version": "1" * 65}, "bad_request"),
    ("GET", "/v1/registry/search", {"offset": 10**9 + 1}, None, "bad_request"),
    ("POST", "/v1/registry/publish", None, {"locator": "a.text@1", "folderPath": LONG}, "bad_request"),
    ("POST", f"/v1/images/{'i' * 129}/rebuild", None, None, "bad_request"),
    ("GET", f"/v1/sessions/{'s' * 129}/export", None, None, "bad_request"),
    # bounds the code checks itself: stated in the schema, refused with the code's own error
    ("POST", "/v1/registry/resolve", None, {"locator": "a" * 257}, "invalid_locator"),
    ("POST", "/v1/resources", None, {"kind": "prompt", "name": "n" * 201, "spec": {}}, "invalid_resource"),
    ("POST", "/v1/resources", None, {"kind": "widget", "name": "n", "spec": {}}, "invalid_resource"),
    (
        "POST",
        "/v1/resources/tags",
        None,
        {"uri": "resource://prompts/a@1", "tag": "t" * 65},
        "invalid_resource",
    ),
    ("GET", "/v1/config/no.such.setting", None, None, "invalid_config"),
    ("GET", "/v1/sessions/search", {"q": "word " * 101}, None, "invalid_query"),
    ("POST", "/v1/tenants", None, {"name": "Acme", "tenantId": "t" * 65}, "bad_request"),
]


@pytest.mark.parametrize(("method", "url", "params", "body", "code"), PAST_THEIR_BOUNDS)
async def test_bounds_are_enforced_with_a_400_in_the_error_shape(
    platform_admin, method, url, params, body, code
):
    r = await platform_admin.request(method, url, params=params, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == code, r.text


async def test_the_stated_bounds_are_the_codes_own(schema):
    """The bounds stated with ``stated(...)`` are the ones the code checks (its constants)."""
    from agentvm.configcentre.keys import KEYS
    from agentvm.resources.locator import MAX_LOCATOR
    from agentvm.resources.uri import KINDS, MAX_NAME
    from agentvm.sessions.search import MAX_QUERY_CHARS

    components = schema["components"]["schemas"]
    publish = components["Publish"]["properties"]
    assert publish["kind"]["enum"] == list(KINDS)
    assert publish["name"]["maxLength"] == MAX_NAME
    assert components["LocatorRef"]["properties"]["locator"]["maxLength"] == MAX_LOCATOR
    params = {p["name"]: p["schema"] for p in schema["paths"]["/v1/config/{key}"]["get"]["parameters"]}
    assert params["key"]["enum"] == list(KEYS)
    search = schema["paths"]["/v1/sessions/search"]["get"]["parameters"]
    assert next(p["schema"] for p in search if p["name"] == "q")["maxLength"] == MAX_QUERY_CHARS
