"""Slow tier: a phrase is found in a container of 10,000 messages (~11 MiB), on SQLite with FTS5,
on DynamoDB (moto) and on PostgreSQL (tsvector + GIN), following ``next`` to the end; a frequent
word fills its first page at once. Latencies are measured by ``benchmarks/session_search.py``
(BENCHMARKS.md), not here.

Run: ``./dev test -m slow -k session_search_at_scale``
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest

from agentvm.adapters.aws.dynamodb.sessions import DynamoDbSessionArchive
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.local.sqlite.sessions import SqliteSessionArchive
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.sessions.search import parse_query
from benchmarks.session_search import CONTAINER, PHRASE, TENANT, corpus, search_all, seed
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from agentvm.ports import SessionArchive

pytestmark = pytest.mark.slow


@asynccontextmanager
async def sqlite(tmp_path: Path) -> AsyncIterator[SessionArchive]:
    store = SqliteStore(tmp_path / "agentvm.db")
    try:
        yield SqliteSessionArchive(store)
    finally:
        store.close()


@asynccontextmanager
async def dynamo(tmp_path: Path) -> AsyncIterator[SessionArchive]:
    with atomic_moto():
        DynamoDbStore(CONTRACT_TABLE).create_table()
        yield DynamoDbSessionArchive(CONTRACT_TABLE)


@asynccontextmanager
async def postgres(tmp_path: Path) -> AsyncIterator[SessionArchive]:
    from agentvm.adapters.postgres.sessions import PostgresSessionArchive
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresSessionArchive(database)


@pytest.mark.parametrize(
    "archive_of",
    [
        pytest.param(sqlite, id="sqlite-fts5"),
        pytest.param(dynamo, id="dynamo", marks=pytest.mark.aws),
        pytest.param(postgres, id="postgres", marks=pytest.mark.postgres),
    ],
)
async def test_session_search_at_scale_finds_a_phrase_among_10000_messages(archive_of, tmp_path):
    data = corpus(10_000)
    assert data.messages == 10_000
    async with archive_of(tmp_path) as archive:
        images = await seed(archive, data)
        hits, requests = await search_all(archive, f'"{PHRASE}"')
        assert hits == 1
        conversation, index = data.planted
        terms, found, after = parse_query(f'"{PHRASE}"'), [], None
        for _ in range(requests):  # the page that holds it, whichever request that is
            page = await archive.search_messages(TENANT, terms, container_id=CONTAINER, limit=20, after=after)
            found += page.hits
            after = page.next
        [hit] = found
        assert (hit.image.imageId, hit.seq) == (images[conversation].imageId, index + 1)
        first, _ = await search_all(archive, data.frequent, pages=1)
        assert first == 20
        if isinstance(archive, DynamoDbSessionArchive):
            assert requests > 1  # ~11 MiB is read in 4 MiB requests, each answering with a cursor
