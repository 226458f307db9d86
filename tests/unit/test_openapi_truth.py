"""``/openapi.json`` tells the truth (security review, finding 9a): no 422 (validation errors are
answered 400), every error a route can give documented with the error shape, and the bearer
scheme on the ``/v1`` routes; real bad requests get only statuses the schema documents.

And it documents every route with examples (issue 11): each operation's success answer has an
example (under any content type) that validates against its schema, each JSON request body has
one, and real answers of the routes have the documented keys and fit the documented schema."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest

from agentvm.adapters.local.sandbox import LocalSandbox
from agentvm.agent.tool_sources import ToolSources
from agentvm.api.app import ErrorBody, create_app
from tests.security_harness import ManualClock, new_key, secure

EVERY_V1 = {401, 403, 413, 429}  # no, bad or non-admin key, body size, rate limit
# What else each /v1 operation may answer: a new route must be added here, with its errors.
ROUTE_ERRORS = {
    ("post", "/v1/auth/keys"): {400},
    ("get", "/v1/auth/keys"): set(),
    ("delete", "/v1/auth/keys/{key_id}"): {404},
    ("put", "/v1/budgets/tenant"): {400},
    ("get", "/v1/budgets/tenant"): {400},  # budgets not enabled
    ("put", "/v1/budgets/containers/{container_id}"): {400},
    ("get", "/v1/budgets/containers/{container_id}"): {400},
    ("get", "/v1/usage"): set(),
    ("get", "/v1/containers/{container_id}/workspace"): {400, 404},
    ("get", "/v1/containers/{container_id}/workspace/file"): {400, 404},
    ("post", "/v1/resources"): {400, 404, 409},
    ("get", "/v1/resources"): {400},
    ("get", "/v1/resources/resolve"): {400, 404},
    ("post", "/v1/resources/render"): {400, 404},
    ("post", "/v1/resources/tags"): {400, 404},
    ("post", "/v1/resources/search"): {400, 404},
    ("get", "/v1/registry/types"): set(),
    ("get", "/v1/registry/resource"): {400, 404},
    ("post", "/v1/registry/resolve"): {400, 404},
    ("get", "/v1/registry/exists"): {400},
    ("get", "/v1/registry/search"): {400},
    ("post", "/v1/registry/publish"): {400, 404, 409},
    ("post", "/v1/registry/link"): {400, 404, 409},
    ("post", "/v1/registry/delete"): {400, 404, 409},
    ("post", "/v1/images/{image_id}/rebuild"): {400, 404},
    ("get", "/v1/config"): {400},
    ("put", "/v1/config"): {400},
    ("get", "/v1/config/audit"): {400},
    ("get", "/v1/config/{key}"): {400},
    ("put", "/v1/config/{key}"): {400},
    ("post", "/v1/tenants/create"): {400, 409},
    ("post", "/v1/tenants/get"): {400, 404},
    ("get", "/v1/tenants/list"): set(),
    ("post", "/v1/tenants/update"): {400, 404, 409},  # 409: being deleted
    ("post", "/v1/tenants/delete"): {400, 404, 409},
    ("post", "/v1/tenants"): {400, 409},
    ("get", "/v1/tenants"): {400},  # a bad status, limit
    ("get", "/v1/tenants/{tenant_id}"): {404},
    ("patch", "/v1/tenants/{tenant_id}"): {400, 404, 409},
    ("delete", "/v1/tenants/{tenant_id}"): {404, 409},
    ("get", "/v1/resources/{plural}/{name}"): {400, 404},
    ("put", "/v1/resources/{plural}/{name}"): {400, 404, 409},
    ("delete", "/v1/resources/{plural}/{name}"): {400, 404, 409},
}
ERROR_REF = "#/components/schemas/ErrorBody"


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def schema(harness, clock):
    secure(harness, clock)
    return create_app(harness.rt).openapi()


@pytest.fixture
async def http(harness, schema):
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as client:
        yield client


def operations(schema):
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            yield method, path, op


def error_statuses(op) -> set[int]:
    return {int(s) for s in op["responses"] if int(s) >= 400}


def test_the_openapi_documents_no_422_anywhere(schema):
    for method, path, op in operations(schema):
        assert "422" not in op["responses"], (method, path)
    assert not {"HTTPValidationError", "ValidationError"} & set(schema["components"]["schemas"])


def test_every_v1_operation_documents_its_errors_in_the_error_shape_and_the_bearer_scheme(schema):
    scheme = schema["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    v1 = {(m, p): op for m, p, op in operations(schema) if p.startswith("/v1/")}
    assert set(v1) == set(ROUTE_ERRORS)
    for key, op in v1.items():
        assert error_statuses(op) == EVERY_V1 | ROUTE_ERRORS[key], key
        for status in error_statuses(op):
            content = op["responses"][str(status)]["content"]["application/json"]
            assert content["schema"] == {"$ref": ERROR_REF}, (key, status)
        assert op["security"] == [{"apiKey": []}], key
        assert "WWW-Authenticate" in op["responses"]["401"]["headers"]
        assert "Retry-After" in op["responses"]["429"]["headers"]
    health = schema["paths"]["/health"]["get"]
    assert "security" not in health and error_statuses(health) == {413}  # open; bodies are capped


async def test_real_refusals_answer_only_statuses_the_openapi_documents(http, harness, schema):
    """Every /v1 operation, as the schema lists them, sent what a careless or hostile client sends."""
    admin = {"Authorization": f"Bearer {await new_key(harness.rt, 'acme', 'admin')}"}
    client = {"Authorization": f"Bearer {await new_key(harness.rt, 'acme')}"}
    json_type = {"Content-Type": "application/json"}
    attempts = [
        ({}, b'{"scopes": ["client"]}'),  # no key
        ({"Authorization": "Bearer avm_aaaaaaaaaaaa_" + "A" * 43}, None),  # a key that does not exist
        (client, b'{"daily_tokens": 1}'),  # not admin
        (admin, b"{"),  # malformed JSON
        (admin, b'{"scopes": "root", "daily_tokens": "many"}'),  # wrong types
        (admin, b"x" * (harness.rt.turns.max_body_bytes + 1)),  # too large
    ]
    seen: set[int] = set()
    for method, path, op in operations(schema):
        url = path.replace("{key_id}", "abcdefghijkl").replace("{container_id}", "c1")
        url = url.replace("{plural}", "prompts").replace("{name}", "support/greeting")
        for headers, body in attempts:
            r = await http.request(method.upper(), url, content=body, headers={**headers, **json_type})
            seen.add(r.status_code)
            assert str(r.status_code) in op["responses"], (method, path, r.status_code, r.text)
            if r.status_code >= 400:
                assert ErrorBody.model_validate(r.json()).error.code, r.text

    # rate limited, and budgets switched off: also documented
    limited = {
        "Authorization": f"Bearer {await new_key(harness.rt, 'acme', 'admin', rate_limit_per_minute=1)}"
    }
    assert (await http.get("/v1/usage", headers=limited)).status_code == 200
    r = await http.get("/v1/usage", headers=limited)
    assert r.status_code == 429 and "429" in schema["paths"]["/v1/usage"]["get"]["responses"]
    harness.rt.budgets = None
    r = await http.get("/v1/budgets/tenant", headers=admin)
    assert r.status_code == 400 and "400" in schema["paths"]["/v1/budgets/tenant"]["get"]["responses"]
    assert seen >= {200, 400, 401, 403, 404, 413}


# -- success answers and request bodies: documented with examples ---------------------------------
def examples_of(media: dict[str, Any]) -> list[Any]:
    """The examples of a media type object (``example``, or the values of ``examples``)."""
    if "example" in media:
        return [media["example"]]
    return [e["value"] for e in media.get("examples", {}).values() if "value" in e]


def successes(op: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(s): r for s, r in op["responses"].items() if s.isdigit() and 200 <= int(s) < 300}


def fits(schema: dict[str, Any], part: dict[str, Any], instance: Any) -> None:
    """Validate against a schema of the OpenAPI document (its ``$ref`` resolved in the document)."""
    jsonschema.Draft202012Validator({**part, "components": schema["components"]}).validate(instance)


def body_examples(schema: dict[str, Any], media: dict[str, Any]) -> list[Any]:
    """A request body's examples: on the media type, or on the model it names (json_schema_extra)."""
    found = examples_of(media)
    ref = media.get("schema", {}).get("$ref", "")
    if not found and ref.startswith("#/components/schemas/"):
        found = schema["components"]["schemas"][ref.rsplit("/", 1)[1]].get("examples", [])
    return found


def test_every_operation_documents_its_success_answer_with_an_example_that_fits_its_schema(schema):
    for method, path, op in operations(schema):
        documented = successes(op)
        assert documented, f"{method} {path}: no success response (ok(...) in agentvm.api.openapi)"
        for status, response in documented.items():
            content = response.get("content", {})
            assert any(examples_of(m) for m in content.values()), (
                f"{method} {path} {status}: no example (ok(...) in agentvm.api.openapi)"
            )
            for media in content.values():
                for example in examples_of(media):
                    if media.get("schema"):
                        fits(schema, media["schema"], example)


async def test_the_served_document_keeps_the_examples_nulls(http):
    """FastAPI drops every null from /openapi.json; the examples are put back as written."""
    served = (await http.get("/openapi.json")).json()
    assert "x-example-json" not in str(served) and "x-examples-json" not in str(served)
    page = served["paths"]["/v1/tenants"]["get"]["responses"]["200"]["content"]["application/json"]
    assert page["example"]["next"] is None
    changes = served["components"]["schemas"]["TenantChanges"]["examples"]
    assert {"description": None} in changes


def test_every_json_request_body_has_an_example_that_fits_its_schema(schema):
    bodies = 0
    for method, path, op in operations(schema):
        media = op.get("requestBody", {}).get("content", {}).get("application/json")
        if media is None:
            continue
        bodies += 1
        found = body_examples(schema, media)
        assert found, f"{method} {path}: the request body has no example (json_schema_extra examples)"
        for example in found:
            fits(schema, media["schema"], example)
    assert bodies >= 20  # the check ran over the bodies there are


@pytest.fixture
async def served(harness, clock, tmp_path):
    """A server with data in it: a tenant admin (acme) and a platform admin, a container with a
    workspace file, and a used budget."""
    secure(harness, clock)
    harness.rt.tools = ToolSources()
    harness.rt.sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False)
    acme = {"Authorization": f"Bearer {await new_key(harness.rt, 'acme', 'admin', name='ops')}"}
    platform = {"Authorization": f"Bearer {await new_key(harness.rt, 'platform', 'admin')}"}
    client = await harness.client("acme")
    await client.request("container_create", containerId="user-alice")
    await harness.rt.sandbox.write("acme", "user-alice", "src/hello.py", b"print(6*7)\n")
    app = create_app(harness.rt)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://avm") as http:
        yield http, acme, platform, client, app.openapi()


def top_keys(value: Any) -> frozenset[str] | None:
    """The keys of an answer (of its first item, for a list)."""
    if isinstance(value, list):
        return top_keys(value[0]) if value else None
    return frozenset(value) if isinstance(value, dict) else None


async def test_real_answers_have_the_documented_keys_and_fit_the_documented_schema(served, harness):
    """Every route, called as a client would with the documented examples' data: its answer's
    status is documented, its top-level keys are those of one of its examples, and it validates
    against the documented schema (so neither examples nor models drift from the code)."""
    http, acme, platform, client, schema = served
    answers: dict[tuple[str, str], Any] = {}
    greeting = {
        "template": "You help {{product}} users. Be brief.",
        "variables": {"product": {"type": "string"}},
    }
    handbook = {
        "documents": [
            {"id": "refunds", "title": "Refunds", "text": "Refunds are paid within 14 days of a return."},
            {"id": "shipping", "title": "Shipping", "text": "Orders ship in 2 days."},
        ]
    }
    agent = {
        "prompt": {"uri": "resource://prompts/support/greeting@stable", "arguments": {"product": "Acme"}},
        "tools": ["resource://tools/calc@1"],
        "knowledge": ["resource://knowledge/handbook@1"],
        "model": "scripted/test-1",
    }
    locator = "deepractice.ai/prompts/assistant.prompt@1.0.0"
    upload = {
        "locator": locator,
        "content": "You are a helpful assistant for {{product}}.",
        "description": "The assistant's system prompt",
        "tags": ["stable"],
    }

    async def call(method: str, path: str, url: str | None = None, headers: Any = None, **kw: Any) -> Any:
        r = await http.request(method.upper(), url or path, headers=headers or acme, **kw)
        op = schema["paths"][path][method]
        documented = successes(op)
        assert r.status_code in documented, (method, path, r.status_code, r.text)
        media = documented[r.status_code]["content"]["application/json"]
        body = r.json()
        keys = {top_keys(e) for e in examples_of(media)}
        assert top_keys(body) in keys, (method, path, sorted(top_keys(body) or ()), keys)
        fits(schema, media["schema"], body)
        answers[(method, path)] = body
        return body

    await call("get", "/health")
    made = await call(
        "post", "/v1/auth/keys", json={"scopes": ["client"], "name": "web app", "rate_limit_per_minute": 60}
    )
    await call("get", "/v1/auth/keys")
    key_id = made["key"]["keyId"]
    await call("delete", "/v1/auth/keys/{key_id}", f"/v1/auth/keys/{key_id}")
    await call("put", "/v1/budgets/tenant", json={"daily_tokens": 1000000, "monthly_tokens": 20000000})
    await call("get", "/v1/budgets/tenant")
    container_budget = "/v1/budgets/containers/user-alice"
    await call("put", "/v1/budgets/containers/{container_id}", container_budget, json={"daily_tokens": 50000})
    await call("get", "/v1/budgets/containers/{container_id}", container_budget)
    workspace = "/v1/containers/user-alice/workspace"
    await call("get", "/v1/containers/{container_id}/workspace", f"{workspace}?path=src")
    await call("get", "/v1/containers/{container_id}/workspace/file", f"{workspace}/file?path=src/hello.py")

    one, by_name = "/v1/resources/{plural}/{name}", "/v1/resources/prompts/support/greeting"
    await call(
        "post",
        "/v1/resources",
        json={"kind": "prompt", "name": "support/greeting", "spec": greeting, "tags": ["stable"]},
    )
    await call(
        "put", one, by_name, json={"spec": {**greeting, "template": "Be kind."}, "description": "Kinder"}
    )
    await call(
        "post", "/v1/resources/tags", json={"uri": "resource://prompts/support/greeting@2", "tag": "stable"}
    )
    await call("get", "/v1/resources", "/v1/resources?kind=prompt")
    await call("get", one, by_name)
    await call("get", one, f"{by_name}@stable")
    await call(
        "post",
        "/v1/resources/render",
        json={"uri": "resource://prompts/support/greeting@stable", "arguments": {"product": "Acme"}},
    )
    await call("post", "/v1/resources", json={"kind": "knowledge", "name": "handbook", "spec": handbook})
    hits = await call(
        "post",
        "/v1/resources/search",
        json={"uri": "resource://knowledge/handbook@1", "query": "refund policy"},
    )
    assert hits["hits"][0]["documentId"] == "refunds"
    await call(
        "post",
        "/v1/resources",
        json={"kind": "tool", "name": "calc", "spec": {"tool": {"type": "builtin", "name": "calculator"}}},
    )
    await call("post", "/v1/resources", json={"kind": "agent", "name": "support", "spec": agent})
    await call("get", "/v1/resources/resolve", "/v1/resources/resolve?uri=resource://agents/support@1")
    image = (
        await client.request(
            "image_create", containerId="user-alice", config={"agent": "resource://agents/support@1"}
        )
    )["record"]
    await call(
        "post", "/v1/resources/tags", json={"uri": "resource://prompts/support/greeting@1", "tag": "stable"}
    )
    rebuilt = await call(
        "post", "/v1/images/{image_id}/rebuild", f"/v1/images/{image['imageId']}/rebuild", json={}
    )
    assert "resource://prompts/support/greeting@1" in rebuilt["record"]["build"]["pins"]
    await call("delete", one, f"{by_name}@2")

    await call("get", "/v1/registry/types")
    await call("post", "/v1/registry/publish", json=upload)
    await call(
        "post",
        "/v1/registry/link",
        json={**upload, "locator": "deepractice.ai/prompts/assistant.prompt@1.1.0"},
    )
    await call("get", "/v1/registry/resource", f"/v1/registry/resource?locator={locator}")
    await call("post", "/v1/registry/resolve", json={"locator": locator, "args": {"product": "Acme"}})
    await call("get", "/v1/registry/exists", f"/v1/registry/exists?locator={locator}")
    await call("get", "/v1/registry/search", "/v1/registry/search?query=assistant")
    await call(
        "post", "/v1/registry/delete", json={"locator": "deepractice.ai/prompts/assistant.prompt@1.1.0"}
    )

    await call(
        "put",
        "/v1/config",
        json={"values": {"llm.defaultModel": "scripted/test-1", "llm.maxOutputTokens": 2048}},
    )
    await call("get", "/v1/config")
    await call("get", "/v1/config/{key}", "/v1/config/llm.defaultModel")
    await call("put", "/v1/config/{key}", "/v1/config/llm.maxOutputTokens", json={"value": 4096})
    await call("get", "/v1/config/audit")

    harness.model.add("Hello from Acme support.")
    await client.request("message_send", imageId=image["imageId"], content="hi")
    await harness.run_turns()
    usage = await call("get", "/v1/usage")
    assert usage["totals"]["turns"] == 1

    acme_tenant = {
        "name": "Acme Corp",
        "description": "Resells agents to its own customers",
        "tenantId": "acme",
    }
    await call("post", "/v1/tenants", headers=platform, json=acme_tenant)
    await call("get", "/v1/tenants", headers=platform)
    await call("get", "/v1/tenants/{tenant_id}", "/v1/tenants/acme", headers=platform)
    await call(
        "patch", "/v1/tenants/{tenant_id}", "/v1/tenants/acme", headers=platform, json={"name": "Acme"}
    )
    globex = await call(
        "post", "/v1/tenants/create", headers=platform, json={"name": "Globex", "description": "d"}
    )
    ref = {"tenantId": globex["tenantId"]}
    await call("post", "/v1/tenants/get", headers=platform, json=ref)
    await call("get", "/v1/tenants/list", headers=platform)
    await call("post", "/v1/tenants/update", headers=platform, json={**ref, "description": "d"})
    await call("post", "/v1/tenants/delete", headers=platform, json=ref)
    initech = await call(
        "post", "/v1/tenants", headers=platform, json={"name": "Initech", "description": "d"}
    )
    await call("delete", "/v1/tenants/{tenant_id}", f"/v1/tenants/{initech['tenantId']}", headers=platform)

    every = {(m, p) for m, p, _ in operations(schema)}
    assert len(answers) >= 40 and answers.keys() <= every
