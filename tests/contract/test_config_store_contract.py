"""The ``ConfigStore`` contract, on SQLite, DynamoDB (moto) and PostgreSQL: one versioned record of values per
scope, written with its audit entries all or nothing."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.config import DynamoDbConfigStore
from agentvm.adapters.local.sqlite.config import SqliteConfigStore
from agentvm.adapters.postgres.config import PostgresConfigStore
from agentvm.records import ConfigChange, ConfigValues
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteConfigStore, DynamoDbConfigStore, postgres=PostgresConfigStore))
async def store(request, tmp_path):
    async with request.param(tmp_path) as s:
        yield s


def change(key: str, new, at: int, scope: str = "server") -> ConfigChange:
    return ConfigChange(scope=scope, key=key, old=None, new=new, by="key1", at=at)


async def test_values_are_versioned_and_a_stale_write_changes_nothing(store):
    assert await store.get_values("server") is None
    first = ConfigValues(scope="server", values={"llm.defaultModel": "echo/a"}, version=1, updatedAt=1)
    assert await store.put_values(first, [change("llm.defaultModel", "echo/a", 1)])
    assert not await store.put_values(first, [change("llm.defaultModel", "echo/a", 2)])  # version 1 exists
    second = ConfigValues(scope="server", values={"llm.defaultModel": "echo/b"}, version=2, updatedAt=2)
    assert await store.put_values(second, [change("llm.defaultModel", "echo/b", 2)])
    stale = ConfigValues(scope="server", values={"llm.defaultModel": "echo/c"}, version=2, updatedAt=3)
    assert not await store.put_values(stale, [change("llm.defaultModel", "echo/c", 3)])

    assert (await store.get_values("server")).values == {"llm.defaultModel": "echo/b"}
    log = await store.list_changes("server")
    assert [c.new for c in log] == ["echo/b", "echo/a"]  # newest first; refused writes left no entry


async def test_scopes_are_separate_and_the_log_is_limited(store):
    tenant = ConfigValues(scope="tenant:acme", values={"llm.maxOutputTokens": 10}, version=1, updatedAt=1)
    changes = [change("llm.maxOutputTokens", n, n, scope="tenant:acme") for n in range(1, 4)]
    assert await store.put_values(tenant, changes)
    assert await store.get_values("tenant:other") is None
    assert await store.list_changes("server") == []
    assert [c.new for c in await store.list_changes("tenant:acme", limit=2)] == [3, 2]


async def test_of_concurrent_writers_of_one_version_exactly_one_wins(store):
    attempts = [
        ConfigValues(scope="server", values={"llm.defaultModel": f"echo/{n}"}, version=1, updatedAt=n)
        for n in range(8)
    ]
    results = await asyncio.gather(
        *(
            store.put_values(v, [change("llm.defaultModel", v.values["llm.defaultModel"], n)])
            for n, v in enumerate(attempts)
        )
    )
    assert sum(results) == 1
    winner = attempts[results.index(True)]
    assert await store.get_values("server") == winner
    assert [c.new for c in await store.list_changes("server")] == [winner.values["llm.defaultModel"]]
