"""AgentVM's single DynamoDB table on moto, with the fixed schema ``template.yaml`` declares, and the
backends the ports' contract suites (keys, counters, budgets, ...) run on: SQLite, DynamoDB, PostgreSQL."""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any
from unittest import mock

import boto3
import pytest
from moto import mock_aws

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from pathlib import Path

TABLE = "agentvm-test"
REGION = "us-east-1"


@contextmanager
def atomic_moto() -> Iterator[None]:
    """``moto.mock_aws`` with DynamoDB requests made atomic, as they are on DynamoDB.

    moto evaluates a ConditionExpression and then writes, in plain Python: two threads can both pass
    ``attribute_not_exists`` before either writes. The adapters run requests in worker threads, so
    the concurrency tests would see races DynamoDB itself never has. One lock around each request
    restores DynamoDB's per-item atomicity (and more, which tests cannot tell apart). Without it,
    about 3 runs in 10 of twenty concurrent appends lost a message under a short switch interval.
    """
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.Lock()
    call_action = DynamoHandler.call_action

    def atomic_call_action(self: DynamoHandler) -> object:
        with lock:
            return call_action(self)

    with mock_aws(), mock.patch.object(DynamoHandler, "call_action", atomic_call_action):
        yield


def create_table(name: str = TABLE) -> None:
    """Call inside ``moto.mock_aws()``."""
    client = boto3.client("dynamodb", region_name=REGION)
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": a, "AttributeType": "S"}
            for a in ("pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk")
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "gsi1",
                "KeySchema": [
                    {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                    {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "gsi2",
                "KeySchema": [
                    {"AttributeName": "gsi2pk", "KeyType": "HASH"},
                    {"AttributeName": "gsi2sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
        ],
    )
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"AttributeName": "expiresAt", "Enabled": True}
    )


def backends(
    sqlite: Callable[[str | Path], Any],
    dynamodb: Callable[..., Any],
    *,
    file: str | None = None,
    postgres: Callable[[Any], Any] | None = None,
) -> list[Any]:
    """``pytest.param``s of one port: SQLite in memory, in ``<tmp>/data/<file>`` (when ``file`` is
    given), DynamoDB on a fresh moto table, and PostgreSQL (when ``postgres`` is given: built on the
    ``Database`` of a fresh, migrated database of the test server, tests/postgres_server.py). Each is
    a factory taking the test's ``tmp_path`` and returning an async context manager that yields a
    fresh, empty instance."""

    @asynccontextmanager
    async def on_sqlite(path: str | Path) -> AsyncIterator[Any]:
        instance = sqlite(path)
        try:
            yield instance
        finally:
            instance.close()

    @asynccontextmanager
    async def on_dynamodb(tmp_path: Path) -> AsyncIterator[Any]:
        with atomic_moto():
            create_table()
            yield dynamodb(TABLE, region=REGION)

    params = [pytest.param(lambda tmp_path: on_sqlite(":memory:"), id="sqlite-memory")]
    if file is not None:
        params.append(pytest.param(lambda tmp_path: on_sqlite(tmp_path / "data" / file), id="sqlite-file"))
    params.append(pytest.param(on_dynamodb, id="dynamodb", marks=pytest.mark.aws))
    if postgres is not None:
        make = postgres

        @asynccontextmanager
        async def on_postgres(tmp_path: Path) -> AsyncIterator[Any]:
            from tests.postgres_server import fresh_database  # imports psycopg: only when used

            async with fresh_database() as database:
                yield make(database)

        params.append(pytest.param(on_postgres, id="postgres", marks=pytest.mark.postgres))
    return params
