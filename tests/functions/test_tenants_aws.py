"""The tenant registry through the Lambda HTTP handler on moto: every route (ours and the
Deepractice aliases) for a platform admin, 403 for anyone else, bad input refused, and deletion:
the tenant's keys revoked (the WebSocket authorizer denies them too), its budgets and resources
deleted, its conversations kept and the tombstone saying so (no ``purgedAt``). The local twin is
``tests/unit/security/test_tenants.py``."""

from __future__ import annotations

import pytest

from agentvm.hosts.aws import run_sync
from tests.functions.aws_stack import Stack, moto_resources

pytestmark = pytest.mark.aws

CONN = "conn-acme"


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def test_every_tenant_route_serves_a_platform_admin(stack):
    platform = stack.new_key("platform", "admin")
    status, made = stack.http("POST", "/v1/tenants", platform, {"name": "Acme", "tenantId": "acme"})
    assert status == 201 and made["status"] == "active"
    status, aliased = stack.http(
        "POST", "/v1/tenants/create", platform, {"name": "Globex", "description": "d"}
    )
    assert status == 201 and aliased["tenantId"].startswith("tenant_")
    status, again = stack.http("POST", "/v1/tenants", platform, {"name": "Acme", "tenantId": "acme"})
    assert status == 409 and again["error"]["code"] == "conflict"

    status, page = stack.http("GET", "/v1/tenants?limit=1", platform)
    assert status == 200 and page == {"tenants": [made], "next": "acme"}
    status, rest = stack.http("GET", "/v1/tenants?limit=1&cursor=acme", platform)
    assert rest == {"tenants": [aliased], "next": None}
    status, listed = stack.http("GET", "/v1/tenants/list", platform)
    assert status == 200 and listed == [made, aliased]
    assert stack.http("GET", "/v1/tenants/acme", platform) == (200, made)
    assert stack.http("POST", "/v1/tenants/get", platform, {"tenantId": "acme"}) == (200, made)

    stack.clock.advance(2)
    status, changed = stack.http("PATCH", "/v1/tenants/acme", platform, {"description": "first"})
    assert status == 200 and changed["description"] == "first" and changed["updatedAt"] > made["updatedAt"]
    status, renamed = stack.http("POST", "/v1/tenants/update", platform, {"tenantId": "acme", "name": "A"})
    assert status == 200 and (renamed["name"], renamed["description"]) == ("A", "first")

    status, gone = stack.http("POST", "/v1/tenants/delete", platform, {"tenantId": aliased["tenantId"]})
    assert status == 200 and gone["deleted"] is True and gone["conversations"] == "kept"
    status, gone = stack.http("DELETE", "/v1/tenants/acme", platform)
    assert status == 200 and gone["tenantId"] == "acme"
    assert stack.http("GET", "/v1/tenants/list", platform) == (200, [])
    status, missing = stack.http("DELETE", "/v1/tenants/acme", platform)
    assert status == 404 and missing["error"]["code"] == "not_found"
    status, refused = stack.http("DELETE", "/v1/tenants/platform", platform)
    assert status == 409 and "platform tenant" in refused["error"]["message"]
    status, bad = stack.http("POST", "/v1/tenants", platform, {"name": "", "tenantId": "x"})
    assert status == 400 and bad["error"]["code"] == "bad_request" and "name" in bad["error"]["message"]


def test_only_platform_admins_reach_the_registry(stack):
    platform = stack.new_key("platform", "admin")
    stack.http("POST", "/v1/tenants", platform, {"name": "Acme", "tenantId": "acme"})
    for token in (stack.new_key("acme", "admin"), stack.new_key("platform", "client")):
        for method, path, body in [
            ("POST", "/v1/tenants", {"name": "x"}),
            ("GET", "/v1/tenants", None),
            ("GET", "/v1/tenants/acme", None),
            ("PATCH", "/v1/tenants/acme", {"name": "x"}),
            ("DELETE", "/v1/tenants/acme", None),
            ("POST", "/v1/tenants/create", {"name": "x"}),
            ("POST", "/v1/tenants/get", {"tenantId": "acme"}),
            ("GET", "/v1/tenants/list", None),
            ("POST", "/v1/tenants/update", {"tenantId": "acme", "name": "x"}),
            ("POST", "/v1/tenants/delete", {"tenantId": "acme"}),
        ]:
            status, answer = stack.http(method, path, token, body)
            assert (status, answer["error"]["code"]) == (403, "forbidden"), path
    assert stack.http("GET", "/v1/tenants/acme", platform)[1]["name"] == "Acme"


def test_deleting_a_tenant_revokes_its_keys_and_keeps_its_conversations_marked(stack):
    platform = stack.new_key("platform", "admin")
    acme = stack.new_key("acme", "admin")
    stack.connect(CONN, headers={"Authorization": f"Bearer {acme}"})
    image = stack.request(CONN, "image_create", "r1", containerId="user-alice", config={"name": "A"})[
        "record"
    ]
    stack.model.add("a private reply")
    stack.request(CONN, "message_send", "r2", imageId=image["imageId"], content="a private question")
    stack.run_turns()
    assert stack.http("PUT", "/v1/budgets/tenant", acme, {"daily_tokens": 5})[0] == 200
    assert stack.http("PUT", "/v1/budgets/containers/user-alice", acme, {"daily_tokens": 1})[0] == 200
    prompt = {"kind": "prompt", "name": "p", "spec": {"template": "x"}}
    assert stack.http("POST", "/v1/resources", acme, prompt)[0] == 201
    stack.http("POST", "/v1/tenants", platform, {"name": "Acme", "tenantId": "acme"})
    rt = stack.runtimes["http_api"]
    for tenant in ("acme", "globex"):  # sealed OAuth tokens of a remote MCP server
        run_sync(rt.mcp_oauth.put(tenant, f"tokens:{tenant}", "sealed"))

    status, gone = stack.http("DELETE", "/v1/tenants/acme", platform)
    assert status == 200
    assert gone == {
        "deleted": True,
        "tenantId": "acme",
        "revokedKeys": 1,
        "deletedBudgets": 2,
        "deletedResourceVersions": 1,
        "removedSettings": 0,
        "cancelledToolCalls": 0,
        "conversations": "kept",
    }
    assert stack.http("GET", "/v1/usage", acme)[0] == 401
    stack.clock.advance(61)  # the authorizer (another function) cached the key: AVM_KEY_CACHE_S <= 60
    answer = stack.authorize(headers={"Authorization": f"Bearer {acme}"})
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    status, tombstones = stack.http("GET", "/v1/tenants?status=deleted", platform)
    [tombstone] = tombstones["tenants"]
    assert tombstone["status"] == "deleted" and "purgedAt" not in tombstone  # kept: to be purged
    status, reused = stack.http("POST", "/v1/tenants", platform, {"name": "Acme", "tenantId": "acme"})
    assert status == 409

    assert run_sync(rt.resources.store.list_heads("acme")) == []
    assert run_sync(rt.mcp_oauth.get("acme", "tokens:acme")) is None  # a Query of gsi1, no scan
    assert run_sync(rt.mcp_oauth.get("globex", "tokens:globex")) == "sealed"
    assert run_sync(rt.budgets.store.get_budget("acme", "user-alice")) is None
    [kept] = run_sync(rt.store.list_images("acme"))  # unreachable: no key of acme works
    assert run_sync(rt.store.list_messages(kept.sessionId))
