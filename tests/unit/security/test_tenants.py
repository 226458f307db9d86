"""The tenant registry (``/v1/tenants``) on the local wiring with real keys: platform admins only
(or the open dev mode), CRUD with pages, Deepractice's RPC aliases and their shapes, deletion that
revokes keys and removes budgets, resources, settings, MCP OAuth records, waits and conversations
(usage kept), an interrupted deletion finished by deleting again, the platform tenant undeletable,
tombstones that keep their id, and bad input refused with the field named and nothing written."""

from __future__ import annotations

import asyncio
import functools
from contextlib import asynccontextmanager

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from agentvm.cli.main import main
from tests.harness import Harness
from tests.security_harness import ManualClock, keyed_client, new_key, secure


@pytest.fixture
async def world(tmp_path):
    h = Harness(tmp_path)
    h.clock = ManualClock()
    secure(h, h.clock)
    h.rt.clock = h.clock
    h.tokens = {t: await new_key(h.rt, t, "admin") for t in ("platform", "acme", "globex")}

    @asynccontextmanager
    async def http(token: str | None):
        transport = httpx.ASGITransport(app=create_app(h.rt), raise_app_exceptions=False)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
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
        assert tenant["status"] == "active" and tenant["createdAt"] == tenant["updatedAt"]
        named = (await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})).json()
        assert named["tenantId"] == "acme" and "description" not in named
        again = await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
        assert (await http.get(f"/v1/tenants/{tenant['tenantId']}")).json() == tenant

        world.clock.advance(5)
        changed = (await http.patch("/v1/tenants/acme", json={"description": "the first"})).json()
        assert changed["description"] == "the first" and changed["name"] == "Acme"
        assert changed["updatedAt"] == named["updatedAt"] + 5000
        cleared = (await http.patch("/v1/tenants/acme", json={"description": None})).json()
        assert "description" not in cleared and cleared["name"] == "Acme"

        await http.post("/v1/tenants", json={"name": "Zeta", "tenantId": "zeta"})
        page = (await http.get("/v1/tenants?limit=2")).json()
        assert [t["tenantId"] for t in page["tenants"]] == ["acme", tenant["tenantId"]]
        assert page["next"] == tenant["tenantId"]
        rest = (await http.get(f"/v1/tenants?limit=2&cursor={page['next']}")).json()
        assert rest == {"tenants": [(await http.get("/v1/tenants/zeta")).json()], "next": None}
        assert (await http.get("/v1/tenants?status=deleted")).json() == {"tenants": [], "next": None}


async def test_deepractice_aliases_answer_their_shapes(world):
    async with world.http(world.tokens["platform"]) as http:
        assert (await http.get("/v1/tenants/list")).json() == []  # the route, not a tenant "list"
        created = await http.post("/v1/tenants/create", json={"name": "Acme", "description": "d"})
        assert created.status_code == 201
        tenant = created.json()
        assert set(tenant) == {"tenantId", "name", "description", "createdAt", "updatedAt", "status"}
        tid = tenant["tenantId"]
        assert (await http.post("/v1/tenants/get", json={"tenantId": tid})).json() == tenant
        world.clock.advance(1)
        updated = (await http.post("/v1/tenants/update", json={"tenantId": tid, "name": "Acme 2"})).json()
        assert (updated["name"], updated["description"]) == ("Acme 2", "d")
        assert updated["updatedAt"] > tenant["updatedAt"]
        assert (await http.get("/v1/tenants/list")).json() == [updated]
        deleted = await http.post("/v1/tenants/delete", json={"tenantId": tid})
        assert deleted.status_code == 200 and deleted.json()["deleted"] is True
        missing = await http.post("/v1/tenants/get", json={"tenantId": tid})
        assert missing.status_code == 404
        assert missing.json() == {"error": {"code": "not_found", "message": "Tenant not found"}}
        assert (await http.post("/v1/tenants/update", json={"tenantId": tid})).status_code == 404
        assert (await http.post("/v1/tenants/delete", json={"tenantId": tid})).status_code == 404
        assert (await http.get("/v1/tenants/list")).json() == []


async def conversation(world, token: str) -> dict:
    """A tenant's conversation: an image with a finished turn, a turn suspended on an approval,
    and a workspace file."""
    world.rt.tools = world.rt.tools or ToolSources()
    client = await keyed_client(world, token)
    image = (await client.request("image_create", containerId="user-alice", config={"name": "A"}))["record"]
    await client.request("image_run", imageId=image["imageId"])
    world.model.add("a private reply")
    await client.request("message_send", imageId=image["imageId"], content="a private question")
    guarded = {"name": "G", "tools": [{"type": "builtin", "name": "calculator"}], "approval": {"tools": "*"}}
    held = (await client.request("image_create", containerId="user-alice", config=guarded))["record"]
    world.model.add(Calls(("calculator", {"expression": "1+1"})))
    await client.request("message_send", imageId=held["imageId"], content="add, once approved")
    await world.run_turns()
    return {"client": client, "image": image, "held": held}


async def test_deleting_a_tenant_revokes_its_keys_and_removes_everything_but_its_usage(world, tmp_path):
    from agentvm.adapters.sandbox.process import LocalSandbox

    acme, globex = world.tokens["acme"], world.tokens["globex"]
    world.rt.sandbox = LocalSandbox(tmp_path / "workspaces", isolate=False)
    chats = {t: await conversation(world, world.tokens[t]) for t in ("acme", "globex")}
    for tenant in ("acme", "globex"):
        await world.rt.sandbox.write(tenant, "user-alice", "notes.txt", b"private")
        async with world.http(world.tokens[tenant]) as http:
            await http.put("/v1/budgets/tenant", json={"daily_tokens": 10})
            await http.put("/v1/budgets/containers/user-alice", json={"daily_tokens": 5})
            await http.post("/v1/resources", json={"kind": "prompt", "name": "p", "spec": {"template": "x"}})
            spec = {"prompt": {"uri": "resource://prompts/p@1"}}
            await http.post("/v1/resources", json={"kind": "agent", "name": "a", "spec": spec})
            await http.put("/v1/config/llm.maxOutputTokens", json={"value": 9})
            await http.post("/v1/auth/keys", json={"scopes": ["client"]})
    from agentvm.adapters.local.sqlite.mcp_oauth import SqliteMcpOAuthRecords

    world.rt.mcp_oauth = SqliteMcpOAuthRecords(":memory:")
    for tenant in ("acme", "globex"):
        await world.rt.mcp_oauth.put(tenant, f"tokens:{tenant}", "sealed")
    [wait] = await world.rt.waits.list_waits("acme")
    session = chats["acme"]["image"]["sessionId"]
    assert await world.store.list_messages(session)

    async with world.http(world.tokens["platform"]) as http:
        await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        world.clock.advance(3)
        gone = await http.delete("/v1/tenants/acme")
        assert gone.status_code == 200
        assert gone.json() == {
            "deleted": True,
            "tenantId": "acme",
            "revokedKeys": 2,
            "deletedBudgets": 2,
            "deletedResourceVersions": 2,
            "removedSettings": 1,
            "cancelledToolCalls": 1,
            "deletedConversations": 2,
            "conversations": "purged",
        }
        assert (await http.get("/v1/tenants/acme")).status_code == 404
        assert (await http.delete("/v1/tenants/acme")).status_code == 404  # deleting again
        [tombstone] = (await http.get("/v1/tenants?status=deleted")).json()["tenants"]
        assert tombstone["status"] == "deleted" and tombstone["purgedAt"] == tombstone["deletedAt"]
        assert (await http.get("/v1/tenants")).json()["tenants"] == []
        reused = await http.post("/v1/tenants", json={"name": "Acme again", "tenantId": "acme"})
        assert reused.status_code == 409 and "not reused" in reused.json()["error"]["message"]

    async with world.http(acme) as http:
        assert (await http.get("/v1/resources")).status_code == 401  # the key no longer works
    assert (await chats["acme"]["client"].request("container_list"))["code"] == "unauthorized"
    assert await world.rt.resources.store.list_heads("acme") == []
    assert await world.rt.budgets.store.get_budget("acme") is None
    assert await world.rt.budgets.store.get_budget("acme", "user-alice") is None
    assert (await world.rt.config.store.get_values("tenant:acme")).values == {}
    assert await world.store.list_containers("acme") == []
    assert await world.store.list_images("acme") == []
    assert await world.store.list_messages(session) == []
    assert await world.store.get_session("acme", session) is None
    assert len(await world.store.list_usage("acme")) == 2  # billing keeps the usage
    assert await world.rt.waits.list_waits("acme") == []
    assert await world.rt.mcp_oauth.get("acme", "tokens:acme") is None
    cancelled = await world.rt.waits.get_wait(wait.turnId, wait.toolCallId)
    assert (cancelled.status, cancelled.consumed) == ("cancelled", True)
    assert not (tmp_path / "workspaces" / _digest("acme", "user-alice")).exists()
    world.clock.advance(3600)  # past every deadline: the sweeper passes the deleted tenant's wait by
    due = await world.rt.waits.due_waits(world.clock.now_ms(), 100)
    assert [w.tenantId for w in due] == ["globex"]

    # the other tenant is untouched
    assert len(await world.store.list_images("globex")) == 2
    assert await world.rt.waits.list_waits("globex")
    assert (await world.rt.budgets.store.get_budget("globex")).dailyTokens == 10
    assert len(await world.rt.resources.store.list_heads("globex")) == 2
    assert await world.rt.mcp_oauth.get("globex", "tokens:globex") == "sealed"
    assert await world.rt.sandbox.read("globex", "user-alice", "notes.txt", max_bytes=100) == b"private"
    async with world.http(globex) as http:
        assert (await http.get("/v1/config/llm.maxOutputTokens")).json()["value"] == 9


def _digest(tenant: str, container: str) -> str:
    from agentvm.records import workspace_digest

    return workspace_digest(tenant, container)


async def test_an_interrupted_deletion_is_finished_by_deleting_again(world, monkeypatch):
    async with world.http(world.tokens["acme"]) as http:
        await http.post("/v1/resources", json={"kind": "prompt", "name": "p", "spec": {"template": "x"}})
    centre = world.rt.resources
    real = centre.delete_tenant

    async def broken(tenant_id: str) -> int:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(centre, "delete_tenant", broken)
    async with world.http(world.tokens["platform"]) as http:
        await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        failed = await http.delete("/v1/tenants/acme")
        assert failed.status_code == 500 and failed.json()["error"]["code"] == "internal_error"
        half = (await http.get("/v1/tenants/acme")).json()
        assert half["status"] == "deleting" and "purgedAt" not in half
        assert [t["status"] for t in (await http.get("/v1/tenants/list")).json()] == ["deleting"]
        refused = await http.patch("/v1/tenants/acme", json={"name": "Back"})
        assert refused.status_code == 409 and "delete it again" in refused.json()["error"]["message"]
        assert (await http.get("/v1/tenants/acme")).json()["name"] == "Acme"

        monkeypatch.setattr(centre, "delete_tenant", real)
        done = (await http.delete("/v1/tenants/acme")).json()
        assert (done["revokedKeys"], done["deletedResourceVersions"]) == (0, 1)  # keys went the first time
        assert (await http.get("/v1/tenants/acme")).status_code == 404
    assert await centre.store.list_heads("acme") == []


async def test_no_key_is_made_for_a_tenant_being_deleted(world, tmp_path, capsys):
    """A key of the tenant still cached elsewhere while it is deleted cannot mint a new one, nor can
    the operator's ``avm keys create``."""
    from agentvm.records import TenantRecord

    await world.rt.tenants.create_tenant(
        TenantRecord(tenantId="acme", name="Acme", createdAt=1, updatedAt=1, status="deleting", deletedAt=1)
    )
    async with world.http(world.tokens["acme"]) as http:
        refused = await http.post("/v1/auth/keys", json={"scopes": ["client"]})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert len(await world.rt.auth.keys.list("acme")) == 1

    from agentvm.adapters.local.sqlite.tenants import SqliteTenantStore

    data = tmp_path / "data"
    store = SqliteTenantStore(data / "agentvm.db")
    await store.create_tenant(TenantRecord(tenantId="gone", name="Gone", createdAt=1, updatedAt=1))
    await store.replace_tenant(
        TenantRecord(tenantId="gone", name="Gone", createdAt=1, updatedAt=2, status="deleted"),
        status="active",
    )
    store.close()
    cli = functools.partial(asyncio.to_thread, main)  # the CLI runs its own event loop
    assert await cli(["keys", "create", "--tenant", "gone", "--data-dir", str(data)]) == 2
    assert "was deleted" in capsys.readouterr().err
    assert await cli(["keys", "create", "--tenant", "other", "--data-dir", str(data)]) == 0


async def test_only_platform_admins_manage_tenants_and_the_platform_tenant_stays(world):
    async with world.http(world.tokens["platform"]) as http:
        refused = await http.delete("/v1/tenants/platform")  # not even registered: still refused
        assert refused.status_code == 409 and "platform tenant" in refused.json()["error"]["message"]
        await http.post("/v1/tenants", json={"name": "Platform", "tenantId": "platform"})
        await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        refused = await http.post("/v1/tenants/delete", json={"tenantId": "platform"})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"
    attempts = [
        ("GET", "/v1/tenants", None),
        ("POST", "/v1/tenants", {"name": "x"}),
        ("GET", "/v1/tenants/acme", None),
        ("PATCH", "/v1/tenants/acme", {"name": "x"}),
        ("DELETE", "/v1/tenants/acme", None),
        ("POST", "/v1/tenants/create", {"name": "x"}),
        ("POST", "/v1/tenants/get", {"tenantId": "acme"}),
        ("GET", "/v1/tenants/list", None),
        ("POST", "/v1/tenants/update", {"tenantId": "acme", "name": "x"}),
        ("POST", "/v1/tenants/delete", {"tenantId": "acme"}),
    ]
    platform_client = await new_key(world.rt, "platform", "client")
    for token in (world.tokens["acme"], platform_client):  # a tenant's admin; the platform's client key
        async with world.http(token) as http:
            for method, path, body in attempts:
                answer = await http.request(method, path, json=body)
                assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden", path
    async with world.http(None) as http:
        assert (await http.get("/v1/tenants")).status_code == 401
    async with world.http(world.tokens["platform"]) as http:
        page = (await http.get("/v1/tenants")).json()
        assert [(t["tenantId"], t["name"]) for t in page["tenants"]] == [
            ("acme", "Acme"),
            ("platform", "Platform"),
        ]


async def test_the_open_dev_mode_caller_is_a_platform_admin(tmp_path):
    h = Harness(tmp_path)  # no security attached: no authenticator
    transport = httpx.ASGITransport(app=create_app(h.rt, open_tenant="local"))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as http:
        made = await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        assert made.status_code == 201
        gone = (await http.delete("/v1/tenants/acme")).json()
        assert (gone["revokedKeys"], gone["conversations"]) == (0, "purged")
    h.queue.close()
    h.store.close()


@pytest.mark.parametrize(
    ("method", "path", "body", "says"),
    [
        ("POST", "/v1/tenants", {"name": ""}, "name"),
        ("POST", "/v1/tenants", {}, "name"),
        ("POST", "/v1/tenants", {"name": 7}, "name"),
        ("POST", "/v1/tenants", {"name": "x", "description": "d" * 2001}, "description"),
        ("POST", "/v1/tenants", {"name": "x", "tenantId": "../etc"}, "tenantId"),
        ("POST", "/v1/tenants", {"name": "x", "tenantId": "list"}, "tenantId"),
        ("POST", "/v1/tenants", {"name": "x", "plan": "gold"}, "plan"),
        ("POST", "/v1/tenants/create", {"name": "x", "tenantId": ""}, "tenantId"),
        ("PATCH", "/v1/tenants/acme", {"name": None}, "name"),
        ("PATCH", "/v1/tenants/acme", {"name": "x", "tenantId": "y"}, "tenantId"),
        ("POST", "/v1/tenants/get", {}, "tenantId"),
        ("POST", "/v1/tenants/update", {"tenantId": "acme", "name": ""}, "name"),
        ("POST", "/v1/tenants/delete", {"tenantId": 5}, "tenantId"),
        ("GET", "/v1/tenants?status=gone", None, "status"),
        ("GET", "/v1/tenants?limit=0", None, "limit"),
    ],
)
async def test_bad_input_is_refused_with_the_field_named_and_nothing_written(world, method, path, body, says):
    async with world.http(world.tokens["platform"]) as http:
        await http.post("/v1/tenants", json={"name": "Acme", "tenantId": "acme"})
        before = (await http.get("/v1/tenants/acme")).json()
        answer = await http.request(method, path, json=body)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "bad_request"
        assert says in answer.json()["error"]["message"]
        assert (await http.get("/v1/tenants/list")).json() == [before]
