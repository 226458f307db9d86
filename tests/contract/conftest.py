"""Store implementations the contract suite runs against.

Each entry of ``STORE_FACTORIES`` is a ``pytest.param(factory, id=...)`` where ``factory`` takes the
test's ``tmp_path`` and returns an async context manager yielding a fresh, empty store (and cleaning
it up on exit). To add an implementation, append a param; marks go on the param, e.g.
``pytest.param(dynamo_store, id="dynamo", marks=pytest.mark.aws)``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.local.sqlite.store import SqliteStore
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from agentvm.ports import Store

    StoreFactory = Callable[[Path], AbstractAsyncContextManager[Store]]


@asynccontextmanager
async def sqlite_memory_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = SqliteStore(":memory:")
    try:
        yield store
    finally:
        store.close()


@asynccontextmanager
async def sqlite_file_store(tmp_path: Path) -> AsyncIterator[Store]:
    # A nested path also checks that parent directories are created.
    store = SqliteStore(tmp_path / "data" / "x.db")
    try:
        yield store
    finally:
        store.close()


# One table name for every test: each test runs in its own moto mock (a fresh, empty account), and
# the cached PynamoDB models (with their one botocore client) are reused from test to test.
CONTRACT_TABLE = "agentvm-contract"


@pytest.fixture
def aws() -> Iterator[None]:
    """A fresh moto account (DynamoDB requests atomic) for the duration of one test."""
    with atomic_moto():
        yield


@asynccontextmanager
async def dynamo_store(tmp_path: Path) -> AsyncIterator[Store]:
    with atomic_moto():
        store = DynamoDbStore(CONTRACT_TABLE)
        store.create_table()
        yield store


@asynccontextmanager
async def postgres_store(tmp_path: Path) -> AsyncIterator[Store]:
    # imported here: a session that runs no PostgreSQL test never imports psycopg
    from agentvm.adapters.postgres.store import PostgresStore
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresStore(database)


STORE_FACTORIES = [
    pytest.param(sqlite_memory_store, id="sqlite-memory"),
    pytest.param(sqlite_file_store, id="sqlite-file"),
    pytest.param(dynamo_store, id="dynamo", marks=pytest.mark.aws),
    pytest.param(postgres_store, id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=STORE_FACTORIES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    factory: StoreFactory = request.param
    async with factory(tmp_path) as instance:
        yield instance
