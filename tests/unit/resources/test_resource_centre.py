"""The resource centre over HTTP (``/v1/resources``) on the local wiring: versions, discovery,
resolution with the closure pinned, prompt rendering, dependencies, deletion rules, platform
resources, and bad input answered with stable codes."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from agentvm.api.app import create_app
from tests.harness import Harness
from tests.security_harness import ManualClock, new_key, secure

PROMPT = {
    "kind": "prompt",
    "name": "support/greeting",
    "description": "How the support agent greets",
    "spec": {"template": "You help {{product}} users.", "variables": {"product": {"type": "string"}}},
}
TOOL = {"kind": "tool", "name": "calc", "spec": {"tool": {"type": "builtin", "name": "calculator"}}}


def agent(prompt_uri: str = "resource://prompts/support/greeting@1", **extra: Any) -> dict[str, Any]:
    spec = {
        "prompt": {"uri": prompt_uri, "arguments": {"product": "Acme"}},
        "tools": ["resource://tools/calc"],
        **extra,
    }
    return {"kind": "agent", "name": "helper", "spec": spec}


@pytest.fixture
async def world(tmp_path):
    h = Harness(tmp_path)
    secure(h, ManualClock())
    tokens = {t: await new_key(h.rt, t, "admin") for t in ("acme", "other", "platform")}
    tokens["acme-client"] = await new_key(h.rt, "acme", "client")

    @asynccontextmanager
    async def http(who: str = "acme"):
        transport = httpx.ASGITransport(app=create_app(h.rt))
        headers = {"Authorization": f"Bearer {tokens[who]}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
            yield client

    return http


async def test_versions_are_immutable_and_numbered_in_order(world):
    async with world() as http:
        first = await http.post("/v1/resources", json=PROMPT)
        assert first.status_code == 201 and first.json()["resource"]["version"] == "1"
        changed = {**PROMPT["spec"], "template": "You help {{product}} users. Be brief."}
        second = await http.put(
            "/v1/resources/prompts/support/greeting", json={"spec": changed, "tags": ["stable"]}
        )
        assert second.json()["resource"]["uri"] == "resource://prompts/support/greeting@2"
        semver = await http.put(
            "/v1/resources/prompts/support/greeting", json={"spec": changed, "version": "3.0.0"}
        )
        assert semver.status_code == 201
        again = await http.put(
            "/v1/resources/prompts/support/greeting", json={"spec": changed, "version": "3.0.0"}
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "version_exists"

        head = (await http.get("/v1/resources/prompts/support/greeting")).json()
        assert head["resource"]["latest"] == "3.0.0" and head["resource"]["tags"] == {"stable": "2"}
        assert [v["version"] for v in head["versions"]] == ["1", "2", "3.0.0"]
        spec = (await http.get("/v1/resources/prompts/support/greeting@1")).json()["resource"]["spec"]
        assert spec["template"] == PROMPT["spec"]["template"] and spec["variables"]["product"]["required"]
        stable = (await http.get("/v1/resources/prompts/support/greeting@stable")).json()["resource"]
        assert stable["version"] == "2"


async def test_discovery_filters_and_pages(world):
    async with world() as http:
        await http.post("/v1/resources", json=PROMPT)
        await http.post("/v1/resources", json={**PROMPT, "name": "support/farewell", "tags": ["stable"]})
        await http.post("/v1/resources", json=TOOL)
        listed = (await http.get("/v1/resources")).json()
        assert [r["uri"] for r in listed["resources"]] == [
            "resource://prompts/support/farewell",
            "resource://prompts/support/greeting",
            "resource://tools/calc",
        ]
        assert [r["name"] for r in (await http.get("/v1/resources?kind=tool")).json()["resources"]] == [
            "calc"
        ]
        assert len((await http.get("/v1/resources?prefix=support/")).json()["resources"]) == 2
        assert [r["name"] for r in (await http.get("/v1/resources?tag=stable")).json()["resources"]] == [
            "support/farewell"
        ]
        assert len((await http.get("/v1/resources?q=GREETS")).json()["resources"]) == 2  # the description
        page = (await http.get("/v1/resources?limit=2")).json()
        assert len(page["resources"]) == 2 and page["next"] == 2
        rest = (await http.get(f"/v1/resources?limit=2&cursor={page['next']}")).json()
        assert [r["name"] for r in rest["resources"]] == ["calc"] and rest["next"] is None


async def test_resolve_pins_the_closure_and_render_checks_arguments(world):
    async with world() as http:
        await http.post("/v1/resources", json=PROMPT)
        await http.post("/v1/resources", json=TOOL)
        assert (await http.post("/v1/resources", json=agent())).status_code == 201
        resolved = (
            await http.get("/v1/resources/resolve", params={"uri": "resource://agents/helper"})
        ).json()
        assert resolved["resource"]["uri"] == "resource://agents/helper@1"
        assert {k: v["uri"] for k, v in resolved["dependencies"].items()} == {
            "resource://prompts/support/greeting@1": "resource://prompts/support/greeting@1",
            "resource://tools/calc@latest": "resource://tools/calc@1",
        }
        uri = "resource://prompts/support/greeting"
        ok = await http.post("/v1/resources/render", json={"uri": uri, "arguments": {"product": "Acme"}})
        assert ok.json() == {"uri": uri + "@1", "text": "You help Acme users."}
        for arguments, field in [({}, "product"), ({"product": 3}, "product"), ({"x": "y"}, "x")]:
            bad = await http.post("/v1/resources/render", json={"uri": uri, "arguments": arguments})
            assert bad.status_code == 400 and f"arguments.{field}" in bad.json()["error"]["message"]


async def test_dependencies_are_checked_at_publish_and_guard_deletion(world):
    async with world() as http:
        missing = await http.post("/v1/resources", json=agent())
        assert missing.status_code == 400 and missing.json()["error"]["code"] == "missing_dependency"
        await http.post("/v1/resources", json=PROMPT)
        await http.post("/v1/resources", json=TOOL)
        await http.post("/v1/resources", json=agent())
        blocked = await http.delete("/v1/resources/prompts/support/greeting@1")
        assert blocked.status_code == 409
        assert blocked.json()["error"]["code"] == "resource_in_use"
        assert blocked.json()["error"]["dependents"] == ["resource://agents/helper@1"]
        last_tool = await http.delete("/v1/resources/tools/calc")  # the agent uses its latest
        assert last_tool.status_code == 409
        assert (await http.delete("/v1/resources/agents/helper")).json() == {
            "deleted": ["resource://agents/helper@1"]
        }
        assert (await http.delete("/v1/resources/prompts/support/greeting@1")).status_code == 200
        assert (await http.get("/v1/resources/prompts/support/greeting")).status_code == 404


async def test_a_tag_pointing_at_a_version_keeps_it_until_moved(world):
    async with world() as http:
        await http.post("/v1/resources", json={**PROMPT, "tags": ["stable"]})
        await http.put("/v1/resources/prompts/support/greeting", json={"spec": PROMPT["spec"]})
        held = await http.delete("/v1/resources/prompts/support/greeting@1")
        assert held.status_code == 409 and held.json()["error"]["dependents"] == ["tag stable"]
        moved = await http.post(
            "/v1/resources/tags", json={"uri": "resource://prompts/support/greeting@2", "tag": "stable"}
        )
        assert moved.json()["resource"]["tags"] == {"stable": "2"}
        assert (await http.delete("/v1/resources/prompts/support/greeting@1")).status_code == 200
        head = (await http.get("/v1/resources/prompts/support/greeting")).json()
        assert head["resource"]["latest"] == "2" and head["resource"]["versions"] == 1


async def test_an_agent_cannot_depend_on_itself(world):
    async with world() as http:
        await http.post("/v1/resources", json=PROMPT)
        await http.post("/v1/resources", json=TOOL)
        await http.post("/v1/resources", json=agent())
        # An agent's references are prompts, tools, sandboxes and knowledge: none can reach an agent,
        # so the only cycle an agent can write is one through a URI of the wrong kind: refused as such.
        looped = await http.put(
            "/v1/resources/agents/helper", json={"spec": {"tools": ["resource://agents/helper"]}}
        )
        assert looped.status_code == 400 and looped.json()["error"]["code"] == "invalid_uri"


async def test_platform_resources_are_readable_by_every_tenant_and_tenants_see_only_their_own(world):
    async with world("platform") as platform:
        await platform.post("/v1/resources", json={**PROMPT, "name": "house-style"})
    async with world("acme") as acme:
        await acme.post("/v1/resources", json=PROMPT)
        shared = (await acme.get("/v1/resources/prompts/house-style")).json()["resource"]
        assert shared["platform"] is True
        await acme.post("/v1/resources", json=TOOL)
        uses_shared = agent("resource://prompts/house-style@1")
        assert (await acme.post("/v1/resources", json=uses_shared)).status_code == 201
    async with world("platform") as platform:
        held = await platform.delete("/v1/resources/prompts/house-style")
        assert held.status_code == 409 and held.json()["error"]["dependents"] == [
            "a resource of another tenant"
        ]
    async with world("other") as other:
        names = [r["name"] for r in (await other.get("/v1/resources")).json()["resources"]]
        assert names == ["house-style"]  # the platform's, never acme's
        assert (await other.get("/v1/resources/prompts/support/greeting")).status_code == 404
        assert (await other.post("/v1/resources", json={**PROMPT, "name": "house-style"})).status_code == 201
        own = (await other.get("/v1/resources/prompts/house-style")).json()["resource"]
        assert own["platform"] is False  # its own shadows the platform's


async def test_clients_read_admins_write(world):
    async with world() as admin:
        await admin.post("/v1/resources", json=PROMPT)
    async with world("acme-client") as client:
        assert (await client.get("/v1/resources/prompts/support/greeting")).status_code == 200
        assert (await client.post("/v1/resources", json=TOOL)).status_code == 403
        assert (await client.delete("/v1/resources/prompts/support/greeting")).status_code == 403


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({**PROMPT, "kind": "widget"}, "invalid_resource", "unknown kind"),
        ({**PROMPT, "name": "../etc"}, "invalid_resource", "name"),
        ({**PROMPT, "version": "v1"}, "invalid_resource", "version"),
        ({**PROMPT, "tags": ["latest"]}, "invalid_resource", "tag"),
        ({**PROMPT, "spec": {"template": "Hi {{who}}"}}, "invalid_resource", "{{who}} is not declared"),
        (
            {**PROMPT, "spec": {"template": "x", "variables": {"a": {"type": "date"}}}},
            "invalid_resource",
            "spec.variables.a.type",
        ),
        ({**TOOL, "spec": {}}, "invalid_resource", "exactly one"),
        (
            {**TOOL, "spec": {"tool": {"type": "builtin", "name": "rm_rf"}}},
            "invalid_resource",
            "unknown built-in",
        ),
        (
            {"kind": "knowledge", "name": "k", "spec": {"documents": [{"text": "x" * 300_000}]}},
            "invalid_resource",
            "bytes of text",
        ),
        (agent("prompts/x"), "invalid_uri", "not a resource URI"),
        (agent("resource://prompts/x@"), "invalid_uri", "nothing after '@'"),
    ],
)
async def test_bad_input_is_refused_with_a_stable_code_and_nothing_is_written(world, body, code, words):
    async with world() as http:
        r = await http.post("/v1/resources", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == code and words in r.json()["error"]["message"], r.text
        assert (await http.get("/v1/resources")).json()["resources"] == []


async def test_bad_uris_and_kinds_in_the_path(world):
    async with world() as http:
        assert (await http.get("/v1/resources/widgets/x")).status_code == 404
        r = await http.get("/v1/resources/resolve", params={"uri": "http://x"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_uri"
        assert (
            await http.get("/v1/resources/resolve", params={"uri": "resource://prompts/none"})
        ).status_code == 404
        assert (await http.delete("/v1/resources/prompts/x@stable")).status_code == 400


async def test_a_cycle_in_stored_versions_is_answered_dependency_cycle_not_a_crash(harness):
    """Publishing cannot write a cycle today (only agents refer, and never to agents), so the
    resolver's guard is checked on versions written straight to the store, as a kind that refers
    to its own kind could write them: a 400 ``dependency_cycle`` naming the loop, not a recursion."""
    from agentvm.records import ResourceHead, ResourceVersion

    h = harness
    secure(h, ManualClock())
    store = h.rt.resources.store
    for name, other in (("a", "b"), ("b", "a")):
        await store.create_version(
            ResourceVersion(
                tenantId="acme",
                kind="prompt",
                name=name,
                version="1",
                seq=1,
                spec={"template": name},
                dependencies=[f"resource://prompts/{other}@1"],
                digest=name,
                createdAt=1,
            )
        )
        await store.put_head(
            ResourceHead(
                tenantId="acme", kind="prompt", name=name, latest="1", seq=1, versions=1, updatedAt=1
            )
        )
    transport = httpx.ASGITransport(app=create_app(h.rt))
    headers = {"Authorization": f"Bearer {await new_key(h.rt, 'acme', 'admin')}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http:
        r = await http.get("/v1/resources/resolve", params={"uri": "resource://prompts/a"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "dependency_cycle", r.text
    assert "resource://prompts/a@1" in r.json()["error"]["message"]
