"""The tenant registry (``/v1/tenants``) on the local wiring with real keys: platform admins only,
CRUD with paging, Deepractice's RPC aliases, deletion that revokes keys and removes budgets,
resources and settings, the platform tenant undeletable, and bad input with stable codes."""

from __future__ import annotations

from contextlib import asynccontextmanager

import httpx
import pytest

from agentvm.api.app import create_app
from tests.harness import Harness
from tests.security_harness import ManualClock, new_key, secure


@pytest.fixture
async def world(tmp_path):
    h = Harness(tmp_path)
    secure(h, ManualClock())
    h.tokens = {t: await new_key(h.rt, t, "admin") for t in ("platform", "acme")}

    @asynccontextmanager
    async def http(token: str):
        transport = httpx.ASGITransport(app=create_app(h.rt))
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
            yield client

    h.http = http
    yield h
    h.queue.close()
    h.store.close()


async def test_platform_admins_create_list_get_update_and_page_tenants(world):
    async with world.http(world.tokens["platform"]) as http:
        made = await http.post("/v1/tenants", json={"name": "Globex", "description": "d"})
        assert made.status_code == 201
        tenant = made.json()
        assert tenant["tenantId"].startswith("tenant_") and tenant["name"] == "Globex"
        named = (await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})).json()
        assert named["tenantId"] == "acme" and "description" not in named
        again = await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        assert again.status_code == 409
        assert (await http.get(f"/v1/tenants/{tenant['tenantId']}")).json() == tenant
        changed = (await http.patch("/v1/tenants/acme", json={"description": "the first"})).json()
        assert changed["description"] == "the first" and changed["name"] == "Acme"
        page = (await http.get("/v1/tenants?limit=1")).json()
        assert [t["name"] for t in page["tenants"]] == ["Globex"] and page["next"] == 1
        rest = (await http.get("/v1/tenants?limit=1&cursor=1")).json()
        assert [t["tenantId"] for t in rest["tenants"]] == ["acme"] and rest["next"] is None


async def test_deepractice_aliases_answer_their_shapes(world):
    async with world.http(world.tokens["platform"]) as http:
        assert (await http.get("/v1/tenants/list")).json() == []
        created = await http.post("/v1/tenants/create", json={"name": "Acme"})
        assert created.status_code == 201
        tid = created.json()["tenantId"]
        assert (await http.post("/v1/tenants/get", json={"tenantId": tid})).json()["name"] == "Acme"
        updated = (await http.post("/v1/tenants/update", json={"tenantId": tid, "name": "Acme 2"})).json()
        assert updated["name"] == "Acme 2"
        assert [t["tenantId"] for t in (await http.get("/v1/tenants/list")).json()] == [tid]
        deleted = (await http.post("/v1/tenants/delete", json={"tenantId": tid})).json()
        assert deleted["deleted"] is True
        missing = await http.post("/v1/tenants/get", json={"tenantId": tid})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert (await http.post("/v1/tenants/delete", json={"tenantId": tid})).status_code == 404


async def test_deleting_a_tenant_revokes_its_keys_and_removes_its_budget_resources_and_settings(world):
    acme = world.tokens["acme"]
    async with world.http(acme) as http:
        await http.put("/v1/budgets/tenant", json={"daily_tokens": 10})
        await http.post("/v1/resources", json={"kind": "prompt", "name": "p", "spec": {"template": "x"}})
        spec = {"prompt": {"uri": "resource://prompts/p@1"}}
        await http.post("/v1/resources", json={"kind": "agent", "name": "a", "spec": spec})
        await http.put("/v1/config/llm.maxOutputTokens", json={"value": 9})
    async with world.http(world.tokens["platform"]) as http:
        await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        gone = (await http.delete("/v1/tenants/acme")).json()
        assert gone == {
            "deleted": True,
            "revokedKeys": 1,
            "deletedResourceVersions": 2,
            "conversations": "kept",
        }
        assert (await http.get("/v1/tenants/acme")).status_code == 404
    async with world.http(acme) as http:
        assert (await http.get("/v1/resources")).status_code == 401  # the key no longer works
    assert await world.rt.resources.store.list_heads("acme") == []
    assert (await world.rt.budgets.store.get_budget("acme", None)).dailyTokens is None
    assert (await world.rt.config.store.get_values("tenant:acme")).values == {}


async def test_only_platform_admins_manage_tenants_and_the_platform_tenant_stays(world):
    async with world.http(world.tokens["platform"]) as http:
        await http.post("/v1/tenants", json={"name": "Platform", "tenantId": "platform"})
        refused = await http.delete("/v1/tenants/platform")
        assert refused.status_code == 409 and "platform tenant" in refused.json()["error"]["message"]
    async with world.http(world.tokens["acme"]) as http:
        for method, path, body in [
            ("GET", "/v1/tenants", None),
            ("POST", "/v1/tenants", {"name": "x"}),
            ("GET", "/v1/tenants/platform", None),
            ("DELETE", "/v1/tenants/platform", None),
            ("GET", "/v1/tenants/list", None),
            ("POST", "/v1/tenants/get", {"tenantId": "platform"}),
        ]:
            answer = await http.request(method, path, json=body)
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden", path


@pytest.mark.parametrize(
    ("method", "path", "body", "says"),
    [
        ("POST", "/v1/tenants", {"name": ""}, "name"),
        ("POST", "/v1/tenants", {}, "name"),
        ("POST", "/v1/tenants", {"name": "x", "tenantId": "../etc"}, "tenantId"),
        ("POST", "/v1/tenants", {"name": "x", "plan": "gold"}, "plan"),
        ("PATCH", "/v1/tenants/acme", {"name": None}, "name"),
        ("POST", "/v1/tenants/get", {}, "tenantId"),
    ],
)
async def test_bad_input_is_refused_with_the_field_named_and_nothing_written(world, method, path, body, says):
    async with world.http(world.tokens["platform"]) as http:
        await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        answer = await http.request(method, path, json=body)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "bad_request"
        assert says in answer.json()["error"]["message"]
        assert [t["tenantId"] for t in (await http.get("/v1/tenants/list")).json()] == ["acme"]
        assert (await http.get("/v1/tenants/acme")).json()["name"] == "Acme"
