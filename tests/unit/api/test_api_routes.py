"""The HTTP API: bearer keys on every /v1 route, one error shape, key management, budgets, usage."""

from __future__ import annotations

import httpx
import pytest

from agentvm.api.app import create_app
from tests.security_harness import ManualClock, new_key, secure


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def sec(harness, clock):
    return secure(harness, clock)


@pytest.fixture
async def http(harness, sec):
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ROUTES = [
    ("POST", "/v1/auth/keys", {"scopes": ["client"]}),
    ("GET", "/v1/auth/keys", None),
    ("DELETE", "/v1/auth/keys/abcdefghijkl", None),
    ("PUT", "/v1/budgets/tenant", {"daily_tokens": 1}),
    ("GET", "/v1/budgets/tenant", None),
    ("PUT", "/v1/budgets/containers/c1", {"daily_tokens": 1}),
    ("GET", "/v1/budgets/containers/c1", None),
    ("GET", "/v1/usage", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_every_v1_route_needs_a_key_and_answers_401_in_one_shape(http, method, path, body):
    for headers in ({}, bearer("avm_aaaaaaaaaaaa_" + "A" * 43), {"Authorization": "Basic eA=="}):
        r = await http.request(method, path, json=body, headers=headers)
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        assert set(r.json()) == {"error"} and r.json()["error"]["code"] == "unauthorized"
        assert r.json()["error"]["message"]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_client_keys_are_forbidden_on_admin_routes(http, harness, method, path, body):
    r = await http.request(method, path, json=body, headers=bearer(await new_key(harness.rt, "acme")))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


async def test_health_docs_and_openapi_stay_open(http):
    assert (await http.get("/health")).json()["status"] == "ok"
    assert (await http.get("/openapi.json")).status_code == 200
    assert (await http.get("/docs")).status_code == 200
    assert (await http.get("/v1/nope")).json() == {"error": {"code": "not_found", "message": "Not Found"}}


async def test_an_admin_creates_lists_and_revokes_keys_of_its_own_tenant(http, harness):
    admin = bearer(await new_key(harness.rt, "acme", "admin"))
    created = await http.post("/v1/auth/keys", json={"scopes": ["client"], "name": "web"}, headers=admin)
    assert created.status_code == 201
    key, token = created.json()["key"], created.json()["token"]
    assert key["tenantId"] == "acme" and key["name"] == "web" and token.startswith(f"avm_{key['keyId']}_")
    assert (await http.get("/v1/usage", headers=bearer(token))).status_code == 403  # it works: 403, not 401

    listed = (await http.get("/v1/auth/keys", headers=admin)).json()["keys"]
    assert key["keyId"] in [k["keyId"] for k in listed]
    flat = str(listed)
    assert token not in flat and "secretHash" not in flat and "secretId" not in flat

    revoked = await http.delete(f"/v1/auth/keys/{key['keyId']}", headers=admin)
    assert revoked.status_code == 200 and revoked.json()["key"]["revokedAt"] is not None
    assert (await http.get("/v1/usage", headers=bearer(token))).status_code == 401  # at once, same process


async def test_bad_bodies_answer_400_bad_request_in_the_same_shape(http, harness):
    admin = bearer(await new_key(harness.rt, "acme", "admin"))
    for path, body in [
        ("/v1/auth/keys", {"scopes": ["root"]}),
        ("/v1/auth/keys", {"scopes": []}),
        ("/v1/budgets/tenant", {"daily_tokens": -1}),
        ("/v1/budgets/tenant", {"daily_tokens": "many"}),
        ("/v1/budgets/tenant", {"weekly_tokens": 5}),
    ]:
        r = await http.request("POST" if "keys" in path else "PUT", path, json=body, headers=admin)
        assert r.status_code == 400, (path, body)
        assert r.json()["error"]["code"] == "bad_request"


async def test_budgets_are_set_and_read_per_tenant_and_per_container(http, harness, sec):
    admin = bearer(await new_key(harness.rt, "acme", "admin"))
    put = await http.put(
        "/v1/budgets/tenant", json={"daily_tokens": 1000, "monthly_tokens": None}, headers=admin
    )
    assert put.json()["dailyTokens"] == 1000 and put.json()["monthlyTokens"] is None
    await http.put("/v1/budgets/containers/user-alice", json={"monthly_tokens": 50}, headers=admin)
    await sec.budgets.record("acme", "user-alice", 7)
    got = (await http.get("/v1/budgets/containers/user-alice", headers=admin)).json()
    assert (got["dailyTokens"], got["monthlyTokens"]) == (None, 50)
    assert got["usage"]["day"] == 7 and got["usage"]["month"] == 7 and got["usage"]["monthResetAt"] > 0
    assert (await http.get("/v1/budgets/tenant", headers=admin)).json()["usage"]["month"] == 7
    assert await sec.budgets.store.get_budget("acme", "user-alice") is not None


async def test_usage_lists_the_tenants_turns_with_totals(http, harness):
    admin = bearer(await new_key(harness.rt, "tenant-a", "admin"))
    c = await harness.client("tenant-a")
    img = (await c.request("image_create", containerId="u1", config={"name": "A"}))["record"]
    harness.model.add("x y")
    await c.request("message_send", imageId=img["imageId"], content="hello")
    await harness.run_turns()
    body = (await http.get("/v1/usage", params={"containerId": "u1"}, headers=admin)).json()
    assert body["totals"] == {
        "turns": 1,
        "inputTokens": 1,
        "outputTokens": 2,
        "totalTokens": 3,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
        "cacheSavings": 0.0,
        "savedInputTokens": 0,
        "savedOutputTokens": 0,
        "replyCacheSavings": 0.0,
    }
    assert body["records"][0]["imageId"] == img["imageId"]
    assert body["records"][0]["cacheSavings"] is None  # the echo model has no price
    assert body["records"][0]["replyCacheSavings"] is None
    assert [s["sessionId"] for s in body["sessions"]] == [img["sessionId"]]
    assert (await http.get("/v1/usage", params={"containerId": "u2"}, headers=admin)).json()["totals"][
        "turns"
    ] == 0


async def test_usage_records_say_why_a_turns_prompt_prefix_changed(http, harness):
    from agentvm.records import UsageRecord

    admin = bearer(await new_key(harness.rt, "tenant-a", "admin"))
    ids = {
        "tenantId": "tenant-a",
        "containerId": "u1",
        "imageId": "img",
        "sessionId": "ses",
        "model": "echo/echo",
    }
    await harness.store.put_usage(UsageRecord(turnId="t1", **ids, createdAt=1, prefixBreak="window"))
    await harness.store.put_usage(UsageRecord(turnId="t2", **ids, createdAt=2))
    body = (await http.get("/v1/usage", params={"containerId": "u1"}, headers=admin)).json()
    assert sorted((r["turnId"], r["prefixBreak"]) for r in body["records"]) == [
        ("t1", "window"),
        ("t2", None),
    ]


async def test_json_is_camel_case_and_the_old_snake_case_names_are_still_accepted(http, harness):
    admin = bearer(await new_key(harness.rt, "acme", "admin"))
    for body in ({"dailyTokens": 7, "monthlyTokens": 70}, {"daily_tokens": 7, "monthly_tokens": 70}):
        put = await http.put("/v1/budgets/tenant", json=body, headers=admin)
        assert put.status_code == 200, put.text
        assert {k: put.json()[k] for k in ("dailyTokens", "monthlyTokens")} == {
            "dailyTokens": 7,
            "monthlyTokens": 70,
        }
        assert "daily_tokens" not in put.json()
    for body in ({"rateLimitPerMinute": 5}, {"rate_limit_per_minute": 5}):
        made = await http.post("/v1/auth/keys", json={"scopes": ["client"], **body}, headers=admin)
        assert made.status_code == 201, made.text
        assert made.json()["key"]["rateLimitPerMinute"] == 5
    unknown = await http.post("/v1/auth/keys", json={"rateLimit": 5}, headers=admin)
    assert unknown.status_code == 400


async def test_http_requests_count_against_the_keys_rate_limit(http, harness, clock):
    token = await new_key(harness.rt, "acme", "admin", rate_limit_per_minute=2)
    harness.rt.clock = clock  # Retry-After is computed on the runtime's clock
    clock.ms = (clock.ms // 60_000) * 60_000 + 30_000
    assert [(await http.get("/v1/auth/keys", headers=bearer(token))).status_code for _ in range(3)] == [
        200,
        200,
        429,
    ]
    limited = await http.get("/v1/auth/keys", headers=bearer(token))
    assert limited.json()["error"]["code"] == "rate_limited" and limited.json()["error"]["limit"] == 2
    assert limited.json()["error"]["resetAt"] == (clock.ms // 60_000 + 1) * 60_000
    assert limited.headers["retry-after"] == "30"


async def test_open_mode_treats_every_caller_as_the_open_tenant(harness):
    app = create_app(harness.rt, open_tenant="local")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://avm") as http:
        assert (await http.get("/v1/usage")).json()["totals"]["turns"] == 0
        assert (await http.post("/v1/auth/keys", json={})).json()["error"]["code"] == "bad_request"


async def test_without_an_authenticator_or_open_tenant_every_v1_route_fails_closed(harness):
    app = create_app(harness.rt)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://avm") as http:
        r = await http.get("/v1/usage", headers=bearer("avm_aaaaaaaaaaaa_" + "A" * 43))
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


async def test_a_failing_route_answers_500_internal_error_without_details(harness, sec, monkeypatch):
    async def broken(*_args):
        raise RuntimeError("database file is locked at /secret/path")

    monkeypatch.setattr(harness.store, "list_usage", broken)
    app = create_app(harness.rt)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as http:
        r = await http.get("/v1/usage", headers=bearer(await new_key(harness.rt, "acme", "admin")))
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "internal_error", "message": "internal error"}}


async def test_an_oversized_body_is_refused_before_it_is_read_even_without_a_key(http, harness):
    limit = harness.rt.turns.max_body_bytes
    declared = await http.post(
        "/v1/auth/keys", content=b"x" * (limit + 1), headers={"Content-Type": "application/json"}
    )
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "payload_too_large"

    async def chunks():  # no Content-Length: counted as it arrives, cut at the limit
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536

    streamed = await http.post(
        "/v1/auth/keys", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    # a body within the limit is still answered as before (401: no key)
    assert (await http.post("/v1/auth/keys", json={"scopes": ["client"]})).status_code == 401


@pytest.mark.parametrize(
    ("limit", "status"), [(0, 400), (False, 400), (True, 400), ("5", 400), (10**6, 403), (30, 201)]
)
async def test_a_tenant_admin_cannot_mint_an_unlimited_key(http, harness, limit, status):
    token = await new_key(harness.rt, "acme", "admin")
    response = await http.post(
        "/v1/auth/keys", json={"scopes": ["client"], "rate_limit_per_minute": limit}, headers=bearer(token)
    )
    assert response.status_code == status, response.text
