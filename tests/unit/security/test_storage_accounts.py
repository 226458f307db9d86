"""One storage account per tenant across its write paths (issue 25, item 1), on the local wiring:
concurrent sends at the edge of the quota never overshoot, registry and resource versions are
counted, refused past the account and given back on delete, image configs are counted, and a
sandbox job's files are charged and given back when it deletes them. The accounts themselves on
both counter stores (SQLite, DynamoDB): ``tests/contract/test_storage_quota.py``."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import httpx

from agentvm.adapters.llm.scripted import Calls
from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from tests.harness import Harness
from tests.security_harness import ManualClock, new_key, secure


async def test_fifty_concurrent_sends_with_room_for_ten_store_ten(harness, monkeypatch):
    secure(harness, ManualClock(), storage_bytes=10**9)
    append = harness.store.append_message

    async def append_taking_time(*args, **kwargs):  # as a real store's write does (DynamoDB: a thread)
        await asyncio.sleep(0.001)
        return await append(*args, **kwargs)

    monkeypatch.setattr(harness.store, "append_message", append_taking_time)
    quota = harness.rt.storage_quota
    c = await harness.client("acme")
    img = (await c.request("image_create", containerId="u", config={"name": "A"}))["record"]
    before = await quota.used("acme")
    assert "code" not in await c.request("message_send", imageId=img["imageId"], content="m" * 500)
    one = await quota.used("acme") - before  # one message's bytes (the others differ only in text)
    quota.limit_bytes = before + 11 * one + one // 2  # room for ten more

    senders = [await harness.client("acme") for _ in range(50)]
    answers = await asyncio.gather(
        *(
            s.request("message_send", imageId=img["imageId"], content=f"{i:03d}" + "m" * 497)
            for i, s in enumerate(senders)
        )
    )
    accepted = [a for a in answers if "code" not in a]
    assert len(accepted) == 10
    assert {a["code"] for a in answers if "code" in a} == {"storage_quota_exceeded"}
    users = [m for m in await harness.store.list_messages(img["sessionId"]) if m.role == "user"]
    assert len(users) == 11
    assert await quota.used("acme") <= quota.limit_bytes


@asynccontextmanager
async def _http(h: Harness, tenant: str):
    token = await new_key(h.rt, tenant, "admin")
    transport = httpx.ASGITransport(app=create_app(h.rt))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as client:
        yield client


async def test_registry_publishing_is_counted_refused_past_the_account_and_given_back(tmp_path):
    h = Harness(tmp_path)
    secure(h, ManualClock(), storage_bytes=10_000)
    content = "p" * 3000
    async with _http(h, "acme") as http:
        for n in (1, 2, 3):
            made = await http.post(
                "/v1/registry/publish",
                json={"locator": f"acme.dev/prompts/big.prompt@{n}.0.0", "content": content},
            )
            assert made.status_code == 201, made.text
        used = await h.rt.storage_quota.used("acme")
        assert 9000 < used <= 10_000
        refused = await http.post(
            "/v1/registry/publish", json={"locator": "acme.dev/prompts/big.prompt@4.0.0", "content": content}
        )
        assert refused.status_code == 507
        assert refused.json()["error"]["code"] == "storage_quota_exceeded"
        assert refused.json()["error"]["limit"] == 10_000
        gone = await http.post("/v1/registry/delete", json={"locator": "acme.dev/prompts/big.prompt@1.0.0"})
        assert gone.status_code == 200, gone.text
        assert await h.rt.storage_quota.used("acme") < used - 3000
        again = await http.post(
            "/v1/registry/publish", json={"locator": "acme.dev/prompts/big.prompt@4.0.0", "content": content}
        )
        assert again.status_code == 201, again.text
    assert await h.rt.storage_quota.used("other") == 0  # per tenant
    async with _http(h, "acme") as http:  # the tenant sees its account in its usage summary
        summary = (await http.get("/v1/usage/summary")).json()
    assert summary["storage"] == {"usedBytes": await h.rt.storage_quota.used("acme"), "limitBytes": 10_000}


async def test_resource_versions_and_knowledge_are_counted_and_given_back_on_delete(tmp_path):
    h = Harness(tmp_path)
    secure(h, ManualClock(), storage_bytes=10**6)
    quota, centre = h.rt.storage_quota, h.rt.resources
    docs = {"documents": [{"id": "a", "text": "storage accounts " * 300}]}
    await centre.publish("acme", "knowledge", "manual", spec=docs)
    await centre.publish("acme", "knowledge", "manual", spec=docs)
    used = await quota.used("acme")
    assert used > 2 * 5000  # both versions, each with its search index
    await centre.delete("acme", "knowledge", "manual")
    assert await quota.used("acme") == 0


async def test_image_configs_are_counted_updates_charge_the_difference_and_deletes_give_back(harness):
    secure(harness, ManualClock(), storage_bytes=20_000)
    quota = harness.rt.storage_quota
    c = await harness.client("acme")
    img = (await c.request("image_create", containerId="u", config={"systemPrompt": "s" * 8000}))["record"]
    assert 8000 < await quota.used("acme") < 9000
    refused = await c.request("image_create", containerId="u", config={"systemPrompt": "s" * 12_000})
    assert refused["code"] == "storage_quota_exceeded"
    grown = await c.request("image_update", imageId=img["imageId"], updates={"systemPrompt": "s" * 11_000})
    assert "code" not in grown, grown
    assert 11_000 < await quota.used("acme") < 12_000
    await c.request("image_run", imageId=img["imageId"])  # starting it changes the record, not the charge
    await c.request("image_delete", imageId=img["imageId"])
    assert await quota.used("acme") == 0


async def test_a_sandbox_job_writing_a_big_file_is_charged_and_deleting_it_gives_the_bytes_back(tmp_path):
    h = Harness(tmp_path)
    h.rt.tools = ToolSources(sandbox=LocalSandbox(tmp_path / "workspaces", isolate=False))
    secure(h, ManualClock(), storage_bytes=1_000_000)
    quota = h.rt.storage_quota
    c = await h.client("acme")
    img = (await c.request("image_create", containerId="u1", config={"tools": [{"type": "sandbox"}]}))[
        "record"
    ]
    before = await quota.used("acme")
    h.model.add(Calls(("sh", {"command": "head -c 600000 /dev/zero > big.bin"})), "Wrote it.")
    await c.request("message_send", imageId=img["imageId"], content="write")
    await h.run_turns()
    written = await quota.used("acme")
    assert written - before > 600_000

    # At its account (the file and the turn's messages): the next mutating call is refused.
    quota.limit_bytes = written
    h.model.add(Calls(("sh", {"command": "echo more > more.txt"})), "Could not.")
    quota.limit_bytes = 10**9  # the message itself is let in...
    await c.request("message_send", imageId=img["imageId"], content="more")
    quota.limit_bytes = written  # ...and the account is full when the job would start
    await h.run_turns()
    results = [m for m in await h.store.list_messages(img["sessionId"]) if m.role == "tool"]
    assert results[-1].toolResult.output.type == "error-text"
    assert "storage quota reached" in results[-1].toolResult.output.value
    assert not list((tmp_path / "workspaces").rglob("more.txt"))  # the job never ran

    quota.limit_bytes = 10**9
    h.model.add(Calls(("sh", {"command": "rm big.bin"})), "Deleted.")
    await c.request("message_send", imageId=img["imageId"], content="delete")
    await h.run_turns()
    assert await quota.used("acme") < written - 590_000
