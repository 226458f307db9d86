"""The ``ElicitationStore`` port on SQLite: the open MCP questions of ``avm serve --workers N``.

One row per question in ``agentvm.db``, shared by the workers: the worker whose turn's call waits
writes it and reads it every ``DEFAULT_POLL_S`` (0.25 s) until answered; the worker that receives
the answer (WebSocket or HTTP) writes it with one conditional ``UPDATE`` (still open, unanswered,
before its deadline, the caller's tenant), so of two answers exactly one is taken. ``finish`` is one
``DELETE ... RETURNING`` of the row: an answer arriving after it finds nothing (``not_found``). The
rows of a worker that died mid-wait are deleted by the next ``put`` an hour past their deadline.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.ports import ElicitationAnswer, PendingElicitation

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS elicitations (
    elicitation_id TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL,
    deadline_at    INTEGER NOT NULL,
    question       TEXT NOT NULL,
    answer         TEXT
);
CREATE INDEX IF NOT EXISTS elicitations_by_tenant ON elicitations (tenant_id, deadline_at);
CREATE INDEX IF NOT EXISTS elicitations_by_deadline ON elicitations (deadline_at);
"""
FORGET_AFTER_MS = 3_600_000  # rows left by a process that died mid-wait


def _answer(text: str | None) -> ElicitationAnswer | None:
    return None if text is None else ElicitationAnswer.from_json(text)


class SqliteElicitations:
    """``agentvm.ports.ElicitationStore`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def put(self, pending: PendingElicitation) -> None:
        forget = int(time.time() * 1000) - FORGET_AFTER_MS
        self._conn.execute("DELETE FROM elicitations WHERE deadline_at < ?", (forget,))
        self._conn.execute(
            "INSERT INTO elicitations (elicitation_id, tenant_id, deadline_at, question) VALUES (?, ?, ?, ?)",
            (pending.elicitation_id, pending.owner.tenant_id, pending.deadline_at, pending.to_json()),
        )

    async def open_count(self, tenant_id: str, now_ms: int) -> int:
        row = self._conn.execute(
            "SELECT COUNT(*) FROM elicitations WHERE tenant_id = ? AND deadline_at > ? AND answer IS NULL",
            (tenant_id, now_ms),
        ).fetchone()
        return int(row[0])

    async def get(self, tenant_id: str, elicitation_id: str, now_ms: int) -> PendingElicitation | None:
        row = self._conn.execute(
            "SELECT deadline_at, question FROM elicitations WHERE elicitation_id = ? AND tenant_id = ?"
            " AND deadline_at > ? AND answer IS NULL",
            (elicitation_id, tenant_id, now_ms),
        ).fetchone()
        return None if row is None else PendingElicitation.from_json(elicitation_id, row[0], row[1])

    async def answer(
        self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer, now_ms: int
    ) -> bool:
        cur = self._conn.execute(
            "UPDATE elicitations SET answer = ? WHERE elicitation_id = ? AND tenant_id = ?"
            " AND deadline_at > ? AND answer IS NULL",
            (answer.to_json(), elicitation_id, tenant_id, now_ms),
        )
        return cur.rowcount == 1

    async def answer_of(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        row = self._conn.execute(
            "SELECT answer FROM elicitations WHERE elicitation_id = ? AND tenant_id = ?",
            (elicitation_id, tenant_id),
        ).fetchone()
        return None if row is None else _answer(row[0])

    async def finish(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        row = self._conn.execute(
            "DELETE FROM elicitations WHERE elicitation_id = ? AND tenant_id = ? RETURNING answer",
            (elicitation_id, tenant_id),
        ).fetchone()
        return None if row is None else _answer(row[0])


__all__ = ["SqliteElicitations"]
