"""The usage record and its sums are one DynamoDB transaction: all of it is written, or none."""

from __future__ import annotations

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError
from pynamodb.exceptions import TransactWriteError

from agentvm.adapters.aws.dynamodb_store import DynamoStore
from agentvm.adapters.aws.dynamodb_usage import DynamoUsageRollups, agg_pk
from agentvm.records import UsageRecord
from tests.contract.conftest import CONTRACT_TABLE

pytestmark = pytest.mark.aws

DAY = 1_767_225_600_000  # 2026-01-01T00:00:00Z


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


@pytest.fixture
def store(aws):
    store = DynamoStore(CONTRACT_TABLE)
    store.create_table()
    return store


async def sums(tenant: str = "acme") -> tuple[list, list]:
    rollups = DynamoUsageRollups(CONTRACT_TABLE)
    return (
        await rollups.hour_cells(tenant, DAY, DAY + 86_400_000),
        await rollups.day_cells(tenant, DAY, DAY + 86_400_000),
    )


async def test_a_failed_transaction_writes_neither_the_record_nor_its_sums(store):
    too_big = usage(model="x" * 420_000)  # over DynamoDB's 400 KB item limit: the put fails

    with pytest.raises(TransactWriteError):
        await store.put_usage(too_big)

    assert await store.list_usage("acme") == []
    assert await sums() == ([], [])
    # the turn's retry (a valid record this time) writes both, once
    assert await store.put_usage(usage())
    hours, days = await sums()
    assert [(c.records, c.input_tokens, c.cache_read_tokens) for c in hours + days] == [(1, 500, 300)] * 2


async def test_a_conflicting_transaction_is_retried_and_counted_once(store, monkeypatch):
    real = BaseClient._make_api_call
    calls = []

    def conflict_once(self, operation, params):
        if operation == "TransactWriteItems":
            calls.append(1)
            if len(calls) == 1:  # DynamoDB's answer when another turn was updating the same hour item
                response = {
                    "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
                    "CancellationReasons": [
                        {"Code": "None"},
                        {"Code": "TransactionConflict"},
                        {"Code": "None"},
                    ],
                }
                raise ClientError(response, operation)
        return real(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", conflict_once)

    assert await store.put_usage(usage())

    assert len(calls) == 2
    hours, days = await sums()
    assert [c.records for c in hours + days] == [1, 1]


async def test_a_record_written_again_is_refused_whole(store):
    assert await store.put_usage(usage())
    assert not await store.put_usage(usage(inputTokens=7))  # a redelivered turn, other tokens

    [record] = await store.list_usage("acme")
    hours, days = await sums()
    assert record.inputTokens == 500
    assert [(c.records, c.input_tokens) for c in hours + days] == [(1, 500), (1, 500)]


async def test_one_record_touches_one_hour_item_one_day_item_and_the_tenant_directory(store):
    await store.put_usage(usage())
    await store.put_usage(usage("turn_2", containerId="user-bob", createdAt=DAY + 3_600_000 * 5))

    client = store._m.base._get_connection().connection.client
    items = client.query(
        TableName=CONTRACT_TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": agg_pk("acme")}},
    )["Items"]
    keys = sorted(item["sk"]["S"].rsplit("#", 1)[0] for item in items)
    assert keys == ["D#2026-01-01", "D#2026-01-01", "H#2026-01-01T00", "H#2026-01-01T05"]
    directory = client.query(
        TableName=CONTRACT_TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "USAGEDIR#2026-01"}},
    )["Items"]
    assert [item["sk"]["S"] for item in directory] == ["acme"]
