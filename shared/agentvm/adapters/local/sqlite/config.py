"""The ``ConfigStore`` port on SQLite (the local host): one row of values per scope, and the audit log.

The values live in the data dir's database, readable by the server's user only (hosts/data_dir.py);
secrets arrive here already sealed by the centre (configcentre/sealing.py), never in plaintext.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.records import ConfigChange, ConfigValues

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS config_values (
    scope TEXT PRIMARY KEY, version INTEGER NOT NULL, record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS config_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL, record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS config_changes_scope ON config_changes (scope, id);
"""


class SqliteConfigStore:
    """``agentvm.ports.ConfigStore`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def get_values(self, scope: str) -> ConfigValues | None:
        row = self._conn.execute("SELECT record FROM config_values WHERE scope = ?", (scope,)).fetchone()
        return None if row is None else ConfigValues.model_validate_json(row[0])

    async def put_values(self, values: ConfigValues, changes: Sequence[ConfigChange]) -> bool:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            cur = self._conn.execute(
                "INSERT INTO config_values (scope, version, record) VALUES (?, ?, ?)"
                " ON CONFLICT (scope) DO UPDATE SET version = excluded.version, record = excluded.record"
                " WHERE config_values.version = excluded.version - 1",
                (values.scope, values.version, values.model_dump_json()),
            )
            if cur.rowcount != 1:
                self._conn.execute("ROLLBACK")
                return False
            self._conn.executemany(
                "INSERT INTO config_changes (scope, record) VALUES (?, ?)",
                [(c.scope, c.model_dump_json()) for c in changes],
            )
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return True

    async def list_changes(self, scope: str, limit: int = 100) -> list[ConfigChange]:
        rows = self._conn.execute(
            "SELECT record FROM config_changes WHERE scope = ? ORDER BY id DESC LIMIT ?", (scope, limit)
        ).fetchall()
        return [ConfigChange.model_validate_json(r[0]) for r in rows]


__all__ = ["SqliteConfigStore"]
