"""The ``RunningTurns`` port on SQLite: a table of the unfinished turns, in the data dir's database.

``mark`` is an idempotent insert, ``unmark`` a delete, a listing one indexed range read. A turn's
tokens so far are summed from the store's usage table (its own record and its ``:step:<n>`` ones),
read through the store's connection, so a record written a moment ago counts. ``stale`` lists the
marks of every tenant queued by a time, for the sweeper of turns with no job
(``agent.orphan_turns``): one range read of ``running_by_age``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.ports import RunningTurn, TurnTokens

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from agentvm.adapters.local.sqlite.store import SqliteStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS running_turns (
    tenant_id    TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    container_id TEXT NOT NULL,
    image_id     TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    queued_at    INTEGER NOT NULL,
    model        TEXT,
    PRIMARY KEY (tenant_id, turn_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS running_by_container ON running_turns (tenant_id, container_id, queued_at);
CREATE INDEX IF NOT EXISTS running_by_age ON running_turns (queued_at);
"""


class SqliteRunningTurns:
    """``agentvm.ports.RunningTurns`` on SQLite; ``store`` is the usage records' store."""

    def __init__(self, path: str | Path, store: SqliteStore) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        self._store = store

    def close(self) -> None:
        self._conn.close()

    async def mark(self, turn: RunningTurn) -> None:
        self._conn.execute(
            "INSERT INTO running_turns (tenant_id, turn_id, container_id, image_id, session_id, queued_at,"
            " model) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                turn.tenant_id,
                turn.turn_id,
                turn.container_id,
                turn.image_id,
                turn.session_id,
                turn.queued_at,
                turn.model,
            ),
        )

    async def unmark(self, tenant_id: str, container_id: str, turn_id: str) -> None:
        self._conn.execute(
            "DELETE FROM running_turns WHERE tenant_id = ? AND turn_id = ? AND container_id = ?",
            (tenant_id, turn_id, container_id),
        )

    async def running(
        self, tenant_id: str, container_id: str | None = None, limit: int = 500
    ) -> list[RunningTurn]:
        columns = "tenant_id, container_id, image_id, session_id, turn_id, queued_at, model"
        if container_id is None:
            rows = self._conn.execute(
                f"SELECT {columns} FROM running_turns WHERE tenant_id = ?"
                " ORDER BY queued_at, turn_id LIMIT ?",
                (tenant_id, limit),
            ).fetchall()
        else:
            rows = self._conn.execute(
                f"SELECT {columns} FROM running_turns WHERE tenant_id = ? AND container_id = ?"
                " ORDER BY queued_at, turn_id LIMIT ?",
                (tenant_id, container_id, limit),
            ).fetchall()
        return [RunningTurn(*row) for row in rows]

    async def stale(self, queued_by_ms: int, limit: int) -> list[RunningTurn]:
        """Every tenant's marks queued at or before ``queued_by_ms``, oldest first."""
        rows = self._conn.execute(
            "SELECT tenant_id, container_id, image_id, session_id, turn_id, queued_at, model"
            " FROM running_turns WHERE queued_at <= ? ORDER BY queued_at, turn_id LIMIT ?",
            (queued_by_ms, limit),
        ).fetchall()
        return [RunningTurn(*row) for row in rows]

    async def tokens(self, turn_ids: Sequence[str]) -> dict[str, TurnTokens]:
        out: dict[str, TurnTokens] = {}
        for turn_id in turn_ids:
            # the turn's own record, and its steps' ("<turn>:step:<n>": the range after "<turn>:step:")
            (row,) = self._store.read_all(
                "SELECT COUNT(*),"
                " COALESCE(SUM(json_extract(record, '$.inputTokens')), 0),"
                " COALESCE(SUM(json_extract(record, '$.outputTokens')), 0),"
                " COALESCE(SUM(json_extract(record, '$.cacheReadTokens')), 0),"
                " COALESCE(SUM(json_extract(record, '$.cacheWriteTokens')), 0)"
                " FROM usage WHERE turn_id = ? OR (turn_id >= ? AND turn_id < ?)",
                (turn_id, f"{turn_id}:step:", f"{turn_id}:step;"),
            )
            out[turn_id] = TurnTokens(*(int(v) for v in row))
        return out


__all__ = ["SqliteRunningTurns"]
