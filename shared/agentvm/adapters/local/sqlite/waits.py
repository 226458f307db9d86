"""The ``ToolWaits`` port on SQLite (the local host): one row per wait, its record as JSON.

The columns beside ``record`` are what the queries filter on; ``decide`` is one conditional
``UPDATE ... WHERE status = 'pending'`` inside a write transaction, so of two decisions sent at
once exactly one wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.sqlite.store import connect, transaction
from agentvm.records import ToolWait

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_waits (
    turn_id      TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    status       TEXT NOT NULL,
    consumed     INTEGER NOT NULL DEFAULT 0,
    check_at     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    record       TEXT NOT NULL,
    PRIMARY KEY (turn_id, call_id)
);
CREATE INDEX IF NOT EXISTS tool_waits_by_tenant ON tool_waits (tenant_id, consumed, created_at);
CREATE INDEX IF NOT EXISTS tool_waits_due ON tool_waits (consumed, check_at);
"""


class SqliteToolWaits:
    """``agentvm.ports.ToolWaits`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def put_wait(self, wait: ToolWait) -> bool:
        cur = self._conn.execute(
            "INSERT INTO tool_waits (turn_id, call_id, tenant_id, container_id, status, consumed,"
            " check_at, created_at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (turn_id, call_id) DO NOTHING",
            (
                wait.turnId,
                wait.toolCallId,
                wait.tenantId,
                wait.containerId,
                wait.status,
                int(wait.consumed),
                wait.checkAt,
                wait.createdAt,
                wait.model_dump_json(),
            ),
        )
        return cur.rowcount == 1

    async def get_wait(self, turn_id: str, call_id: str) -> ToolWait | None:
        row = self._conn.execute(
            "SELECT record FROM tool_waits WHERE turn_id = ? AND call_id = ?", (turn_id, call_id)
        ).fetchone()
        return None if row is None else ToolWait.model_validate_json(row[0])

    async def turn_waits(self, turn_id: str) -> list[ToolWait]:
        rows = self._conn.execute(
            "SELECT record FROM tool_waits WHERE turn_id = ? ORDER BY created_at, call_id", (turn_id,)
        ).fetchall()
        return [ToolWait.model_validate_json(r[0]) for r in rows]

    async def decide(self, turn_id: str, call_id: str, changes: Mapping[str, Any]) -> ToolWait | None:
        with transaction(self._conn):
            wait = await self.get_wait(turn_id, call_id)
            if wait is None or wait.status != "pending":
                return None
            wait = wait.model_copy(update=dict(changes))
            self._save(wait)
        return wait

    async def consume(self, turn_id: str, call_id: str) -> None:
        with transaction(self._conn):
            wait = await self.get_wait(turn_id, call_id)
            if wait is not None and not wait.consumed:
                self._save(wait.model_copy(update={"consumed": True}))

    async def reschedule(self, wait: ToolWait, check_at: int) -> None:
        with transaction(self._conn):
            current = await self.get_wait(wait.turnId, wait.toolCallId)
            if current is not None and not current.consumed:
                self._save(current.model_copy(update={"checkAt": check_at}))

    async def list_waits(self, tenant_id: str, container_id: str | None = None) -> list[ToolWait]:
        sql = "SELECT record FROM tool_waits WHERE tenant_id = ? AND consumed = 0"
        args: tuple[str, ...] = (tenant_id,)
        if container_id is not None:
            sql += " AND container_id = ?"
            args += (container_id,)
        rows = self._conn.execute(sql + " ORDER BY created_at, call_id", args).fetchall()
        return [ToolWait.model_validate_json(r[0]) for r in rows]

    async def due_waits(self, now_ms: int, limit: int) -> list[ToolWait]:
        rows = self._conn.execute(
            "SELECT record FROM tool_waits WHERE consumed = 0 AND check_at <= ? ORDER BY check_at LIMIT ?",
            (now_ms, limit),
        ).fetchall()
        return [ToolWait.model_validate_json(r[0]) for r in rows]

    def _save(self, wait: ToolWait) -> None:
        self._conn.execute(
            "UPDATE tool_waits SET status = ?, consumed = ?, check_at = ?, record = ?"
            " WHERE turn_id = ? AND call_id = ?",
            (
                wait.status,
                int(wait.consumed),
                wait.checkAt,
                wait.model_dump_json(),
                wait.turnId,
                wait.toolCallId,
            ),
        )


__all__ = ["SqliteToolWaits"]
