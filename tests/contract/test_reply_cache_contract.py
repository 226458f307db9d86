"""The ``ReplyCache`` port's contract, on SQLite, DynamoDB (moto) and PostgreSQL: a reply is read back by its
tenant and key only, not after it expires, a put replaces it, two keys of one set are both kept (a
third evicts the older, or an expired one first), and a tenant never holds more than its slots,
however many replies it stores."""

from __future__ import annotations

import asyncio
import inspect
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.aws.dynamodb.replies import DynamoDbReplyCache
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.local.sqlite.replies import SqliteReplyCache
from agentvm.adapters.postgres.replies import PostgresReplyCache
from agentvm.ports import CachedReply, reply_set
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

SLOTS = 8


@asynccontextmanager
async def on_sqlite(tmp_path: Any) -> AsyncIterator[Any]:
    cache = SqliteReplyCache(tmp_path / "a.db", slots=SLOTS)
    try:
        yield cache
    finally:
        cache.close()


@asynccontextmanager
async def on_dynamodb(tmp_path: Any) -> AsyncIterator[Any]:
    with atomic_moto():
        DynamoDbStore(CONTRACT_TABLE).create_table()
        yield DynamoDbReplyCache(CONTRACT_TABLE, slots=SLOTS)


@asynccontextmanager
async def on_postgres(tmp_path: Any) -> AsyncIterator[Any]:
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresReplyCache(database, slots=SLOTS)


@pytest.fixture(
    params=[
        pytest.param(on_sqlite, id="sqlite"),
        pytest.param(on_dynamodb, id="dynamodb", marks=pytest.mark.aws),
        pytest.param(on_postgres, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def cache(request, tmp_path):
    async with request.param(tmp_path) as adapter:
        yield adapter


async def count(cache: Any, tenant_id: str) -> int:
    """The entries the tenant holds (``count`` is a plain method on SQLite and DynamoDB, a
    coroutine on PostgreSQL)."""
    held = cache.count(tenant_id)
    return int(await held) if inspect.isawaitable(held) else int(held)


def reply(key: str, text: str = "Hello!", *, expires_at: int = 10_000) -> CachedReply:
    return CachedReply(key, text, "anthropic/x", 120, 40, created_at=1_000, expires_at=expires_at)


async def test_a_stored_reply_is_read_back_by_its_key(cache):
    await cache.put("acme", reply("k1", "Opening hours are 9 to 5."))
    assert await cache.get("acme", "k1", now_ms=2_000) == reply("k1", "Opening hours are 9 to 5.")
    assert await cache.get("acme", "k2", now_ms=2_000) is None


async def test_another_tenant_never_reads_it(cache):
    await cache.put("acme", reply("k1"))
    assert await cache.get("globex", "k1", now_ms=2_000) is None
    await cache.put("globex", reply("k1", "Globex's own answer"))
    assert (await cache.get("acme", "k1", now_ms=2_000)).text == "Hello!"
    assert (await cache.get("globex", "k1", now_ms=2_000)).text == "Globex's own answer"


async def test_an_expired_reply_is_not_returned(cache):
    await cache.put("acme", reply("k1", expires_at=5_000))
    assert await cache.get("acme", "k1", now_ms=4_999) is not None
    assert await cache.get("acme", "k1", now_ms=5_000) is None


async def test_a_put_replaces_the_reply(cache):
    await cache.put("acme", reply("k1", "old"))
    await cache.put("acme", reply("k1", "new"))
    assert (await cache.get("acme", "k1", now_ms=2_000)).text == "new"


async def test_a_tenant_holds_at_most_its_slots(cache):
    for n in range(40):
        await cache.put("acme", reply(f"question-{n}", f"answer {n}"))
    await cache.put("globex", reply("question-0"))
    assert await count(cache, "acme") <= SLOTS
    assert await count(cache, "globex") == 1
    # the last one stored is always there; an evicted one is a miss, never another key's reply
    assert (await cache.get("acme", "question-39", now_ms=2_000)).text == "answer 39"
    for n in range(40):
        found = await cache.get("acme", f"question-{n}", now_ms=2_000)
        assert found is None or found.text == f"answer {n}"


def same_set(n: int) -> list[str]:
    """``n`` keys that hash to one set."""
    keys = [f"question-{i}" for i in range(200)]
    first = reply_set(keys[0], SLOTS)
    return [k for k in keys if reply_set(k, SLOTS) == first][:n]


async def test_two_keys_of_one_set_are_both_kept_and_a_third_evicts_the_older(cache):
    one, two, three = same_set(3)
    await cache.put("acme", CachedReply(one, "1", "m", 1, 1, created_at=1_000, expires_at=10_000))
    await cache.put("acme", CachedReply(two, "2", "m", 1, 1, created_at=1_100, expires_at=10_000))
    assert [(await cache.get("acme", k, now_ms=2_000)).text for k in (one, two)] == ["1", "2"]
    await cache.put("acme", CachedReply(three, "3", "m", 1, 1, created_at=1_200, expires_at=10_000))
    assert await cache.get("acme", one, now_ms=2_000) is None  # the older one went
    assert [(await cache.get("acme", k, now_ms=2_000)).text for k in (two, three)] == ["2", "3"]


async def test_an_expired_reply_is_evicted_before_a_live_one(cache):
    one, two, three = same_set(3)
    await cache.put("acme", CachedReply(one, "1", "m", 1, 1, created_at=1_000, expires_at=10_000))
    await cache.put("acme", CachedReply(two, "2", "m", 1, 1, created_at=1_100, expires_at=1_500))
    await cache.put("acme", CachedReply(three, "3", "m", 1, 1, created_at=2_000, expires_at=10_000))
    assert [(await cache.get("acme", k, now_ms=2_000)).text for k in (one, three)] == ["1", "3"]


async def test_concurrent_puts_into_one_set_never_mix_keys_up(cache):
    one, two = same_set(2)
    await asyncio.gather(
        *(
            cache.put("acme", CachedReply(k, k, "m", 1, 1, created_at=1_000 + n, expires_at=10_000))
            for n in range(6)
            for k in (one, two)
        )
    )
    assert await count(cache, "acme") <= 2
    found = [await cache.get("acme", k, now_ms=2_000) for k in (one, two)]
    assert all(r is None or r.text == r.key for r in found)  # a miss at worst, never another's reply
    if not isinstance(cache, DynamoDbReplyCache):
        # SQLite has one writer and PostgreSQL locks the set: neither loses a reply. DynamoDB reads
        # then writes without a lock: two puts racing for one free way keep one (a later miss).
        assert [r.text for r in found if r is not None] == [one, two]
