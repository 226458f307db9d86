"""The memory tools on the local wiring (real SQLite memory store, scripted model, real gateway,
worker and Toolbox): remembered in one session, recalled in the next of the same end user; nothing
seen from another container or tenant; a retried ``remember`` stores once; limits answer clearly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.ports import MemoryLimits
from agentvm.security.storage_quota import StorageQuota
from agentvm.turns.worker import process_turn
from tests.harness import Harness
from tests.tools import WorkerDied

MEMORY = {"type": "memory"}


async def _session(
    h: Harness, tenant: str, container: str, *, tools: list[Any] | None = None, name: str = "A"
):
    c = await h.client(tenant)
    config = {"name": name, "tools": tools if tools is not None else [MEMORY]}
    img = (await c.request("image_create", containerId=container, config=config))["record"]
    return c, img


async def _turn(h: Harness, c, img, calls: Calls, text: str = "Hi") -> dict[str, Any]:
    """One turn whose model makes ``calls`` then says "Done."; the first tool result, as the model read it."""
    h.model.add(calls, "Done.")
    await c.request("message_send", imageId=img["imageId"], content=text)
    await h.run_turns()
    messages = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    outputs = [m["toolResult"]["output"] for m in messages if m.get("toolResult")]
    return outputs[-1]


def _value(output: dict[str, Any]) -> Any:
    assert output["type"] == "text", output
    return json.loads(output["value"])


async def test_remembered_in_one_session_is_recalled_in_the_next_of_the_same_end_user_only(tmp_path):
    h = Harness(tmp_path)
    c1, first = await _session(h, "tenant-a", "alice")
    said = _value(
        await _turn(
            h, c1, first, Calls(("remember", {"text": "Alice takes her coffee black", "topic": "coffee"}))
        )
    )
    assert said["remembered"] is True and said["id"].startswith("mem_")

    # a second session (another image) of the same container, days later
    c2, second = await _session(h, "tenant-a", "alice", name="B")
    assert second["sessionId"] != first["sessionId"]
    recalled = _value(await _turn(h, c2, second, Calls(("recall", {"query": "how does she take coffee?"}))))
    assert recalled == {
        "memories": [{"id": said["id"], "topic": "coffee", "text": "Alice takes her coffee black"}]
    }
    # the model read it in its next request
    assert "coffee black" in h.model.requests[-1].messages[-1].tool_results[0].content

    # another end user of the tenant, and another tenant's end user of the same id, see nothing
    c3, bob = await _session(h, "tenant-a", "bob")
    assert _value(await _turn(h, c3, bob, Calls(("recall", {"query": "coffee"})))) == {"memories": []}
    c4, other = await _session(h, "tenant-b", "alice")
    assert _value(await _turn(h, c4, other, Calls(("recall", {"query": "coffee"})))) == {"memories": []}
    # nor can they forget it by its id
    gone = await _turn(h, c4, other, Calls(("forget", {"id": said["id"]})))
    assert gone["type"] == "error-text" and "Memory not found" in gone["value"]
    assert [i.text for i in await h.memory.items("tenant-a", "container:alice")] == [
        "Alice takes her coffee black"
    ]

    # the end user's own agent forgets it
    assert _value(await _turn(h, c2, second, Calls(("forget", {"id": said["id"]})))) == {
        "forgotten": said["id"]
    }
    assert await h.memory.items("tenant-a", "container:alice") == []


async def test_an_image_scope_is_shared_by_the_images_of_that_name_across_end_users(tmp_path):
    h = Harness(tmp_path)
    shared = [{"type": "memory", "scope": "image"}]
    c1, a = await _session(h, "tenant-a", "alice", tools=shared, name="support")
    await _turn(h, c1, a, Calls(("remember", {"text": "Refunds take 5 days"})))
    c2, b = await _session(h, "tenant-a", "bob", tools=shared, name="support")
    found = _value(await _turn(h, c2, b, Calls(("recall", {"query": "refunds"}))))
    assert [m["text"] for m in found["memories"]] == ["Refunds take 5 days"]
    c3, other = await _session(h, "tenant-a", "bob", tools=shared, name="sales")
    assert _value(await _turn(h, c3, other, Calls(("recall", {"query": "refunds"})))) == {"memories": []}
    assert [i.scope for i in await h.memory.items("tenant-a", "image:support")] == ["image:support"]


async def test_a_remember_run_again_after_the_worker_died_stores_once(tmp_path):
    h = Harness(tmp_path)
    real_add = h.memory.add
    died = []

    async def add_then_die(item, limits):
        stored = await real_add(item, limits)
        if not died:  # the write landed, then the worker died before the step was kept
            died.append(item.id)
            raise WorkerDied
        return stored

    h.memory.add = add_then_die  # type: ignore[method-assign]
    c, img = await _session(h, "tenant-a", "alice")
    h.model.add(Calls(("remember", {"text": "Alice is vegetarian"})), "Noted.")
    await c.request("message_send", imageId=img["imageId"], content="I am vegetarian")
    jobs: list[Any] = []

    async def collect(job):
        jobs.append(job)

    await h.queue.drain(collect)
    with pytest.raises(WorkerDied):
        await process_turn(h.rt, jobs[0])
    await process_turn(h.rt, jobs[0])  # the redelivered job runs the tool step again
    items = await h.memory.items("tenant-a", "container:alice")
    assert [(i.id, i.text) for i in items] == [(died[0], "Alice is vegetarian")]
    assert (await h.store.get_turn(jobs[0].turnId)).status == "completed"


async def test_a_full_memory_is_an_error_result_that_says_so(tmp_path):
    h = Harness(tmp_path)
    h.rt.memory_limits = MemoryLimits(max_items=1, max_bytes=1000)
    c, img = await _session(h, "tenant-a", "alice")
    await _turn(h, c, img, Calls(("remember", {"text": "one"})))
    full = await _turn(h, c, img, Calls(("remember", {"text": "two"})))
    assert full["type"] == "error-text" and "holds 1 items, its limit" in full["value"]


async def test_a_tenant_whose_storage_is_full_is_refused_a_remember_and_keeps_its_account(tmp_path):
    from agentvm.adapters.local.sqlite.counters import SqliteCounters
    from agentvm.agent.memory import Memory
    from agentvm.errors import StorageQuotaExceeded

    h = Harness(tmp_path)
    quota = StorageQuota(SqliteCounters(":memory:"), limit_bytes=10)
    memory = Memory(h.memory, clock=h.rt.clock, ids=h.rt.ids, storage=quota)
    item, added = await memory.remember(
        "tenant-a", "container:alice", "123456", source="api", origin="call-1"
    )
    again, twice = await memory.remember(
        "tenant-a", "container:alice", "123456", source="api", origin="call-1"
    )
    assert added and not twice and again == item and await quota.used("tenant-a") == 6
    with pytest.raises(StorageQuotaExceeded):
        await memory.remember("tenant-a", "container:alice", "abcdef", source="api")
    assert await quota.used("tenant-a") == 6 and len(await memory.items("tenant-a", "container:alice")) == 1
    edited = await memory.edit("tenant-a", "container:alice", item.id, text="1234")
    assert edited.text == "1234" and await quota.used("tenant-a") == 4
    assert await memory.clear("tenant-a", "container:alice") == 1 and await quota.used("tenant-a") == 0


@pytest.mark.parametrize(
    ("tools", "problem"),
    [
        ([{"type": "memory", "scope": "everyone"}], "scope"),
        ([{"type": "memory", "tools": ["remember", "remember"]}], "at most once"),
        ([{"type": "memory", "tools": ["remember", "dream"]}], "tools"),
        ([{"type": "memory", "tools": []}], "tools"),
        ([MEMORY, MEMORY], "unique"),
        ([MEMORY, {"type": "builtin", "name": "calculator"}], None),
    ],
)
async def test_an_image_memory_declaration_is_checked(tmp_path, tools, problem):
    h = Harness(tmp_path)
    c = await h.client()
    answer = await c.request("image_create", containerId="alice", config={"name": "A", "tools": tools})
    if problem is None:
        assert answer["record"]["imageId"]
    else:
        assert problem in answer["error"], answer


async def test_a_deleted_tenants_memory_is_purged_and_no_one_elses(tmp_path):
    from agentvm.ports import MemoryItem

    h = Harness(tmp_path)
    for tenant in ("tenant-a", "tenant-b"):
        item = MemoryItem(f"mem_{tenant}", tenant, "container:alice", "a fact", None, "api", 1, 1)
        await h.memory.add(item, MemoryLimits())
    assert h.rt.tenant_purge is not None
    await h.rt.tenant_purge.purge_tenant("tenant-a")
    assert await h.memory.items("tenant-a", "container:alice") == []
    assert [i.id for i in await h.memory.items("tenant-b", "container:alice")] == ["mem_tenant-b"]
