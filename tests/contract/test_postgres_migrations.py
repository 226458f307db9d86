"""Migrations on a real PostgreSQL: applied once, in place, whatever the number of nodes starting."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest

from agentvm.adapters.postgres.database import Database
from agentvm.adapters.postgres.migrations import (
    MigrationError,
    migrate,
    migrations_in,
    packaged_migrations,
)
from agentvm.errors import StorageUnavailable
from tests.postgres_server import fresh_database, shared_server

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.postgres


async def _versions(database: Database) -> list[str]:
    async with database.connection() as conn:
        cursor = await conn.execute("SELECT version FROM schema_migrations ORDER BY version")
        return [row[0] for row in await cursor.fetchall()]


async def test_the_packaged_migrations_apply_to_an_empty_database_and_then_are_all_recorded() -> None:
    async with fresh_database(migrated=False) as database:
        first = await migrate(database)
        again = await migrate(database)
        assert first == [m.version for m in packaged_migrations()]
        assert again == []
        assert await _versions(database) == first


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


# Not idempotent on purpose: a second run of either file would fail or insert a second row.
NODES_SCHEMA = {
    "0001_things.sql": "CREATE TABLE things (id INT PRIMARY KEY);\nINSERT INTO things VALUES (1);",
    "0002_more.sql": "ALTER TABLE things ADD COLUMN note TEXT;\nINSERT INTO things VALUES (2, 'x');",
}


async def test_nodes_starting_at_once_apply_each_migration_exactly_once(tmp_path: Path) -> None:
    migrations = migrations_in(_write(tmp_path / "m", NODES_SCHEMA))
    async with fresh_database(migrated=False) as first_node:
        nodes = [Database(first_node.url, min_size=1, max_size=1) for _ in range(5)]
        await asyncio.gather(*(node.open() for node in nodes))
        try:
            results = await asyncio.gather(*(migrate(node, migrations) for node in nodes))
        finally:
            await asyncio.gather(*(node.close() for node in nodes))
        applied = sorted(version for result in results for version in result)
        assert applied == ["0001_things", "0002_more"]
        assert sum(1 for result in results if result) == 1  # one node did it all, the others waited
        async with first_node.connection() as conn:
            rows = await (await conn.execute("SELECT id, note FROM things ORDER BY id")).fetchall()
        assert rows == [(1, None), (2, "x")]


async def test_a_new_migration_upgrades_a_database_in_place(tmp_path: Path) -> None:
    folder = _write(tmp_path / "m", {"0001_things.sql": NODES_SCHEMA["0001_things.sql"]})
    async with fresh_database(migrated=False) as database:
        assert await migrate(database, migrations_in(folder)) == ["0001_things"]
        _write(folder, {"0002_more.sql": NODES_SCHEMA["0002_more.sql"]})
        assert await migrate(database, migrations_in(folder)) == ["0002_more"]
        assert await _versions(database) == ["0001_things", "0002_more"]


async def test_a_shipped_migration_that_changed_is_refused(tmp_path: Path) -> None:
    folder = _write(tmp_path / "m", {"0001_things.sql": NODES_SCHEMA["0001_things.sql"]})
    async with fresh_database(migrated=False) as database:
        await migrate(database, migrations_in(folder))
        _write(folder, {"0001_things.sql": "CREATE TABLE things (id BIGINT PRIMARY KEY);"})
        with pytest.raises(MigrationError, match="0001_things changed"):
            await migrate(database, migrations_in(folder))


async def test_a_failing_migration_leaves_nothing_half_done_and_releases_the_lock(tmp_path: Path) -> None:
    folder = _write(
        tmp_path / "m",
        {
            "0001_things.sql": NODES_SCHEMA["0001_things.sql"],
            "0002_broken.sql": "CREATE TABLE half (id INT);\nSELECT no_such_function();",
        },
    )
    async with fresh_database(migrated=False) as database:
        with pytest.raises(Exception, match="no_such_function"):
            await migrate(database, migrations_in(folder))
        assert await _versions(database) == ["0001_things"]
        async with database.connection() as conn:
            half = await (await conn.execute("SELECT to_regclass('half')")).fetchone()
        assert half == (None,)
        (folder / "0002_broken.sql").write_text("CREATE TABLE half (id INT);")
        # the lock was released: a second node (another pool) gets it and finishes the work
        other = Database(database.url, min_size=1, max_size=1)
        await other.open()
        try:
            assert await asyncio.wait_for(migrate(other, migrations_in(folder)), 10) == ["0002_broken"]
        finally:
            await other.close()


async def test_a_database_migrated_by_a_newer_node_is_accepted(tmp_path: Path, caplog) -> None:
    newer = _write(tmp_path / "new", NODES_SCHEMA)
    older = _write(tmp_path / "old", {"0001_things.sql": NODES_SCHEMA["0001_things.sql"]})
    async with fresh_database(migrated=False) as database:
        await migrate(database, migrations_in(newer))
        with caplog.at_level(logging.INFO, logger="agentvm.adapters.postgres.migrations"):
            assert await migrate(database, migrations_in(older)) == []
        assert "newer than this node: 0002_more" in caplog.text


async def test_an_unreachable_server_is_reported_without_the_password(caplog) -> None:
    server = shared_server()
    assert server.admin_url  # the server runs: only the port below is wrong
    database = Database("postgresql://avm:hunter2-secret@127.0.0.1:9/avm?connect_timeout=1", timeout_s=1.5)
    with caplog.at_level(logging.DEBUG), pytest.raises(StorageUnavailable) as raised:
        await database.open()
    shown = f"{raised.value} {raised.value.message} {caplog.text}"
    assert "127.0.0.1:9" in shown
    assert "hunter2" not in shown


def test_missing_postgres_skips_saying_why_but_fails_under_ci(monkeypatch) -> None:
    from tests.postgres_server import _unavailable

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="PostgreSQL is required in CI: no initdb"):
        _unavailable("no initdb")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL: no initdb"):
        _unavailable("no initdb")
