"""Booleans are not numbers (issue 25: "budgets accept false as 0"): every integer a request sets
is strict, on the HTTP API and on the WebSocket, so ``false`` / ``true`` are refused with a 400 or
``bad_request`` instead of being taken for 0 or 1."""

from __future__ import annotations

import httpx
import pytest

from agentvm.api.app import create_app
from tests.security_harness import ManualClock, new_key, secure


@pytest.fixture
async def admin_http(harness):
    secure(harness, ManualClock())
    token = await new_key(harness.rt, "tenant-a", "admin")
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
        yield client


@pytest.mark.parametrize("path", ["/v1/budgets/tenant", "/v1/budgets/containers/user-alice"])
@pytest.mark.parametrize("field", ["dailyTokens", "monthlyTokens"])
@pytest.mark.parametrize("value", [False, True, "5", 1.5, 10**16])
async def test_a_budget_that_is_not_a_whole_number_in_range_is_refused(admin_http, path, field, value):
    refused = await admin_http.put(path, json={field: value})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "bad_request"
    # nothing was set: the budget still has no limits
    assert (await admin_http.get(path)).json()[field] is None


async def test_a_budget_of_zero_tokens_is_still_a_budget(admin_http):
    accepted = await admin_http.put("/v1/budgets/tenant", json={"dailyTokens": 0, "monthlyTokens": None})
    assert accepted.status_code == 200, accepted.text
    assert (await admin_http.get("/v1/budgets/tenant")).json()["dailyTokens"] == 0


async def test_a_container_id_past_the_gateways_bound_is_refused_on_the_budget_routes(admin_http):
    assert (await admin_http.get("/v1/budgets/containers/" + "c" * 129)).status_code == 400


@pytest.mark.parametrize("value", [False, True])
async def test_image_max_steps_refuses_booleans_on_the_websocket(harness, value):
    c = await harness.client()
    refused = await c.request("image_create", containerId="u", config={"name": "A", "maxSteps": value})
    assert refused["code"] == "bad_request"
