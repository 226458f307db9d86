"""The ``RunningTurns`` port's contract, on SQLite, DynamoDB (moto) and PostgreSQL: marks per tenant and
container, idempotent, oldest first; tokens so far summed from a turn's usage records (the first
model call and its steps, and nothing of another turn whose id merely starts the same)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.aws.dynamodb.running import DynamoDbRunningTurns
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.local.sqlite.running import SqliteRunningTurns
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.ports import RunningTurn, TurnTokens
from agentvm.records import UsageRecord
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@asynccontextmanager
async def on_sqlite(tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    store = SqliteStore(tmp_path / "a.db")
    running = SqliteRunningTurns(tmp_path / "a.db", store)
    try:
        yield store, running
    finally:
        running.close()
        store.close()


@asynccontextmanager
async def on_dynamodb(tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    with atomic_moto():
        store = DynamoDbStore(CONTRACT_TABLE)
        store.create_table()
        yield store, DynamoDbRunningTurns(CONTRACT_TABLE)


@asynccontextmanager
async def on_postgres(tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    from agentvm.adapters.postgres.running import PostgresRunningTurns
    from agentvm.adapters.postgres.store import PostgresStore
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresStore(database), PostgresRunningTurns(database)


@pytest.fixture(
    params=[
        pytest.param(on_sqlite, id="sqlite"),
        pytest.param(on_dynamodb, id="dynamodb", marks=pytest.mark.aws),
        pytest.param(on_postgres, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def ports(request, tmp_path):
    async with request.param(tmp_path) as pair:
        yield pair


def turn(n: int, tenant: str = "acme", container: str = "user-alice") -> RunningTurn:
    return RunningTurn(tenant, container, f"img_{n}", f"ses_{n}", f"turn_{n}", 1_000 + n, "anthropic/x")


def usage(turn_id: str, inputs: int, outputs: int, reads: int = 0) -> UsageRecord:
    return UsageRecord(
        turnId=turn_id,
        tenantId="acme",
        containerId="user-alice",
        imageId="img_1",
        sessionId="ses_1",
        model="anthropic/x",
        inputTokens=inputs,
        outputTokens=outputs,
        cacheReadTokens=reads,
        createdAt=5,
        kind="turn" if ":step:" not in turn_id else "step",
    )


async def test_marked_turns_are_listed_per_tenant_and_container_oldest_first(ports):
    _, running = ports
    for t in (turn(3), turn(1, container="user-bob"), turn(2), turn(9, tenant="globex")):
        await running.mark(t)
    await running.mark(turn(2))  # again: idempotent

    assert await running.running("acme") == [turn(1, container="user-bob"), turn(2), turn(3)]
    assert await running.running("acme", "user-alice") == [turn(2), turn(3)]
    assert await running.running("acme", "user") == []  # a prefix of an id is another container
    assert await running.running("globex") == [turn(9, tenant="globex")]
    assert await running.running("nobody") == []


async def test_an_unmarked_turn_is_no_longer_listed(ports):
    _, running = ports
    await running.mark(turn(1))
    await running.mark(turn(2))

    await running.unmark("acme", "user-alice", "turn_1")
    await running.unmark("acme", "user-alice", "turn_404")  # nothing to remove: no error

    assert await running.running("acme") == [turn(2)]


async def test_container_ids_with_hashes_do_not_match_their_neighbours(ports):
    _, running = ports
    await running.mark(turn(1, container="a"))
    await running.mark(turn(2, container="a#b"))

    assert await running.running("acme", "a") == [turn(1, container="a")]
    assert await running.running("acme", "a#b") == [turn(2, container="a#b")]


async def test_tokens_so_far_sum_the_turns_usage_records_and_nothing_else(ports):
    store, running = ports
    await store.put_usage(usage("turn_1", 100, 10, reads=60))
    for n in range(1, 11):  # ten later steps (more than one batch of reads)
        await store.put_usage(usage(f"turn_1:step:{n}", 200, 20))
    await store.put_usage(usage("turn_10", 7, 7))  # another turn whose id starts the same
    await store.put_usage(usage("turn_1:compact:4", 50, 5))  # a compaction, not a model call of the turn

    tokens = await running.tokens(["turn_1", "turn_10", "turn_2"])

    assert tokens["turn_1"] == TurnTokens(11, 100 + 10 * 200, 10 + 10 * 20, 60, 0)
    assert tokens["turn_10"] == TurnTokens(1, 7, 7, 0, 0)
    assert tokens["turn_2"] == TurnTokens()


async def test_stale_marks_of_every_tenant_are_listed_oldest_first(ports):
    _, running = ports
    if not hasattr(running, "stale"):
        pytest.skip("the orphan sweeper's stale marks: the local and cluster hosts only (turns/orphans.py)")
    for t in (turn(3), turn(1, tenant="globex"), turn(2), turn(7)):
        await running.mark(t)
    assert await running.stale(1_003, 10) == [turn(1, tenant="globex"), turn(2), turn(3)]
    assert await running.stale(1_003, 2) == [turn(1, tenant="globex"), turn(2)]
    assert await running.stale(1_000, 10) == []
