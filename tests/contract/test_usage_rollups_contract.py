"""The ``UsageRollups`` port's contract: the sums equal the stored usage records, by every grouping
and period, on SQLite (SQL over the records) and on DynamoDB (sums kept with each record's write).

The day is scripted: two tenants, three end users (containers), two images each, two models, the
three kinds, cache tokens, estimated records, records at the day's edges, and retried writes of
records stored already (which must add nothing). What is expected is computed here from the
records the store lists, independently of the sums.
"""

from __future__ import annotations

import itertools
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.aws.dynamodb.usage import DynamoDbUsageRollups
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.adapters.local.sqlite.usage import SqliteUsageRollups
from agentvm.observability.periods import DAY_MS, HOUR_MS, day_key, hour_key, iso, month_key
from agentvm.observability.pricing import Pricing, list_price, micro
from agentvm.observability.usage import COLUMNS, DIMENSIONS, UsageQuery, cells_of, summarise
from agentvm.records import UsageRecord
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

DAY = 1_767_225_600_000  # 2026-01-01T00:00:00Z
USERS = {"tenant-a": ("user-alice", "user-bob"), "tenant-b": ("user-alice",)}  # three end users
MODELS = ("anthropic/claude-haiku-4-5", "openai/gpt-4.1-mini")
KINDS = ("turn", "step", "compaction")


def scripted_day() -> list[UsageRecord]:
    """About a hundred records over one UTC day (its first and last millisecond included)."""
    out: list[UsageRecord] = []
    n = 0
    for tenant, users in USERS.items():
        for user in users:
            for image in ("img_1", "img_2"):
                for hour in (0, 7, 13, 23):
                    for model, kind in itertools.product(MODELS, KINDS):
                        if (n % 3 == 0) and kind == "compaction":
                            n += 1
                            continue
                        n += 1
                        at = DAY + hour * HOUR_MS + (n * 7919) % HOUR_MS
                        if n == 5:
                            at = DAY  # the day's first millisecond
                        if n == 6:
                            at = DAY + DAY_MS - 1  # its last
                        out.append(
                            UsageRecord(
                                turnId=f"turn_{tenant}_{n}" + ("" if kind == "turn" else f":{kind}:{n}"),
                                tenantId=tenant,
                                containerId=user,
                                imageId=f"{image}_{user}",
                                sessionId=f"ses_{image}_{user}",
                                model=model,
                                inputTokens=100 + n,
                                outputTokens=10 + n % 17,
                                cacheReadTokens=(n * 3) % 50,
                                cacheWriteTokens=(n * 5) % 20 if model.startswith("anthropic") else 0,
                                createdAt=at,
                                kind=kind,  # type: ignore[arg-type]
                                estimated=n % 11 == 0,
                            )
                        )
    return out


@asynccontextmanager
async def on_sqlite(tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    store = SqliteStore(tmp_path / "usage.db")
    try:
        yield store, SqliteUsageRollups(store)
    finally:
        store.close()


@asynccontextmanager
async def on_dynamodb(tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    with atomic_moto():
        store = DynamoDbStore(CONTRACT_TABLE)
        store.create_table()
        yield store, DynamoDbUsageRollups(CONTRACT_TABLE)


@asynccontextmanager
async def on_postgres(tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    # imported here: a session that runs no PostgreSQL test never imports psycopg
    from agentvm.adapters.postgres.store import PostgresStore
    from agentvm.adapters.postgres.usage import PostgresUsageRollups
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresStore(database), PostgresUsageRollups(database)


@pytest.fixture(
    params=[
        pytest.param(on_sqlite, id="sqlite"),
        pytest.param(on_dynamodb, id="dynamodb", marks=pytest.mark.aws),
        pytest.param(on_postgres, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def ledger(request, tmp_path):
    async with request.param(tmp_path) as pair:
        yield pair


async def stored_day(store: Any) -> list[UsageRecord]:
    records = scripted_day()
    for record in records:
        assert await store.put_usage(record)
    # a retried turn writes its usage again (different tokens, later): nothing may change
    for record in records[::7]:
        retry = record.model_copy(update={"inputTokens": 999_999, "createdAt": record.createdAt + 1})
        assert not await store.put_usage(retry)
    return records


def expected(query: UsageQuery, records: list[UsageRecord]) -> dict[tuple[str, ...], dict[str, int]]:
    """The rows, summed here from the records themselves."""
    out: dict[tuple[str, ...], dict[str, int]] = {}
    for r in records:
        if not query.start_ms <= r.createdAt < query.end_ms:
            continue
        if query.container_id is not None and r.containerId != query.container_id:
            continue
        period = {
            "hour": hour_key(r.createdAt),
            "day": day_key(r.createdAt),
            "month": month_key(r.createdAt),
            "range": f"{iso(query.start_ms)}/{iso(query.end_ms)}",
        }[query.period]
        values = {"tenant": r.tenantId, "container": r.containerId, "image": r.imageId}
        values |= {"model": r.model, "kind": r.kind}
        row = out.setdefault((period, *(values[d] for d in query.group_by)), dict.fromkeys(_METRICS, 0))
        row["records"] += 1
        row["turns"] += r.kind == "turn"
        row["inputTokens"] += r.inputTokens
        row["outputTokens"] += r.outputTokens
        row["cacheReadTokens"] += r.cacheReadTokens
        row["cacheWriteTokens"] += r.cacheWriteTokens
        row["totalTokens"] += r.inputTokens + r.outputTokens
        row["estimatedRecords"] += r.estimated
    return out


_METRICS = (
    "records",
    "turns",
    "inputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
    "totalTokens",
    "estimatedRecords",
)


def as_rows(query: UsageQuery, rows: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, int]]:
    return {
        (row["period"], *(row[COLUMNS[d]] for d in query.group_by)): {m: row[m] for m in _METRICS}
        for row in rows
    }


def groupings() -> list[tuple[str, ...]]:
    """Every subset of the groupings, in the order given."""
    return [g for n in range(len(DIMENSIONS) + 1) for g in itertools.combinations(DIMENSIONS, n)]


async def test_sums_equal_the_records_by_every_grouping_and_period(ledger):
    store, rollups = ledger
    await stored_day(store)
    records = [r for t in USERS for r in await store.list_usage(t)]
    assert len(records) == len(scripted_day())
    start, end = DAY - DAY_MS, DAY + 2 * DAY_MS
    # the sums a query reads depend only on its level (hours, or days per container): read once
    levels = {
        by_day: await cells_of(rollups, list(USERS), UsageQuery(start, end, "range", group_by))
        for by_day, group_by in ((False, ()), (True, ("container",)))
    }
    checked = 0
    for group_by in groupings():
        by_day = bool({"container", "image"} & set(group_by))
        for period in ("day", "month", "range") if by_day else ("hour", "day", "month", "range"):
            query = UsageQuery(start, end, period, group_by)  # type: ignore[arg-type]
            rows, totals = summarise(query, levels[by_day])
            assert as_rows(query, rows) == expected(query, records), (group_by, period)
            want = expected(UsageQuery(query.start_ms, query.end_ms), records)
            assert {m: totals[m] for m in _METRICS} == next(iter(want.values())), (group_by, period)
            checked += 1
    assert checked == 24 * 3 + 8 * 4  # 24 groupings with container or image x 3 periods, 8 others x 4


async def test_one_container_and_a_part_of_the_day(ledger):
    store, rollups = ledger
    records = await stored_day(store)
    alice = UsageQuery(DAY, DAY + DAY_MS, "day", ("image", "kind"), container_id="user-alice")
    rows, _ = summarise(alice, await cells_of(rollups, ["tenant-a"], alice))
    mine = [r for r in records if r.tenantId == "tenant-a"]
    assert as_rows(alice, rows) == expected(alice, mine)
    assert {row["imageId"] for row in rows} == {"img_1_user-alice", "img_2_user-alice"}

    morning = UsageQuery(DAY + 7 * HOUR_MS, DAY + 14 * HOUR_MS, "hour", ("model",))
    rows, _ = summarise(morning, await cells_of(rollups, ["tenant-b"], morning))
    assert as_rows(morning, rows) == expected(morning, [r for r in records if r.tenantId == "tenant-b"])
    assert {row["period"] for row in rows} == {"2026-01-01T07", "2026-01-01T13"}


async def test_the_tenants_with_usage_are_listed_and_nothing_leaks_between_them(ledger):
    store, rollups = ledger
    await stored_day(store)
    assert await rollups.tenants_with_usage(DAY, DAY + DAY_MS) == ["tenant-a", "tenant-b"]
    assert "tenant-c" not in await rollups.tenants_with_usage(DAY, DAY + DAY_MS)
    for tenant in ("tenant-c", "tenant-a#x", "tenant"):
        assert await rollups.hour_cells(tenant, DAY, DAY + DAY_MS) == []
        assert await rollups.day_cells(tenant, DAY, DAY + DAY_MS) == []
    b_cells = await rollups.day_cells("tenant-b", DAY, DAY + DAY_MS)
    assert {c.tenant_id for c in b_cells} == {"tenant-b"} and {c.container_id for c in b_cells} == {
        "user-alice"
    }
    assert await rollups.day_cells("tenant-b", DAY, DAY + DAY_MS, "user-bob") == []


async def test_a_range_before_or_after_the_records_is_empty(ledger):
    store, rollups = ledger
    await stored_day(store)
    assert await rollups.hour_cells("tenant-a", DAY - DAY_MS, DAY) == []
    assert await rollups.day_cells("tenant-a", DAY + DAY_MS, DAY + 2 * DAY_MS) == []
    assert await rollups.tenants_with_usage(DAY + 40 * DAY_MS, DAY + 41 * DAY_MS) == []


def _savings(records: list[UsageRecord], markup: Decimal) -> Decimal:
    """What caching saved, record by record at the library's list prices, x the markup."""
    total = Decimal(0)
    for r in records:
        price = list_price(r.model)
        assert price is not None, r.model
        total += r.cacheReadTokens * (price.input - price.cache_read) - r.cacheWriteTokens * (
            price.cache_write - price.input
        )
    return total / Decimal(1_000_000) * markup


async def test_cache_savings_from_the_sums_equal_the_records_arithmetic(ledger):
    store, rollups = ledger
    records = await stored_day(store)
    assert sum(r.cacheReadTokens for r in records) > 0 and sum(r.cacheWriteTokens for r in records) > 0
    pricing = Pricing.of(1.05, None)
    query = UsageQuery(DAY, DAY + DAY_MS, "day", ("container", "model"))
    rows, totals = summarise(
        query,
        await cells_of(rollups, ["tenant-a"], query),
        price=pricing.add,
        finish=lambda sums: pricing.finish(sums, with_cost=False),
    )
    mine = [r for r in records if r.tenantId == "tenant-a"]
    assert totals["cacheSavings"] == micro(_savings(mine, Decimal("1.05")))
    for row in rows:
        theirs = [r for r in mine if (r.containerId, r.model) == (row["containerId"], row["model"])]
        assert row["cacheSavings"] == micro(_savings(theirs, Decimal("1.05"))), row
    # Anthropic's rows pay a cache-write premium; OpenAI's (no write premium) only save
    assert {row["model"] for row in rows} == set(MODELS) and all(row["cacheSavings"] > 0 for row in rows)
