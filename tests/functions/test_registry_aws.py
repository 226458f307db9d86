"""ResourceX compatibility (``/v1/registry/*``) through the Lambda HTTP handler on moto: publish by
upload in both locator grammars, resource, resolve, exists, search with its real total, delete,
an agent definition built on a registry prompt, tenant isolation and bad input. The local twin is
``tests/unit/resources/test_registry.py``."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.functions.aws_stack import Stack, moto_resources

pytestmark = pytest.mark.aws

ASSISTANT = "deepractice.ai/prompts/assistant.prompt@1.0.0"


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push)


def test_the_registry_serves_every_route_on_dynamodb(stack):
    acme = stack.new_key("acme", "admin")
    status, made = stack.http(
        "POST", "/v1/registry/publish", acme, {"locator": ASSISTANT, "content": "Help {{product}} users."}
    )
    assert status == 201 and made["uri"] == "resource://prompts/deepractice.ai/prompts/assistant@1.0.0"
    status, found = stack.http("GET", f"/v1/registry/resource?locator={quote(ASSISTANT)}", acme)
    assert (
        status == 200 and found["manifest"]["type"] == "prompt" and "product" in found["schema"]["properties"]
    )
    status, resolved = stack.http(
        "POST", "/v1/registry/resolve", acme, {"locator": ASSISTANT, "args": {"product": "Acme"}}
    )
    assert (status, resolved["content"]) == (200, "Help Acme users.")

    for i in (1, 2):
        status, _ = stack.http(
            "POST",
            "/v1/registry/link",
            acme,
            {"locator": "settings:stable", "type": "json", "content": {"v": i}},
        )
        assert status == 201
    status, tagged = stack.http(
        "POST", "/v1/registry/resolve", acme, {"locator": "localhost/settings:stable"}
    )
    assert tagged["content"] == {"v": 2}
    status, page = stack.http("GET", "/v1/registry/search?query=&limit=1&offset=1", acme)
    assert status == 200 and page["total"] == 2 and len(page["results"]) == 1
    assert stack.http("GET", "/v1/registry/exists?locator=settings.json%401", acme) == (200, {"exists": True})

    status, deleted = stack.http("POST", "/v1/registry/delete", acme, {"locator": "settings.json@1"})
    assert (status, deleted) == (200, {"deleted": True})
    status, missing = stack.http("POST", "/v1/registry/delete", acme, {"locator": "settings.json@1"})
    assert status == 404 and missing["error"]["code"] == "not_found"
    status, refused = stack.http("POST", "/v1/registry/link", acme, {"folderPath": "/tmp"})
    assert status == 400 and refused["error"]["code"] == "folder_path_unsupported"
    status, bad = stack.http("GET", f"/v1/registry/resource?locator={quote('a;b.text')}", acme)
    assert status == 400 and bad["error"]["code"] == "invalid_locator"


def test_an_agent_image_is_built_from_a_registry_prompt_and_other_tenants_see_nothing(stack):
    acme, other = stack.new_key("acme", "admin"), stack.new_key("other", "admin")
    stack.http(
        "POST", "/v1/registry/publish", acme, {"locator": "team/greeting.prompt@1", "content": "Be kind."}
    )
    agent = {
        "kind": "agent",
        "name": "helper",
        "spec": {"prompt": {"uri": "resource://prompts/team/greeting@1"}},
    }
    assert stack.http("POST", "/v1/resources", acme, agent)[0] == 201
    status, held = stack.http("POST", "/v1/registry/delete", acme, {"locator": "team/greeting.prompt"})
    assert status == 409 and held["error"]["dependents"] == ["resource://agents/helper@1"]

    assert stack.http("GET", "/v1/registry/search", other)[1]["total"] == 0
    status, foreign = stack.http("POST", "/v1/registry/resolve", other, {"locator": "team/greeting.prompt@1"})
    status_absent, absent = stack.http(
        "POST", "/v1/registry/resolve", other, {"locator": "team/nobody.prompt@1"}
    )
    assert status == status_absent == 404
    assert foreign["error"]["message"].replace("greeting", "X") == absent["error"]["message"].replace(
        "nobody", "X"
    )
    assert stack.http("POST", "/v1/registry/delete", other, {"locator": "team/greeting.prompt@1"})[0] == 404
    assert (
        stack.http("POST", "/v1/registry/resolve", acme, {"locator": "team/greeting.prompt@1"})[1]["content"]
        == "Be kind."
    )
