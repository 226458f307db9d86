"""``avm keys --database-url``: a cluster's keys made, listed and revoked from outside its nodes
(the CLI on the cluster's database and ``AVM_AUTH_SECRET``, no node involved); then a tenant
deleted through ``DELETE /v1/tenants/{id}`` on one running node: its keys refused on every node,
its conversations gone from the shared database, another tenant's untouched (docs/cluster.md).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import psycopg
import pytest

from agentvm.client import AgentVMClient
from tests.integration.avm_process import base_env, run_avm
from tests.integration.test_cluster_serve import SHARED_SECRET, _history, _image, cluster_database, node

pytestmark = pytest.mark.postgres

NO_KEY_CACHE = {"AVM_KEY_CACHE_S": "0"}  # a revoked key is refused at its next request
BOTH = ("--scope", "admin", "--scope", "client")  # a tenant's admin may search its sessions


def avm_keys(url: str, command: str, *args: str, url_from_env: bool = False) -> str:
    """``avm keys <command>`` on the cluster's database: ``--database-url`` or ``AVM_DATABASE_URL``."""
    env = base_env(AVM_AUTH_SECRET=SHARED_SECRET, **({"AVM_DATABASE_URL": url} if url_from_env else {}))
    where = () if url_from_env else ("--database-url", url)
    done = run_avm("keys", command, *args, *where, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert url not in done.stdout + done.stderr  # the URL (and its password) never printed
    return done.stdout


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _search(http: str, token: str, word: str) -> httpx.Response:
    return httpx.get(f"{http}/v1/sessions/search", params={"q": word}, headers=_bearer(token), timeout=30)


async def _conversation(url: str, token: str, text: str) -> dict[str, Any]:
    async with AgentVMClient.connect(url, token=token) as client:
        img = await _image(client)
        await client.request("message_send", imageId=img["imageId"], content=text, check=True)
        events = [e async for e in client.turn_events(timeout=60)]
        assert events[-1]["type"] == "conversation_end"
        assert [m["subtype"] for m in await _history(client, img["imageId"])] == ["user", "assistant"]
    return img


def _rows(url: str, tenant: str, session_id: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        counts = {
            table: conn.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = %s", (tenant,)).fetchone()[0]  # noqa: S608
            for table in ("containers", "images", "sessions")
        }
        counts["messages"] = conn.execute(
            "SELECT count(*) FROM messages WHERE session_id = %s", (session_id,)
        ).fetchone()[0]
    return counts


async def test_keys_made_from_outside_work_on_every_node_and_a_deleted_tenant_is_gone_from_all(tmp_path):
    with cluster_database() as url:
        # Before any node ran: the CLI applies the migrations itself (under their advisory lock).
        admin = avm_keys(url, "create", "--tenant", "platform", "--scope", "admin", "--name", "ops").strip()
        with (
            node(tmp_path, "node-a", url, keys=True, env=NO_KEY_CACHE) as a,
            node(tmp_path, "node-b", url, keys=True, env=NO_KEY_CACHE) as b,
        ):
            assert len(a.printed_tokens() + b.printed_tokens()) == 1  # tenant default's, made once
            for tenant, on in (("acme", a), ("globex", b)):
                made = httpx.post(
                    f"{on.http}/v1/tenants", json={"tenantId": tenant, "name": tenant}, headers=_bearer(admin)
                )
                assert made.status_code == 201, made.text
            acme = avm_keys(url, "create", "--tenant", "acme", *BOTH, url_from_env=True).strip()
            globex = avm_keys(url, "create", "--tenant", "globex", *BOTH, "--name", "web").strip()
            [listed] = [
                json.loads(line)
                for line in avm_keys(url, "list", "--tenant", "globex", "--json").splitlines()
            ]
            assert listed["name"] == "web" and listed["revokedAt"] is None and "token" not in listed

            # A key revoked from outside is refused by the nodes.
            spare = avm_keys(url, "create", "--tenant", "globex", *BOTH, "--name", "spare").strip()
            assert _search(a.http, spare, "anything").status_code == 200
            spare_id = next(
                k["keyId"]
                for k in map(json.loads, avm_keys(url, "list", "--tenant", "globex", "--json").splitlines())
                if k["name"] == "spare"
            )
            avm_keys(url, "revoke", spare_id)
            assert _search(a.http, spare, "anything").status_code == 401
            assert _search(b.http, spare, "anything").status_code == 401

            acme_img = await _conversation(a.url, acme, "acme quarterly plans")  # on node A
            globex_img = await _conversation(b.url, globex, "globex quarterly plans")  # on node B
            assert _search(b.http, acme, "quarterly").json()["results"]  # acme's data, seen on B
            assert _rows(url, "acme", acme_img["sessionId"])["messages"] == 2

            deleted = httpx.delete(f"{b.http}/v1/tenants/acme", headers=_bearer(admin), timeout=60)
            assert deleted.status_code == 200, deleted.text
            done = deleted.json()
            assert done["deleted"] is True and done["conversations"] == "purged"
            assert done["revokedKeys"] == 1 and done["deletedConversations"] > 0

            for on in (a, b):  # every node: the key refused, the tenant gone
                assert _search(on.http, acme, "quarterly").status_code == 401
                assert httpx.get(f"{on.http}/v1/tenants/acme", headers=_bearer(admin)).status_code == 404
            assert _rows(url, "acme", acme_img["sessionId"]) == {
                "containers": 0,
                "images": 0,
                "sessions": 0,
                "messages": 0,
            }
            [acme_key] = map(json.loads, avm_keys(url, "list", "--tenant", "acme", "--json").splitlines())
            assert acme_key["revokedAt"] is not None

            # The other tenant: untouched, on every node.
            assert _rows(url, "globex", globex_img["sessionId"]) == {
                "containers": 1,
                "images": 1,
                "sessions": 1,
                "messages": 2,
            }
            for on in (a, b):
                assert _search(on.http, globex, "quarterly").json()["results"]
            async with AgentVMClient.connect(a.url, token=globex) as client:
                history = await _history(client, globex_img["imageId"])
            assert [m["subtype"] for m in history] == ["user", "assistant"]


def test_keys_on_a_cluster_need_its_secret(tmp_path):
    with cluster_database() as url:
        env = base_env()  # no AVM_AUTH_SECRET: a data dir's secret would make keys no node accepts
        done = run_avm("keys", "create", "--tenant", "acme", "--database-url", url, env=env, timeout=60)
    assert done.returncode == 2
    assert "AVM_AUTH_SECRET" in done.stderr and url not in done.stderr
