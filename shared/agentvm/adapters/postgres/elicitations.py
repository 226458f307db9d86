"""The ``ElicitationStore`` port on PostgreSQL: the open MCP questions of a cluster's calls.

One row per question. The node whose turn's call waits writes it; the node that receives the answer
(WebSocket or HTTP) stores it with one conditional ``UPDATE`` (still open, unanswered, before its
deadline, the caller's tenant: of two answers sent to two nodes, one is taken) and, in the same
transaction, ``NOTIFY avm_elicitation`` with the question's id. Every node listens on that channel
(``hosts/cluster.py``): the waiting one reads its answer at once (``ElicitationDesk.wake``), with
a read every ``BACKSTOP_POLL_S`` in case a notification was missed (the listening connection was
reconnecting). ``finish`` deletes the row and returns the answer given before it. Rows of a node that
died mid-wait are deleted by a later ``put`` an hour after their deadline.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from agentvm.ports import ElicitationAnswer, PendingElicitation

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.adapters.postgres.database import Database

CHANNEL = "avm_elicitation"
BACKSTOP_POLL_S = 2.0  # the waiting node's reads when no notification came
FORGET_AFTER_MS = 3_600_000


def _answer(text: str | None) -> ElicitationAnswer | None:
    return None if text is None else ElicitationAnswer.from_json(text)


class PostgresElicitations:
    """``agentvm.ports.ElicitationStore`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self.on_answer: Callable[[str], None] | None = None  # the node's desk: ElicitationDesk.wake

    def answered(self, elicitation_id: str) -> None:
        """A notification on ``CHANNEL``: some node stored the answer of ``elicitation_id``."""
        if self.on_answer is not None:
            self.on_answer(elicitation_id)

    async def put(self, pending: PendingElicitation) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "DELETE FROM elicitations WHERE deadline_at < %s",
                (int(time.time() * 1000) - FORGET_AFTER_MS,),
            )
            await conn.execute(
                "INSERT INTO elicitations (elicitation_id, tenant_id, deadline_at, question)"
                " VALUES (%s, %s, %s, %s::jsonb)",
                (pending.elicitation_id, pending.owner.tenant_id, pending.deadline_at, pending.to_json()),
            )

    async def open_count(self, tenant_id: str, now_ms: int) -> int:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT COUNT(*) FROM elicitations"
                " WHERE tenant_id = %s AND deadline_at > %s AND answer IS NULL",
                (tenant_id, now_ms),
            )
            row = await cur.fetchone()
        return 0 if row is None else int(row[0])

    async def get(self, tenant_id: str, elicitation_id: str, now_ms: int) -> PendingElicitation | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT deadline_at, question::text FROM elicitations WHERE elicitation_id = %s"
                " AND tenant_id = %s AND deadline_at > %s AND answer IS NULL",
                (elicitation_id, tenant_id, now_ms),
            )
            row = await cur.fetchone()
        return None if row is None else PendingElicitation.from_json(elicitation_id, row[0], row[1])

    async def answer(
        self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer, now_ms: int
    ) -> bool:
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE elicitations SET answer = %s::jsonb WHERE elicitation_id = %s AND tenant_id = %s"
                " AND deadline_at > %s AND answer IS NULL",
                (answer.to_json(), elicitation_id, tenant_id, now_ms),
            )
            if cur.rowcount != 1:
                return False
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, elicitation_id))  # sent at commit
        return True

    async def answer_of(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT answer::text FROM elicitations WHERE elicitation_id = %s AND tenant_id = %s",
                (elicitation_id, tenant_id),
            )
            row = await cur.fetchone()
        return None if row is None else _answer(row[0])

    async def finish(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM elicitations WHERE elicitation_id = %s AND tenant_id = %s"
                " RETURNING answer::text",
                (elicitation_id, tenant_id),
            )
            row = await cur.fetchone()
        return None if row is None else _answer(row[0])


__all__ = ["BACKSTOP_POLL_S", "CHANNEL", "PostgresElicitations"]
