"""The ``Counters`` contract, on SQLite, DynamoDB (moto) and PostgreSQL: one suite, so they cannot
drift."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.aws.dynamodb.counters import DynamoDbCounters
from agentvm.adapters.local.sqlite.counters import SqliteCounters
from agentvm.adapters.postgres.counters import PostgresCounters
from tests.contract.moto_table import REGION, TABLE, atomic_moto, backends, create_table

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


@pytest.fixture(
    params=backends(SqliteCounters, DynamoDbCounters, file="counters.db", postgres=PostgresCounters)
)
async def counters(request, tmp_path):
    async with request.param(tmp_path) as instance:
        yield instance


def later() -> int:
    return int(time.time()) + 3600


async def test_incr_creates_then_adds_and_returns_the_new_values(counters):
    assert await counters.incr("usage#2025-01#acme", {"month": 5, "d07": 5}, expires_at=later()) == {
        "month": 5,
        "d07": 5,
    }
    assert await counters.incr("usage#2025-01#acme", {"month": 7, "d08": 7}, expires_at=later()) == {
        "month": 12,
        "d08": 7,
    }
    assert await counters.get("usage#2025-01#acme") == {"month": 12, "d07": 5, "d08": 7}


async def test_unknown_counter_reads_empty(counters):
    assert await counters.get("rate#nobody#1") == {}


async def test_counters_with_different_keys_are_independent(counters):
    await counters.incr("usage#2025-01#acme", {"month": 1}, expires_at=later())
    await counters.incr("usage#2025-01#acme#user-alice", {"month": 2}, expires_at=later())
    await counters.incr("usage#2025-01#acme#user#alice", {"month": 3}, expires_at=later())
    assert await counters.get("usage#2025-01#acme") == {"month": 1}
    assert await counters.get("usage#2025-01#acme#user-alice") == {"month": 2}
    assert await counters.get("usage#2025-01#acme#user#alice") == {"month": 3}


async def test_an_expired_counter_reads_empty_and_starts_over(counters):
    past = int(time.time()) - 1
    assert await counters.incr("rate#k#1", {"n": 4}, expires_at=past) == {"n": 4}
    assert await counters.get("rate#k#1") == {}
    assert await counters.incr("rate#k#1", {"n": 1}, expires_at=later()) == {"n": 1}
    assert await counters.get("rate#k#1") == {"n": 1}


async def test_concurrent_increments_are_never_lost(counters):
    results = await asyncio.gather(
        *(counters.incr("rate#k#2", {"n": 1}, expires_at=later()) for _ in range(40))
    )
    assert sorted(r["n"] for r in results) == list(range(1, 41))
    assert await counters.get("rate#k#2") == {"n": 40}


@pytest.mark.parametrize("fields", [{}, {"Month": 1}, {"a-b": 1}, {"x" * 17: 1}])
async def test_bad_field_names_are_refused(counters, fields):
    with pytest.raises(ValueError):
        await counters.incr("k", fields, expires_at=later())


async def test_a_lease_takes_the_whole_amount_while_it_fits_and_returns_the_new_total(counters):
    first = await counters.lease("rate#k#3", "n", 10, limit=25, expires_at=later())
    second = await counters.lease("rate#k#3", "n", 10, limit=25, expires_at=later())
    assert (first.granted, first.total) == (10, 10)
    assert (second.granted, second.total) == (10, 20)
    assert await counters.get("rate#k#3") == {"n": 20}


async def test_a_lease_past_the_limit_takes_what_is_left_then_nothing(counters):
    await counters.lease("rate#k#4", "n", 10, limit=25, expires_at=later())
    await counters.lease("rate#k#4", "n", 10, limit=25, expires_at=later())
    rest = await counters.lease("rate#k#4", "n", 10, limit=25, expires_at=later())
    assert (rest.granted, rest.total) == (5, 25)
    refused = await counters.lease("rate#k#4", "n", 1, limit=25, expires_at=later())
    assert (refused.granted, refused.total) == (0, 25)
    assert await counters.get("rate#k#4") == {"n": 25}  # a refusal writes nothing


async def test_a_lease_never_takes_more_than_the_limit_at_once(counters):
    lease = await counters.lease("rate#k#5", "n", 50, limit=3, expires_at=later())
    assert (lease.granted, lease.total) == (3, 3)


async def test_a_lease_counts_with_increments_of_the_same_field(counters):
    await counters.incr("rate#k#6", {"n": 7}, expires_at=later())
    lease = await counters.lease("rate#k#6", "n", 5, limit=10, expires_at=later())
    assert (lease.granted, lease.total) == (3, 10)


async def test_a_lease_on_an_expired_window_starts_it_over(counters):
    past = int(time.time()) - 1
    await counters.lease("rate#k#7", "n", 4, limit=4, expires_at=past)
    assert await counters.get("rate#k#7") == {}
    lease = await counters.lease("rate#k#7", "n", 3, limit=4, expires_at=later())
    assert (lease.granted, lease.total) == (3, 3)
    assert await counters.get("rate#k#7") == {"n": 3}


async def test_concurrent_lessees_never_take_more_than_the_limit(counters):
    leases = await asyncio.gather(
        *(counters.lease("rate#k#8", "n", 1 + i % 4, limit=37, expires_at=later()) for i in range(30))
    )
    assert sum(lease.granted for lease in leases) == 37  # asked for 75: every request left was taken
    assert all(lease.total <= 37 for lease in leases)
    assert all(lease.total == 37 for lease in leases if lease.granted == 0)
    assert await counters.get("rate#k#8") == {"n": 37}


async def test_a_whole_lease_takes_all_it_asks_or_nothing(counters):
    first = await counters.lease("storage#acme", "bytes", 60, limit=100, expires_at=later(), whole=True)
    assert (first.granted, first.total) == (60, 60)
    refused = await counters.lease("storage#acme", "bytes", 41, limit=100, expires_at=later(), whole=True)
    assert (refused.granted, refused.total) == (0, 60)  # 40 were left: not a part of it
    fits = await counters.lease("storage#acme", "bytes", 40, limit=100, expires_at=later(), whole=True)
    assert (fits.granted, fits.total) == (40, 100)
    too_big = await counters.lease("storage#other", "bytes", 101, limit=100, expires_at=later(), whole=True)
    assert (too_big.granted, too_big.total) == (0, 0)
    assert await counters.get("storage#acme") == {"bytes": 100}
    assert await counters.get("storage#other") == {}


async def test_concurrent_whole_lessees_never_pass_the_limit_together(counters):
    leases = await asyncio.gather(
        *(
            counters.lease("storage#k", "bytes", 10, limit=95, expires_at=later(), whole=True)
            for _ in range(30)
        )
    )
    assert sorted(lease.granted for lease in leases) == [0] * 21 + [10] * 9  # 9 fit; the 10th would pass
    assert await counters.get("storage#k") == {"bytes": 90}


async def test_a_negative_increment_gives_back(counters):
    await counters.lease("storage#back", "bytes", 70, limit=100, expires_at=later(), whole=True)
    assert await counters.incr("storage#back", {"bytes": -30}, expires_at=later()) == {"bytes": 40}
    again = await counters.lease("storage#back", "bytes", 60, limit=100, expires_at=later(), whole=True)
    assert (again.granted, again.total) == (60, 100)


@pytest.mark.parametrize(("field", "amount", "limit"), [("N", 1, 5), ("n", 0, 5), ("n", 1, 0)])
async def test_bad_leases_are_refused(counters, field, amount, limit):
    with pytest.raises(ValueError):
        await counters.lease("k", field, amount, limit=limit, expires_at=later())


@contextlib.contextmanager
def dynamodb_calls(counters: DynamoDbCounters) -> Iterator[list[str]]:
    """The names of the DynamoDB operations ``counters`` makes inside the block, in order."""
    operations: list[str] = []
    events = counters._table._get_connection().connection.client.meta.events

    def record(model: Any, **_: Any) -> None:
        operations.append(model.name)

    events.register("before-call.dynamodb", record)
    try:
        yield operations
    finally:
        events.unregister("before-call.dynamodb", record)


@pytest.mark.aws
async def test_on_dynamodb_a_lease_is_one_update_and_a_refusal_one_failed_update_with_no_read():
    with atomic_moto():
        create_table()
        counters = DynamoDbCounters(TABLE, region=REGION)
        with dynamodb_calls(counters) as operations:
            assert (await counters.lease("rate#k#9", "n", 5, limit=5, expires_at=later())).granted == 5
            assert (await counters.lease("rate#k#9", "n", 5, limit=5, expires_at=later())).granted == 0
    assert operations == ["UpdateItem", "UpdateItem"]  # the refusal learns the count from ALL_OLD


@pytest.mark.aws
async def test_on_dynamodb_a_refused_whole_lease_is_one_failed_update_and_no_partial_retry():
    with atomic_moto():
        create_table()
        counters = DynamoDbCounters(TABLE, region=REGION)
        with dynamodb_calls(counters) as operations:
            assert (
                await counters.lease("storage#x", "bytes", 7, limit=10, expires_at=later(), whole=True)
            ).granted == 7
            refused = await counters.lease("storage#x", "bytes", 7, limit=10, expires_at=later(), whole=True)
    assert (refused.granted, refused.total) == (0, 7)
    assert operations == ["UpdateItem", "UpdateItem"]


@contextlib.asynccontextmanager
async def postgres_nodes(count: int) -> AsyncIterator[list[PostgresCounters]]:
    """``count`` nodes' counters on one fresh database: each node its own pool of 4 connections."""
    from agentvm.adapters.postgres.database import Database
    from tests.postgres_server import fresh_database

    async with fresh_database() as first:
        others = [Database(first.url, min_size=1, max_size=4) for _ in range(count - 1)]
        await asyncio.gather(*(node.open() for node in others))
        try:
            yield [PostgresCounters(node) for node in (first, *others)]
        finally:
            await asyncio.gather(*(node.close() for node in others))


@pytest.mark.postgres
async def test_on_postgres_three_nodes_adding_to_one_counter_lose_nothing_and_never_deadlock():
    async with postgres_nodes(3) as nodes:
        results = await asyncio.gather(
            *(
                nodes[i % 3].incr("usage#k", {"month": 1, f"d{i % 5:02d}": 1}, expires_at=later())
                for i in range(60)
            )
        )
        assert sorted(r["month"] for r in results) == list(range(1, 61))
        assert await nodes[1].get("usage#k") == {"month": 60} | {f"d{d:02d}": 12 for d in range(5)}


@pytest.mark.postgres
async def test_on_postgres_lessees_on_three_nodes_never_take_more_than_the_limit_together():
    async with postgres_nodes(3) as nodes:
        leases = await asyncio.gather(
            *(nodes[i % 3].lease("rate#k", "n", 1 + i % 4, limit=50, expires_at=later()) for i in range(45)),
            *(
                nodes[i % 3].lease("storage#k", "bytes", 10, limit=95, expires_at=later(), whole=True)
                for i in range(30)
            ),
        )
        rate, storage = leases[:45], leases[45:]
        assert sum(lease.granted for lease in rate) == 50
        assert sorted(lease.granted for lease in storage) == [0] * 21 + [10] * 9
        assert await nodes[2].get("rate#k") == {"n": 50}
        assert await nodes[0].get("storage#k") == {"bytes": 90}
