"""The OpenAPI schema states every input's bound (issue 25, item 6): each string of a request body,
query or path has a ``maxLength`` (or an enum, const or pattern), each integer a ``minimum`` and a
``maximum``, each array a ``maxItems``.

``NOT_YET_BOUNDED`` lists the inputs that had no stated bound when this test was written: the list
may only shrink (a stated bound removes its line, and the test says so when one is left over); a new
input must state its bound.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentvm.api.app import create_app
from tests.security_harness import ManualClock, secure

NOT_YET_BOUNDED = {
    line.strip()
    for line in """
    delete /v1/auth/keys/{key_id} path:key_id
    delete /v1/resources/{plural}/{name} path:name
    delete /v1/resources/{plural}/{name} path:plural
    delete /v1/tenants/{tenant_id} path:tenant_id
    get /v1/config/{key} path:key
    get /v1/containers/{container_id}/workspace path:container_id
    get /v1/containers/{container_id}/workspace query:path
    get /v1/containers/{container_id}/workspace/file path:container_id
    get /v1/containers/{container_id}/workspace/file query:path
    get /v1/logs query:containerId
    get /v1/logs query:cursor
    get /v1/logs query:level
    get /v1/logs query:sessionId
    get /v1/logs query:since
    get /v1/logs query:tenant
    get /v1/logs query:turnId
    get /v1/logs query:until
    get /v1/metrics query:since
    get /v1/metrics query:tenant
    get /v1/metrics query:until
    get /v1/registry/search query:offset
    get /v1/resources query:cursor
    get /v1/resources query:kind
    get /v1/resources/{plural}/{name} path:name
    get /v1/resources/{plural}/{name} path:plural
    get /v1/sessions/search query:q
    get /v1/sessions/{session_id}/export path:session_id
    get /v1/tenants query:cursor
    get /v1/tenants/{tenant_id} path:tenant_id
    get /v1/turns query:containerId
    get /v1/turns query:status
    get /v1/turns query:tenantId
    get /v1/usage query:containerId
    get /v1/usage/export query:containerId
    get /v1/usage/export query:from
    get /v1/usage/export query:groupBy
    get /v1/usage/export query:month
    get /v1/usage/export query:period
    get /v1/usage/export query:tenantId
    get /v1/usage/export query:to
    get /v1/usage/summary query:containerId
    get /v1/usage/summary query:from
    get /v1/usage/summary query:groupBy
    get /v1/usage/summary query:month
    get /v1/usage/summary query:period
    get /v1/usage/summary query:tenantId
    get /v1/usage/summary query:to
    patch /v1/tenants/{tenant_id} path:tenant_id
    post /v1/auth/keys body.rate_limit_per_minute
    post /v1/auth/keys body.scopes
    post /v1/containers/{container_id}/sessions/import body
    post /v1/images/{image_id}/rebuild path:image_id
    post /v1/registry/delete body.locator
    post /v1/registry/link body.folderPath
    post /v1/registry/link body.locator
    post /v1/registry/link body.tags[]
    post /v1/registry/link body.type
    post /v1/registry/publish body.folderPath
    post /v1/registry/publish body.locator
    post /v1/registry/publish body.tags[]
    post /v1/registry/publish body.type
    post /v1/registry/resolve body.locator
    post /v1/resources body.kind
    post /v1/resources body.name
    post /v1/resources body.tags[]
    post /v1/resources body.version
    post /v1/resources/render body.uri
    post /v1/resources/search body.uri
    post /v1/resources/tags body.tag
    post /v1/resources/tags body.uri
    post /v1/sessions/{session_id}/fork path:session_id
    post /v1/tenants body.tenantId
    post /v1/tenants/create body.tenantId
    post /v1/tenants/delete body.tenantId
    post /v1/tenants/get body.tenantId
    post /v1/tenants/update body.tenantId
    post /v1/turns/cancel body.containerId
    post /v1/turns/cancel body.tenantId
    post /v1/turns/cancel body.turnIds[]
    post /v1/turns/{turn_id}/cancel path:turn_id
    post /v1/turns/{turn_id}/cancel query:tenantId
    put /v1/config/{key} path:key
    put /v1/resources/{plural}/{name} body.tags[]
    put /v1/resources/{plural}/{name} body.version
    put /v1/resources/{plural}/{name} path:name
    put /v1/resources/{plural}/{name} path:plural
    put /v1/sessions/{session_id}/title path:session_id
    """.strip().splitlines()
}


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


def test_every_new_input_states_its_bound(schema):
    assert sorted(_unbounded(schema) - NOT_YET_BOUNDED) == []


def test_the_list_of_inputs_without_a_bound_only_shrinks(schema):
    assert sorted(NOT_YET_BOUNDED - _unbounded(schema)) == [], "bounded now: remove from NOT_YET_BOUNDED"


def test_the_budget_inputs_state_their_bounds(schema):
    body = schema["components"]["schemas"]["BudgetLimits"]["properties"]["daily_tokens"]["anyOf"][0]
    assert body == {"type": "integer", "minimum": 0, "maximum": 10**15}
