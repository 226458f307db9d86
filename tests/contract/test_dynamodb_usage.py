"""Usage on DynamoDB: records written once with no transaction, closed hours rolled up by the job,
and the sums equal to the records before, during and after every rollup (late writes included)."""

from __future__ import annotations

import asyncio
import json

import pytest
from pynamodb.exceptions import PutError

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.aws.dynamodb.usage import GRACE_MS, DynamoDbUsageRollups, agg_pk, open_pk
from agentvm.observability.periods import DAY_MS, HOUR_MS
from agentvm.observability.usage import UsageQuery, cells_of, summarise
from agentvm.records import UsageRecord
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.test_usage_rollups_contract import (
    DAY,
    USERS,
    as_rows,
    expected,
    groupings,
    scripted_day,
)

pytestmark = pytest.mark.aws

AFTER_DAY = DAY + DAY_MS + HOUR_MS + GRACE_MS  # every hour of the scripted day is closed


def usage(turn: str = "turn_1", **fields) -> UsageRecord:
    values = {
        "turnId": turn,
        "tenantId": "acme",
        "containerId": "user-alice",
        "imageId": "img_1",
        "sessionId": "ses_1",
        "model": "anthropic/claude-haiku-4-5",
        "inputTokens": 500,
        "outputTokens": 200,
        "cacheReadTokens": 300,
        "createdAt": DAY + 1000,
        **fields,
    }
    return UsageRecord(**values)


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(DAY + 2000)  # the writer's wall clock, inside the first hour of the day


@pytest.fixture
def store(aws, clock):
    store = DynamoDbStore(CONTRACT_TABLE)
    store.create_table()
    store._usage.clock = clock
    return store


@pytest.fixture
def rollups(store):
    return DynamoDbUsageRollups(CONTRACT_TABLE)


def raw_client(store: DynamoDbStore):
    return store._m.base._get_connection().connection.client


def partition(store: DynamoDbStore, pk: str) -> list[dict]:
    return raw_client(store).query(
        TableName=CONTRACT_TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ConsistentRead=True,
    )["Items"]


async def sums(rollups: DynamoDbUsageRollups, tenant: str = "acme") -> tuple[list, list]:
    return (
        await rollups.hour_cells(tenant, DAY, DAY + DAY_MS),
        await rollups.day_cells(tenant, DAY, DAY + DAY_MS),
    )


async def assert_exact(store: DynamoDbStore, rollups: DynamoDbUsageRollups) -> None:
    """Every grouping and period of the day's sums equals the stored records (the contract's check)."""
    records = [r for t in USERS for r in await store.list_usage(t)]
    start, end = DAY - DAY_MS, DAY + 2 * DAY_MS
    levels = {
        by_day: await cells_of(rollups, list(USERS), UsageQuery(start, end, "range", group_by))
        for by_day, group_by in ((False, ()), (True, ("container",)))
    }
    for group_by in groupings():
        by_day = bool({"container", "image"} & set(group_by))
        for period in ("day", "month", "range") if by_day else ("hour", "day", "month", "range"):
            query = UsageQuery(start, end, period, group_by)  # type: ignore[arg-type]
            rows, _ = summarise(query, levels[by_day])
            assert as_rows(query, rows) == expected(query, records), (group_by, period)
    alice = UsageQuery(DAY, DAY + DAY_MS, "day", ("image", "kind"), container_id="user-alice")
    rows, _ = summarise(alice, await cells_of(rollups, ["tenant-a"], alice))
    assert as_rows(alice, rows) == expected(alice, [r for r in records if r.tenantId == "tenant-a"])


async def write_day(store: DynamoDbStore, clock: Clock) -> list[UsageRecord]:
    """The contract's scripted day, each record written at its own time (and retries, refused)."""
    records = sorted(scripted_day(), key=lambda r: r.createdAt)
    for record in records:
        clock.now = record.createdAt + 5
        assert await store.put_usage(record)
    for record in records[::7]:  # retried at once (a retry written later would touch its hour again)
        clock.now = record.createdAt + 10
        assert not await store.put_usage(record.model_copy(update={"inputTokens": 999_999}))
    return records


def sums_items(store: DynamoDbStore) -> list[dict]:
    """The rolled-up state of both tenants (markers and day items), to compare runs."""
    return sorted(
        (item for t in USERS for item in partition(store, agg_pk(t))),
        key=lambda item: item["sk"]["S"],
    )


# writes


async def test_a_failed_put_writes_no_record_and_its_retry_counts_once(store, rollups):
    too_big = usage(model="x" * 420_000)  # over DynamoDB's 400 KB item limit: the put fails

    with pytest.raises(PutError):
        await store.put_usage(too_big)

    assert await store.list_usage("acme") == []
    assert await sums(rollups) == ([], [])
    assert await store.put_usage(usage())
    hours, days = await sums(rollups)
    assert [(c.records, c.input_tokens, c.cache_read_tokens) for c in hours + days] == [(1, 500, 300)] * 2


async def test_a_record_written_again_is_refused_and_counted_once(store, rollups):
    assert await store.put_usage(usage())
    assert not await store.put_usage(usage(inputTokens=7))  # a redelivered turn, other tokens

    [record] = await store.list_usage("acme")
    hours, days = await sums(rollups)
    assert record.inputTokens == 500
    assert [(c.records, c.input_tokens) for c in hours + days] == [(1, 500), (1, 500)]


async def test_a_record_is_one_put_with_no_transaction_and_its_hour_is_marked_once(store, monkeypatch):
    calls: list[str] = []
    client = raw_client(store)
    real = type(client)._make_api_call

    def counting(self, operation, params):
        calls.append(operation)
        return real(self, operation, params)

    monkeypatch.setattr(type(client), "_make_api_call", counting)
    await store.put_usage(usage())
    await store.put_usage(usage("turn_2", containerId="user-bob"))  # same hour: no second marker write
    await store.put_usage(usage("turn_3", createdAt=DAY + 3_600_000 * 5 + 1))  # another hour

    assert "TransactWriteItems" not in calls
    assert calls.count("PutItem") == 4  # the month's directory item, then the three records
    assert calls.count("UpdateItem") == 2  # the two hours' markers
    keys = sorted(item["sk"]["S"] for item in partition(store, agg_pk("acme")))
    assert keys == ["H#2026-01-01T00", "H#2026-01-01T05"]  # no sums before a rollup
    directory = partition(store, "USAGEDIR#2026-01")
    assert [item["sk"]["S"] for item in directory] == ["acme"]


# the rollup


async def test_sums_are_exact_before_during_and_after_the_rollup_of_the_day(store, rollups, clock):
    await write_day(store, clock)
    await assert_exact(store, rollups)  # nothing rolled: read from the records

    # the job runs during the day: only the hours closed by then are rolled, the rest read raw
    run = await rollups.roll_closed_hours(DAY + 14 * HOUR_MS + GRACE_MS, limit=100)
    assert run.rolled == 3 * 2  # hours 0, 7 and 13 of both tenants (one marker per tenant hour)
    await assert_exact(store, rollups)

    run = await rollups.roll_closed_hours(AFTER_DAY, limit=100)
    assert (run.rolled, run.more) == (2, False)  # hour 23 of both tenants
    await assert_exact(store, rollups)
    markers = [i for i in sums_items(store) if i["sk"]["S"].startswith("H#")]
    assert markers and all("gsi2pk" not in m and m["rv"] == m["v"] for m in markers)


async def test_a_rollup_run_twice_or_concurrently_writes_the_same_sums(store, rollups, clock):
    await write_day(store, clock)
    await rollups.roll_closed_hours(AFTER_DAY, limit=100)
    once = sums_items(store)

    assert (await rollups.roll_closed_hours(AFTER_DAY + 60_000, limit=100)).rolled == 0
    for item in once:  # force every hour to be rolled again, twice at the same time
        if item["sk"]["S"].startswith("H#"):
            tenant = item["pk"]["S"].removeprefix("USAGEAGG#")
            raw_client(store).update_item(
                TableName=CONTRACT_TABLE,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET gsi2pk = :o, gsi2sk = :s",
                ExpressionAttributeValues={
                    ":o": {"S": open_pk(tenant)},
                    ":s": {"S": f"{item['sk']['S'][2:]}#{tenant}"},
                },
            )
    other = DynamoDbUsageRollups(CONTRACT_TABLE)
    await asyncio.gather(
        rollups.roll_closed_hours(AFTER_DAY + 120_000, limit=100),
        other.roll_closed_hours(AFTER_DAY + 120_000, limit=100),
    )

    twice = sums_items(store)
    strip = [{k: v for k, v in i.items() if k != "rolledAt"} for i in once]
    assert [{k: v for k, v in i.items() if k != "rolledAt"} for i in twice] == strip
    await assert_exact(store, rollups)


async def test_a_rollup_that_dies_before_its_commit_leaves_the_hour_exact_and_open(
    store, rollups, clock, monkeypatch
):
    await write_day(store, clock)
    client = raw_client(store)
    real = type(client)._make_api_call

    def die_at_commit(self, operation, params):
        if operation == "UpdateItem" and "rv = :v" in params.get("UpdateExpression", ""):
            raise RuntimeError("the job's Lambda timed out")
        return real(self, operation, params)

    monkeypatch.setattr(type(client), "_make_api_call", die_at_commit)
    with pytest.raises(RuntimeError):
        await rollups.roll_closed_hours(AFTER_DAY, limit=100)
    monkeypatch.setattr(type(client), "_make_api_call", real)

    await assert_exact(store, rollups)  # a day part written, its hour not committed: read raw
    assert (await rollups.roll_closed_hours(AFTER_DAY, limit=100)).rolled == 8
    await assert_exact(store, rollups)


async def test_a_record_written_into_an_hour_already_rolled_is_counted(store, rollups, clock):
    records = await write_day(store, clock)
    assert (await rollups.roll_closed_hours(AFTER_DAY, limit=100)).rolled == 8
    await assert_exact(store, rollups)

    # a worker that stalled writes a record of hour 7 the next day, long after its rollup
    late = records[3].model_copy(update={"turnId": "turn_late", "createdAt": DAY + 7 * HOUR_MS + 10})
    clock.now = AFTER_DAY + HOUR_MS
    assert await store.put_usage(late)
    await assert_exact(store, rollups)  # the hour reads raw again at once

    # the job waits for the grace after the late write, then rolls the hour again
    assert (await rollups.roll_closed_hours(clock.now + GRACE_MS - 1, limit=100)).rolled == 0
    await assert_exact(store, rollups)
    assert (await rollups.roll_closed_hours(clock.now + GRACE_MS, limit=100)).rolled == 1
    await assert_exact(store, rollups)


async def test_a_late_write_during_a_rollup_makes_its_commit_fail(store, rollups, clock, monkeypatch):
    records = await write_day(store, clock)
    late = records[0].model_copy(update={"turnId": "turn_late", "createdAt": DAY + 23 * HOUR_MS + 5})
    real = rollups._records
    written: list[bool] = []

    def records_then_a_late_write(tenant_id: str, start: int):
        found = real(tenant_id, start)
        if tenant_id == late.tenantId and start == DAY + 23 * HOUR_MS and not written:
            clock.now = AFTER_DAY  # the write lands after the rollup read the hour's records
            written.append(asyncio.run(store.put_usage(late)))
        return found

    monkeypatch.setattr(rollups, "_records", records_then_a_late_write)
    run = await rollups.roll_closed_hours(AFTER_DAY, limit=100)
    monkeypatch.setattr(rollups, "_records", real)

    assert written == [True] and (run.rolled, run.skipped) == (7, 1)
    await assert_exact(store, rollups)
    assert (await rollups.roll_closed_hours(AFTER_DAY + GRACE_MS, limit=100)).rolled == 1
    await assert_exact(store, rollups)


async def test_an_hour_is_not_rolled_within_its_grace(store, rollups):
    await store.put_usage(usage())

    assert (await rollups.roll_closed_hours(DAY + HOUR_MS + GRACE_MS - 1)).rolled == 0
    assert (await rollups.roll_closed_hours(DAY + HOUR_MS + GRACE_MS)).rolled == 1
    hours, days = await sums(rollups)
    assert [(c.records, c.input_tokens) for c in hours + days] == [(1, 500), (1, 500)]


async def test_the_job_bounds_its_work_per_run(store, rollups, clock):
    for n in range(7):
        clock.now = DAY + n * HOUR_MS
        await store.put_usage(usage(f"turn_{n}", tenantId=f"tenant-{n % 3}", createdAt=clock.now + 1))

    runs = []
    while not runs or runs[-1].more:
        runs.append(await rollups.roll_closed_hours(AFTER_DAY, limit=3))
    assert [(r.rolled, r.more) for r in runs] == [(3, True), (3, True), (1, False)]
    assert rollups.queries < 40  # a few requests per hour rolled, none per hour already rolled


async def test_sums_written_by_the_transactional_version_are_still_counted(store, rollups):
    client = raw_client(store)
    cell = {"c0123456789_k": {"S": json.dumps(["anthropic/claude-haiku-4-5", "turn"])}}
    cell |= {"c0123456789_n": {"N": "2"}, "c0123456789_i": {"N": "40"}}
    client.put_item(
        TableName=CONTRACT_TABLE, Item={"pk": {"S": "USAGEAGG#acme"}, "sk": {"S": "H#2026-01-01T00#3"}} | cell
    )
    day = {"c9876543210_k": {"S": json.dumps(["img_1", "anthropic/claude-haiku-4-5", "turn"])}}
    day |= {"c9876543210_n": {"N": "2"}, "c9876543210_i": {"N": "40"}}
    client.put_item(
        TableName=CONTRACT_TABLE,
        Item={"pk": {"S": "USAGEAGG#acme"}, "sk": {"S": "D#2026-01-01#user-alice"}} | day,
    )
    await store.put_usage(usage())  # a new record in the same hour and day

    for _ in range(2):  # before and after its rollup
        hours, days = await sums(rollups)
        assert sum(c.records for c in hours) == sum(c.records for c in days) == 3
        assert sum(c.input_tokens for c in hours) == sum(c.input_tokens for c in days) == 540
        assert (await rollups.roll_closed_hours(AFTER_DAY)).rolled in (0, 1)


async def test_sums_rolled_before_the_reply_cache_read_its_saved_tokens_as_zero(store, rollups):
    hit = usage("turn_2", kind="reply_cache", inputTokens=0, outputTokens=0, cacheReadTokens=0)
    await store.put_usage(usage())
    await store.put_usage(hit.model_copy(update={"savedInputTokens": 700, "savedOutputTokens": 90}))
    assert (await rollups.roll_closed_hours(AFTER_DAY)).rolled == 1
    hours, days = await sums(rollups)
    rolled = {(c.kind, c.saved_input_tokens, c.saved_output_tokens) for c in hours + days}
    assert rolled == {("turn", 0, 0), ("reply_cache", 700, 90)}  # rolled with the saved tokens

    # the same sums as the version before the reply cache wrote them: six values a cell
    client = raw_client(store)
    for item in partition(store, agg_pk("acme")):
        names = ["cells"] if "cells" in item else [n for n in item if n.startswith("h") and len(n) == 3]
        for name in names:
            old = [[key, values[:6]] for key, values in json.loads(item[name]["S"])]
            assert all(len(values) == 6 for _, values in old)
            client.update_item(
                TableName=CONTRACT_TABLE,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET #n = :old",
                ExpressionAttributeNames={"#n": name},
                ExpressionAttributeValues={":old": {"S": json.dumps(old)}},
            )

    hours, days = await sums(rollups)
    assert {
        (c.kind, c.records, c.input_tokens, c.saved_input_tokens, c.saved_output_tokens) for c in hours
    } == {
        ("turn", 1, 500, 0, 0),
        ("reply_cache", 1, 0, 0, 0),
    }
    assert sorted((c.kind, c.records, c.saved_input_tokens) for c in days) == [
        ("reply_cache", 1, 0),
        ("turn", 1, 0),
    ]


# listing the records (/v1/usage, session exports): gsi2 hour by hour, gsi1 for older records


async def test_a_listing_since_a_time_reads_the_hours_from_then_on_only(store):
    await store.put_usage(usage("turn_1"))  # DAY
    await store.put_usage(usage("turn_2", createdAt=DAY + 5 * HOUR_MS + 10))
    await store.put_usage(usage("turn_3", createdAt=DAY + 30 * HOUR_MS))
    before = store._usage_reads.queries
    since = DAY + 5 * HOUR_MS + 10
    assert [u.turnId for u in await store.list_usage("acme", since_ms=since)] == ["turn_2", "turn_3"]
    assert [u.turnId for u in await store.list_usage("acme", "user-alice", since_ms=since + 1)] == ["turn_3"]
    assert [u.turnId for u in await store.list_usage("acme", since_ms=0)] == ["turn_1", "turn_2", "turn_3"]
    assert store._usage_reads.queries - before == (1 + 2) + (1 + 2) + (1 + 3)  # markers, then hours


async def test_a_record_is_written_without_gsi1_keys_and_listed_through_its_hour(store, rollups, clock):
    await store.put_usage(usage("turn_1"))
    await store.put_usage(usage("turn_2", containerId="user-alice#2", createdAt=DAY + 2 * HOUR_MS + 7))
    await store.put_usage(usage("turn_3", containerId="user-bob", createdAt=DAY + 30 * HOUR_MS))

    [item] = partition(store, "TURN#turn_1")
    assert "gsi1pk" not in item and "gsi1sk" not in item  # one index write fewer per record
    assert item["gsi2sk"]["S"] == "USAGE#user-alice#turn_1"
    assert [u.turnId for u in await store.list_usage("acme")] == ["turn_1", "turn_2", "turn_3"]
    assert [u.turnId for u in await store.list_usage("acme", "user-alice")] == ["turn_1"]
    assert [u.turnId for u in await store.list_usage("acme", "user-alice#2")] == ["turn_2"]
    assert await store.list_usage("other") == []
    clock.now = DAY + 3 * DAY_MS
    assert (await rollups.roll_closed_hours(DAY + 3 * DAY_MS)).rolled == 3
    assert [u.turnId for u in await store.list_usage("acme")] == ["turn_1", "turn_2", "turn_3"]  # rolled


async def test_records_stored_with_gsi1_keys_are_still_listed_once(store):
    client = raw_client(store)
    old = usage("turn_old", createdAt=DAY + 5)  # the transactional version: gsi1 keys only
    between = usage("turn_between", createdAt=DAY + 9)  # the version before this one: gsi1 and gsi2
    for record, extra in (
        (old, {}),
        (
            between,
            {"gsi2pk": {"S": "USAGEHOUR#acme#2026-01-01T00"}, "gsi2sk": {"S": "TURN#turn_between"}},
        ),
    ):
        item = {
            "pk": {"S": f"TURN#{record.turnId}"},
            "sk": {"S": "USAGE"},
            "tenantId": {"S": "acme"},
            "data": {"S": record.model_dump_json()},
            "gsi1pk": {"S": "TENANT#acme"},
            "gsi1sk": {"S": f"USAGE#user-alice#{record.createdAt:013d}#{record.turnId}"},
        }
        client.put_item(TableName=CONTRACT_TABLE, Item=item | extra)
    await store.put_usage(usage("turn_new", createdAt=DAY + 11))  # its hour's marker lists the hour

    expected_turns = ["turn_old", "turn_between", "turn_new"]
    assert [u.turnId for u in await store.list_usage("acme")] == expected_turns
    assert [u.turnId for u in await store.list_usage("acme", "user-alice")] == expected_turns
    assert await store.list_usage("acme", "user-bob") == []
