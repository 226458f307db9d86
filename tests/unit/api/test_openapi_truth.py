"""``/openapi.json`` tells the truth (security review, finding 9a): no 422 (validation errors are
answered 400), every error a route can give documented with the error shape, and the bearer
scheme on the ``/v1`` routes; real bad requests get only statuses the schema documents.

And it documents every route with examples (issue 11): each operation's success answer has an
example (under any content type) that validates against its schema, each JSON request body has
one, and real answers of the routes have the documented keys and fit the documented schema."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from agentvm.api.errors import ErrorBody
from tests.api_tour import (
    WORKSPACE_FILE,
    Http,
    Ws,
    check_answer,
    examples_of,
    fits,
    next_step,
    successes,
    tour,
)
from tests.security_harness import ManualClock, new_key, secure

EVERY_V1 = {401, 403, 413, 429}  # no, bad or non-admin key, body size, rate limit
# What else each /v1 operation may answer: a new route must be added here, with its errors.
ROUTE_ERRORS = {
    ("post", "/v1/auth/keys"): {400, 409},  # 409: the tenant's active keys at its cap
    ("get", "/v1/auth/keys"): set(),
    ("delete", "/v1/auth/keys/{key_id}"): {400, 404},  # 400: a key id past its bound
    ("put", "/v1/budgets/tenant"): {400},
    ("get", "/v1/budgets/tenant"): {400},  # budgets not enabled
    ("put", "/v1/budgets/containers/{container_id}"): {400},
    ("get", "/v1/budgets/containers/{container_id}"): {400},
    ("get", "/v1/usage"): {400},  # a containerId past its bound
    ("get", "/v1/usage/summary"): {400},
    ("get", "/v1/usage/export"): {400},
    ("get", "/v1/usage/prices"): set(),
    ("get", "/v1/turns"): {400, 404},  # 404: this server keeps no list of running turns
    ("post", "/v1/turns/cancel"): {400, 404},
    ("post", "/v1/turns/{turn_id}/cancel"): {400, 404},
    ("post", "/v1/elicitations/{elicitation_id}"): {400, 404},  # 404: no such open question
    ("post", "/v1/mcp/oauth/authorizations"): {400},  # 400: a URL refused, no OAuth there, no records
    ("get", "/v1/mcp/oauth/connections"): {400},
    ("delete", "/v1/mcp/oauth/connections"): {400},
    ("get", "/v1/containers/{container_id}/workspace"): {400, 404},
    ("get", "/v1/containers/{container_id}/workspace/file"): {400, 404},
    # agent memory (api/memory.py): 404 a missing container or a host without memory; 409
    # memory_full; 507 the tenant's storage used up
    ("get", "/v1/memory/{kind}/{owner}"): {400, 404},
    ("post", "/v1/memory/{kind}/{owner}"): {400, 404, 409, 507},
    ("delete", "/v1/memory/{kind}/{owner}"): {400, 404},
    ("get", "/v1/memory/{kind}/{owner}/export"): {400, 404},
    ("get", "/v1/memory/{kind}/{owner}/{memory_id}"): {400, 404},
    ("patch", "/v1/memory/{kind}/{owner}/{memory_id}"): {400, 404, 409, 507},
    ("delete", "/v1/memory/{kind}/{owner}/{memory_id}"): {400, 404},
    ("post", "/v1/resources"): {400, 404, 409},
    ("get", "/v1/resources"): {400},
    ("get", "/v1/resources/resolve"): {400, 404},
    ("post", "/v1/resources/render"): {400, 404},
    ("post", "/v1/resources/tags"): {400, 404},
    ("post", "/v1/resources/search"): {400, 404},
    ("post", "/v1/knowledge/{name}/documents"): {400, 404, 507},  # 507: the tenant's storage account
    ("get", "/v1/knowledge/{name}/documents"): {400, 404},
    ("delete", "/v1/knowledge/{name}/documents/{document_id}"): {400, 404},
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
    ("get", "/v1/tenants/{tenant_id}"): {400, 404},  # 400: a tenant id past its bound
    ("patch", "/v1/tenants/{tenant_id}"): {400, 404, 409},
    ("delete", "/v1/tenants/{tenant_id}"): {400, 404, 409},
    ("get", "/v1/resources/{plural}/{name}"): {400, 404},
    ("put", "/v1/resources/{plural}/{name}"): {400, 404, 409},
    ("delete", "/v1/resources/{plural}/{name}"): {400, 404, 409},
    ("get", "/v1/metrics"): {400, 503},  # bad format or time range; 503: a Logs Insights query timed out
    ("get", "/v1/logs"): {400, 404, 503},  # bad level, cursor or range; no log store; query timeout
    ("get", "/v1/sessions/search"): {400},  # invalid_query, a bad cursor or limit
    ("get", "/v1/sessions/{session_id}/export"): {400, 404},  # 400: export_too_large
    ("post", "/v1/containers/{container_id}/sessions/import"): {400, 409, 507},
    ("post", "/v1/sessions/{session_id}/fork"): {400, 404, 409, 507},
    ("put", "/v1/sessions/{session_id}/title"): {400, 404},
    # 409: session_busy (the image's reject policy); 507: the storage quota; 429 is every route's
    ("post", "/v1/sessions/{session_id}/turns"): {400, 404, 409, 507},
    ("get", "/v1/sessions/{session_id}/events"): {400, 404},  # 400: a Last-Event-ID that is no id
    ("post", "/v1/sessions/{session_id}/interrupt"): {404},
    ("post", "/v1/containers/{container_id}/sessions"): {400, 404},  # a bad model; no such agent
    # schedules (api/schedules.py): 400 also when this host has none; 404 no such schedule or image
    ("post", "/v1/schedules"): {400, 404},
    ("get", "/v1/schedules"): {400},
    ("get", "/v1/schedules/{schedule_id}"): {400, 404},
    ("patch", "/v1/schedules/{schedule_id}"): {400, 404},
    ("delete", "/v1/schedules/{schedule_id}"): {400, 404},
    ("get", "/v1/schedules/{schedule_id}/runs"): {400, 404},
    # webhooks (api/webhooks.py): 400 also when this host has none
    ("post", "/v1/webhooks/endpoints"): {400},
    ("get", "/v1/webhooks/endpoints"): {400},
    ("get", "/v1/webhooks/endpoints/{endpoint_id}"): {400, 404},
    ("delete", "/v1/webhooks/endpoints/{endpoint_id}"): {400, 404},
    ("get", "/v1/webhooks/endpoints/{endpoint_id}/deliveries"): {400, 404},
    ("post", "/v1/webhooks/deliveries/{delivery_id}/replay"): {400, 404},
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
        url = url.replace("{turn_id}", "turn_missing_0000")
        url = url.replace("{session_id}", "sess_missing")
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


def test_the_common_errors_are_documented_with_examples_in_the_error_shape(schema):
    for method, path, op in operations(schema):
        for status in error_statuses(op) & {400, 401, 403, 404, 409, 413, 429}:
            media = op["responses"][str(status)]["content"]["application/json"]
            found = examples_of(media)
            assert found, (method, path, status)
            for example in found:
                fits(schema, media["schema"], example)
                assert ErrorBody.model_validate(example).error.code


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
    """A server with a tenant admin (acme), a platform admin and a workspace file (the tour's)."""
    secure(harness, clock)
    harness.rt.tools = ToolSources()
    harness.rt.sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False)
    acme = {"Authorization": f"Bearer {await new_key(harness.rt, 'acme', 'admin', name='ops')}"}
    platform = {"Authorization": f"Bearer {await new_key(harness.rt, 'platform', 'admin')}"}
    client = await harness.client("acme")
    await harness.rt.sandbox.write("acme", "user-alice", *WORKSPACE_FILE)
    app = create_app(harness.rt)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://avm") as http:
        yield http, acme, platform, client, app.openapi()


async def test_real_answers_have_the_documented_keys_and_fit_the_documented_schema(served, harness):
    """Every route, called as a client would with the documented examples' data (the tour of
    ``tests/api_tour.py``, which also runs on AWS): its answer's status is documented, its
    top-level keys are those of one of its examples, and it validates against the documented
    schema (so neither examples nor models drift from the code)."""
    http, acme, platform, client, schema = served
    callers = {"admin": acme, "platform": platform}
    toured: set[tuple[str, str]] = set()
    steps, answer = tour(), None
    while (step := next_step(steps, answer)) is not None:
        if isinstance(step, Http):
            r = await http.request(
                step.method.upper(), step.url or step.route, headers=callers[step.caller], json=step.body
            )
            check_answer(schema, step, r.status_code, answer := r.json())
            toured.add((step.method, step.route))
        elif isinstance(step, Ws):
            answer = await client.request(step.type, **step.data)
        else:
            harness.model.add(step.reply)
            await harness.run_turns()
            answer = None
    every = {(m, p) for m, p, _ in operations(schema)}
    assert len(toured) >= 44 and toured <= every
