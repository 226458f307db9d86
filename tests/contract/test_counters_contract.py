"""The ``Counters`` contract, on SQLite and on DynamoDB (moto): one suite, so they cannot drift."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentvm.adapters.aws.dynamodb_counters import DynamoDbCounters
from agentvm.adapters.local.sqlite_counters import SqliteCounters
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteCounters, DynamoDbCounters, file="counters.db"))
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
