"""Schema migrations: the numbered ``.sql`` files of ``migrations/``, applied in place at start.

A migration is one file ``NNNN_what.sql``; its version is the file's stem. Files are applied in
name order, each in its own transaction together with its row in ``schema_migrations`` (version,
sha256 of the file, when), so a migration is either wholly applied and recorded or not at all.

``migrate`` takes a session-level advisory lock first: when N nodes start at once, one applies
what is missing while the others wait, then find everything recorded and apply nothing. Each
migration is thus applied exactly once per database.

Rules for writing one:
- never edit a file once it has shipped: ``migrate`` refuses a recorded version whose file changed;
- expand, then contract: during a rolling upgrade old nodes run against the new schema, so a
  migration adds (tables, nullable columns, indexes) and a later one removes what no running
  version reads any more. A database with versions this code does not know (a newer node migrated
  it) is accepted, with a log line;
- two helpers picking the same number is harmless (versions are whole stems, ordered by name) as
  long as their files touch different tables.

Why no migration library: the ones that fit (yoyo-migrations, alembic) bring their own connection
handling (sync drivers, SQLAlchemy) for what is here about sixty lines on the pool we already have;
plain SQL files stay readable by any operator with ``psql``.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from agentvm.adapters.postgres.database import Database

logger = logging.getLogger(__name__)

# pg_advisory_lock's key for migrations: b"avm-migr" as a signed 64-bit integer.
MIGRATION_LOCK_KEY = int.from_bytes(b"avm-migr", "big", signed=True)

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    TEXT PRIMARY KEY,
    checksum   TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


class MigrationError(RuntimeError):
    """The database's recorded migrations do not match the files (one changed after it shipped)."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def packaged_migrations() -> list[Migration]:
    """The migrations shipped with this package (``adapters/postgres/migrations/*.sql``), in order."""
    folder = resources.files("agentvm.adapters.postgres").joinpath("migrations")
    files = [f for f in folder.iterdir() if f.name.endswith(".sql")]
    return [
        Migration(f.name.removesuffix(".sql"), f.read_text()) for f in sorted(files, key=lambda f: f.name)
    ]


def migrations_in(folder: Path) -> list[Migration]:
    """The ``*.sql`` files of a folder, in name order (tests, and operators trying a migration)."""
    return [Migration(p.stem, p.read_text()) for p in sorted(folder.glob("*.sql"))]


async def migrate(database: Database, migrations: Iterable[Migration] | None = None) -> list[str]:
    """Apply the migrations the database lacks, under the advisory lock; return their versions."""
    wanted = list(packaged_migrations() if migrations is None else migrations)
    applied: list[str] = []
    async with database.connection() as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            await conn.execute(_CREATE_TABLE)
            cursor = await conn.execute("SELECT version, checksum FROM schema_migrations")
            recorded = {version: checksum for version, checksum in await cursor.fetchall()}
            for migration in wanted:
                known = recorded.pop(migration.version, None)
                if known is not None:
                    if known != migration.checksum:
                        raise MigrationError(f"migration {migration.version} changed after it was applied")
                    continue
                async with conn.transaction():
                    await conn.execute(migration.sql.encode())
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, checksum) VALUES (%s, %s)",
                        (migration.version, migration.checksum),
                    )
                applied.append(migration.version)
                logger.info("postgres: applied migration %s", migration.version)
            if recorded:
                logger.info("postgres: migrations newer than this node: %s", ", ".join(sorted(recorded)))
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied
