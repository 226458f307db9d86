"""The ``LogStore`` on PostgreSQL (the cluster host's ``/v1/logs``): every node's lines in one
table, a tenant's lines one indexed query away, pages newest first, and the size cap holding for
the whole cluster while several nodes write at once (the oldest lines go; the size kept beside the
lines stays exact)."""

from __future__ import annotations

import asyncio
import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from agentvm.adapters.postgres.database import Database
from agentvm.adapters.postgres.logs import PostgresLogStore
from agentvm.logs import add_log_handler, bind, unbind
from agentvm.ports import LogQuery
from tests.postgres_server import fresh_database

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.postgres


@contextmanager
def logging_to(store: PostgresLogStore, name: str) -> Iterator[logging.Logger]:
    """A logger whose lines go to ``store`` only (formatted and tagged as the root handlers')."""
    handler = store.handler()
    add_log_handler(handler)
    logging.getLogger().removeHandler(handler)  # this logger's lines only, not the whole test's
    logger = logging.getLogger(f"agentvm.test.pglogs.{name}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield logger
    finally:
        logger.removeHandler(handler)


async def size_row_and_sum(database: Database) -> tuple[int, int]:
    async with database.connection() as conn:
        cur = await conn.execute(
            "SELECT (SELECT bytes FROM log_store_size),"
            " (SELECT COALESCE(SUM(length(line)), 0) FROM log_lines)"
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def test_a_tenant_reads_its_own_lines_newest_first_a_page_at_a_time():
    async with fresh_database() as database:
        store = PostgresLogStore(database)
        try:
            with logging_to(store, "pages") as logger:
                for tenant in ("acme", "globex", "acme", None, "acme"):
                    token = bind(tenant_id=tenant, turn_id=f"turn-{tenant}")
                    try:
                        logger.warning("hello from %s", tenant)
                    finally:
                        unbind(token)
                store.flush()
            first = await store.page(LogQuery(tenant_id="acme", limit=2))
            second = await store.page(LogQuery(tenant_id="acme", limit=2, cursor=first.next))
            everything = await store.page(LogQuery(tenant_id=None, limit=10))
            warnings = await store.page(LogQuery(tenant_id="globex", min_level=logging.WARNING))
            errors = await store.page(LogQuery(tenant_id="globex", min_level=logging.ERROR))
            by_turn = await store.page(LogQuery(tenant_id=None, turn_id="turn-globex"))
        finally:
            store.close()
    assert [line["msg"] for line in first.lines + second.lines] == ["hello from acme"] * 3
    assert first.next is not None and second.next is None
    ids = [int(line["id"]) for line in first.lines + second.lines]
    assert ids == sorted(ids, reverse=True)
    assert len(everything.lines) == 5 and everything.next is None
    assert [line["msg"] for line in warnings.lines] == ["hello from globex"] and errors.lines == []
    assert [line["msg"] for line in by_turn.lines] == ["hello from globex"]
    assert store.dropped == 0


async def test_the_store_keeps_its_size_under_the_cap_dropping_the_oldest_lines():
    async with fresh_database() as database:
        store = PostgresLogStore(database, max_bytes=4000)
        try:
            with logging_to(store, "cap") as logger:
                for i in range(200):
                    logger.info("line %03d %s", i, "x" * 40)
                store.flush()
            page = await store.page(LogQuery(tenant_id=None, limit=500))
            kept_size, summed = await size_row_and_sum(database)
        finally:
            store.close()
        assert store.dropped == 0
        reopened = PostgresLogStore(database, max_bytes=4000)  # another node, or a restart: same lines
        newest = await reopened.page(LogQuery(tenant_id=None, limit=1))
        reopened.close()
    kept = [int(line["msg"].split()[1]) for line in page.lines]
    assert 0 < len(kept) < 200 and kept[0] == 199  # the newest is kept
    assert kept == list(range(199, 199 - len(kept), -1))  # and only a contiguous newest run of them
    assert kept_size == summed <= 4000
    assert newest.lines[0]["msg"].startswith("line 199")


async def test_three_nodes_writing_at_once_keep_the_cluster_under_one_cap_and_its_size_exact():
    async with fresh_database() as first:
        others = [Database(first.url, min_size=1, max_size=2) for _ in range(2)]
        await asyncio.gather(*(node.open() for node in others))
        stores = [PostgresLogStore(node, max_bytes=6000) for node in (first, *others)]
        try:
            loggers = [logging_to(store, f"node{n}") for n, store in enumerate(stores)]
            with loggers[0] as a, loggers[1] as b, loggers[2] as c:
                for i in range(150):
                    for n, logger in enumerate((a, b, c)):
                        logger.info("node %d line %03d %s", n, i, "y" * 30)
                for store in stores:
                    store.flush()
                for n, logger in enumerate((a, b, c)):
                    logger.info("node %d done", n)
                for store in stores:
                    store.flush()
            kept_size, summed = await size_row_and_sum(first)
            page = await stores[1].page(LogQuery(tenant_id=None, limit=1000))
        finally:
            for store in stores:
                store.close()
            await asyncio.gather(*(node.close() for node in others))
    assert sum(store.dropped for store in stores) == 0
    assert kept_size == summed  # pruning by one node while others insert loses no byte of the count
    assert summed <= 6000 + 3 * 80  # the cap, give or take the lines in flight when one node pruned
    # each node's writer thread inserts on its own: the three last lines in any order, newest of all
    assert sorted(line["msg"] for line in page.lines[:3]) == ["node 0 done", "node 1 done", "node 2 done"]
    assert len(page.lines) > 3  # and the newest of the rest: any node reads every node's lines
