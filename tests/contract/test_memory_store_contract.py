"""The ``MemoryStore`` port's contract, on SQLite, DynamoDB (moto) and PostgreSQL: an item is read
back by its tenant, scope and id only; an add with a stored id stores nothing (a retried tool call);
recall finds items by their words (text or topic), best first; edits, deletes and clears keep the
scope's usage exact; and a scope never passes its item or byte limits, even under racing writers."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.aws.dynamodb.memory import DynamoDbMemoryStore
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.local.sqlite.memory import SqliteMemoryStore
from agentvm.adapters.postgres.memory import PostgresMemoryStore
from agentvm.errors import MemoryFull
from agentvm.ports import MemoryItem, MemoryLimits
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ALICE = "container:user-alice"
BOB = "container:user-bob"
ROOMY = MemoryLimits(max_items=100, max_bytes=100_000)


@asynccontextmanager
async def on_sqlite(tmp_path: Any) -> AsyncIterator[Any]:
    store = SqliteMemoryStore(tmp_path / "a.db")
    try:
        yield store
    finally:
        store.close()


@asynccontextmanager
async def on_dynamodb(tmp_path: Any) -> AsyncIterator[Any]:
    with atomic_moto():
        DynamoDbStore(CONTRACT_TABLE).create_table()
        yield DynamoDbMemoryStore(CONTRACT_TABLE)


@asynccontextmanager
async def on_postgres(tmp_path: Any) -> AsyncIterator[Any]:
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresMemoryStore(database)


@pytest.fixture(
    params=[
        pytest.param(on_sqlite, id="sqlite"),
        pytest.param(on_dynamodb, id="dynamodb", marks=pytest.mark.aws),
        pytest.param(on_postgres, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def memory(request, tmp_path):
    async with request.param(tmp_path) as adapter:
        yield adapter


def item(
    memory_id: str,
    text: str,
    *,
    topic: str | None = None,
    tenant: str = "acme",
    scope: str = ALICE,
    at: int = 1_000,
) -> MemoryItem:
    return MemoryItem(memory_id, tenant, scope, text, topic, "tool", at, at)


async def test_an_item_is_read_back_by_its_tenant_scope_and_id(memory):
    stored, added = await memory.add(item("mem_1", "Alice prefers tea", topic="drinks"), ROOMY)
    assert added and stored == item("mem_1", "Alice prefers tea", topic="drinks")
    assert await memory.get("acme", ALICE, "mem_1") == stored
    assert await memory.get("acme", BOB, "mem_1") is None
    assert await memory.get("globex", ALICE, "mem_1") is None
    assert await memory.get("acme", ALICE, "mem_2") is None


async def test_an_add_with_a_stored_id_stores_nothing_twice(memory):
    await memory.add(item("mem_1", "first write"), ROOMY)
    stored, added = await memory.add(item("mem_1", "the retry's text", at=2_000), ROOMY)
    assert not added and stored.text == "first write"
    assert [i.text for i in await memory.items("acme", ALICE)] == ["first write"]
    assert await memory.usage("acme", ALICE) == (1, len("first write"))


async def test_items_are_listed_oldest_first_per_scope_and_tenant(memory):
    await memory.add(item("mem_b", "second", at=2_000), ROOMY)
    await memory.add(item("mem_a", "first", at=1_000), ROOMY)
    await memory.add(item("mem_c", "Bob's", scope=BOB), ROOMY)
    await memory.add(item("mem_d", "Globex's", tenant="globex"), ROOMY)
    assert [i.id for i in await memory.items("acme", ALICE)] == ["mem_a", "mem_b"]
    assert [i.id for i in await memory.items("acme", BOB)] == ["mem_c"]
    assert [i.id for i in await memory.items("globex", ALICE)] == ["mem_d"]


async def test_recall_finds_items_by_their_words_best_first(memory):
    await memory.add(item("mem_1", "Alice drinks her coffee black", at=1_000), ROOMY)
    await memory.add(item("mem_2", "Alice is allergic to peanuts", topic="health", at=2_000), ROOMY)
    await memory.add(item("mem_3", "Coffee order: black, no sugar", topic="coffee", at=3_000), ROOMY)
    await memory.add(item("mem_4", "coffee for Globex", tenant="globex"), ROOMY)
    await memory.add(item("mem_5", "coffee for Bob", scope=BOB), ROOMY)
    found = await memory.recall("acme", ALICE, "COFFEE", limit=10)
    assert {i.id for i in found} == {"mem_1", "mem_3"}
    assert [i.id for i in await memory.recall("acme", ALICE, "health?", limit=10)] == ["mem_2"]
    both = await memory.recall("acme", ALICE, "black sugar", limit=10)
    assert [i.id for i in both][0] == "mem_3"  # it holds both words
    assert [i.id for i in await memory.recall("acme", ALICE, "coffee", limit=1)] in (["mem_1"], ["mem_3"])
    assert await memory.recall("acme", ALICE, "tea", limit=10) == []
    # no words: the most recently updated
    assert [i.id for i in await memory.recall("acme", ALICE, " ?! ", limit=2)] == ["mem_3", "mem_2"]
    # query syntax is only words, never the store's query language
    assert await memory.recall("acme", ALICE, "coffee\" OR * NEAR('", limit=10) != []


async def test_an_edit_replaces_text_and_topic_and_keeps_usage_exact(memory):
    await memory.add(item("mem_1", "likes tea", topic="drinks"), ROOMY)
    before, after = await memory.edit(
        "acme", ALICE, "mem_1", text="likes green tea", topic=None, now_ms=5_000, limits=ROOMY
    )
    assert before.text == "likes tea" and (after.text, after.topic, after.updated_at) == (
        "likes green tea",
        None,
        5_000,
    )
    assert await memory.get("acme", ALICE, "mem_1") == after
    assert await memory.usage("acme", ALICE) == (1, len("likes green tea"))
    assert [i.id for i in await memory.recall("acme", ALICE, "green", limit=5)] == ["mem_1"]
    assert await memory.recall("acme", ALICE, "drinks", limit=5) == []
    missing = await memory.edit("globex", ALICE, "mem_1", text="x", topic=None, now_ms=1, limits=ROOMY)
    assert missing is None


async def test_delete_and_clear_free_the_scope(memory):
    await memory.add(item("mem_1", "one"), ROOMY)
    await memory.add(item("mem_2", "two two"), ROOMY)
    await memory.add(item("mem_3", "Bob's", scope=BOB), ROOMY)
    assert await memory.delete("globex", ALICE, "mem_1") is None
    assert (await memory.delete("acme", ALICE, "mem_1")).text == "one"
    assert await memory.delete("acme", ALICE, "mem_1") is None
    assert await memory.usage("acme", ALICE) == (1, 7)
    assert await memory.recall("acme", ALICE, "one", limit=5) == []
    assert await memory.clear("acme", ALICE) == (1, 7)
    assert await memory.items("acme", ALICE) == [] and await memory.usage("acme", ALICE) == (0, 0)
    assert [i.id for i in await memory.items("acme", BOB)] == ["mem_3"]


async def test_a_scope_never_passes_its_item_and_byte_limits(memory):
    small = MemoryLimits(max_items=3, max_bytes=20)
    for n in range(3):
        await memory.add(item(f"mem_{n}", "12345"), small)
    with pytest.raises(MemoryFull) as full:
        await memory.add(item("mem_x", "1"), small)
    assert (full.value.what, full.value.limit, full.value.used) == ("items", 3, 3)
    await memory.delete("acme", ALICE, "mem_0")
    with pytest.raises(MemoryFull) as too_big:
        await memory.add(item("mem_y", "x" * 11), small)
    assert (too_big.value.what, too_big.value.limit) == ("bytes", 20)
    with pytest.raises(MemoryFull):
        await memory.edit("acme", ALICE, "mem_1", text="x" * 16, topic=None, now_ms=2, limits=small)
    assert (await memory.get("acme", ALICE, "mem_1")).text == "12345"
    await memory.add(item("mem_z", "x" * 10), small)  # exactly at the byte limit
    assert await memory.usage("acme", ALICE) == (3, 20)
    # another scope and another tenant have their own room
    await memory.add(item("mem_b", "x" * 20, scope=BOB), small)
    await memory.add(item("mem_g", "x" * 20, tenant="globex"), small)


async def test_racing_adds_never_pass_the_limit_together(memory):
    small = MemoryLimits(max_items=4, max_bytes=1_000)
    results = await asyncio.gather(
        *(memory.add(item(f"mem_{n}", f"fact {n}"), small) for n in range(10)), return_exceptions=True
    )
    stored = [r for r in results if not isinstance(r, BaseException)]
    assert all(isinstance(r, MemoryFull) for r in results if isinstance(r, BaseException))
    assert len(stored) == 4 and (await memory.usage("acme", ALICE))[0] == 4
    assert len(await memory.items("acme", ALICE)) == 4
