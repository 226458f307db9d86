"""The ``ConfigStore`` port on PostgreSQL (the cluster host): one row of values per scope, and the
audit log.

A write is one transaction: the values' upsert, applied only over the version before it
(``ON CONFLICT ... DO UPDATE ... WHERE version = new version - 1``: PostgreSQL re-checks the
condition on the row as the first writer left it, so of two nodes writing the same version one
wins and the other changes nothing), then its audit entries. Secrets arrive here already sealed by
the centre (configcentre/sealing.py), never in plaintext.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import ConfigChange, ConfigValues

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database

_PUT = """
INSERT INTO config_values (scope, version, record) VALUES (%s, %s, %s::jsonb)
ON CONFLICT (scope) DO UPDATE SET version = excluded.version, record = excluded.record
WHERE config_values.version = excluded.version - 1
"""


class _Refused(Exception):
    """Rolls the write back: the stored version was not the one before it."""


class PostgresConfigStore:
    """``agentvm.ports.ConfigStore`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def get_values(self, scope: str) -> ConfigValues | None:
        async with self._db.connection() as conn:
            cur = await conn.execute("SELECT record::text FROM config_values WHERE scope = %s", (scope,))
            row = await cur.fetchone()
        return None if row is None else ConfigValues.model_validate_json(row[0])

    async def put_values(self, values: ConfigValues, changes: Sequence[ConfigChange]) -> bool:
        try:
            async with self._db.transaction() as conn:
                cur = await conn.execute(_PUT, (values.scope, values.version, values.model_dump_json()))
                if cur.rowcount != 1:
                    raise _Refused
                if changes:
                    async with conn.cursor() as many:
                        await many.executemany(
                            "INSERT INTO config_changes (scope, record) VALUES (%s, %s::jsonb)",
                            [(c.scope, c.model_dump_json()) for c in changes],
                        )
        except _Refused:
            return False
        return True

    async def list_changes(self, scope: str, limit: int = 100) -> list[ConfigChange]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM config_changes WHERE scope = %s ORDER BY id DESC LIMIT %s",
                (scope, limit),
            )
            rows = await cur.fetchall()
        return [ConfigChange.model_validate_json(r[0]) for r in rows]


__all__ = ["PostgresConfigStore"]
