"""The tenant registry through the Lambda HTTP handler on moto: CRUD and the Deepractice aliases
for a platform admin, 403 for a tenant admin, and deletion revoking the tenant's keys (the
authorizer of the WebSocket API refuses them too)."""

from __future__ import annotations

import pytest

from tests.functions.aws_stack import Stack, moto_resources

pytestmark = pytest.mark.aws


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def test_tenants_are_managed_by_platform_admins_and_deletion_revokes_keys(stack):
    platform = stack.new_key("platform", "admin")
    acme = stack.new_key("acme", "admin")
    status, body = stack.http("POST", "/v1/tenants", acme, {"name": "Acme"})
    assert status == 403
    status, made = stack.http("POST", "/v1/tenants", platform, {"name": "Acme", "tenantId": "acme"})
    assert status == 201 and made["tenantId"] == "acme"
    status, listed = stack.http("GET", "/v1/tenants/list", platform)
    assert status == 200 and [t["tenantId"] for t in listed] == ["acme"]
    status, got = stack.http("POST", "/v1/tenants/get", platform, {"tenantId": "acme"})
    assert got["name"] == "Acme"
    status, changed = stack.http("PATCH", "/v1/tenants/acme", platform, {"description": "d"})
    assert changed["description"] == "d"
    status, _ = stack.http("PUT", "/v1/budgets/tenant", acme, {"daily_tokens": 5})
    assert status == 200
    stack.http("POST", "/v1/resources", acme, {"kind": "prompt", "name": "p", "spec": {"template": "x"}})

    status, gone = stack.http("DELETE", "/v1/tenants/acme", platform)
    assert status == 200 and gone["revokedKeys"] == 1 and gone["deletedResourceVersions"] == 1
    status, _ = stack.http("GET", "/v1/usage", acme)
    assert status == 401
    answer = stack.authorize(headers={"Authorization": f"Bearer {acme}"})
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    status, missing = stack.http("GET", "/v1/tenants/acme", platform)
    assert status == 404
    status, refused = stack.http("DELETE", "/v1/tenants/platform", platform)
    assert status in (404, 409)
