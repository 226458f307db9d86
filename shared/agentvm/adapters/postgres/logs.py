"""The ``LogStore`` port on PostgreSQL: the cluster's recent log lines, for ``/v1/logs``.

Every node writes the lines it logs (masked and tagged with their ids by the root handlers'
filters: ``logs.add_log_handler``) to one table, so ``/v1/logs`` on any node sees the whole
cluster: one row per line with its time, level and tenant, container, session and turn ids as
indexed columns.

- **Off the hot path**: ``handler()`` is a ``QueueHandler``; a ``QueueListener`` thread does the
  inserts on a connection of its own (plain, synchronous psycopg: the thread has no event loop;
  one per node, outside the pool), so logging never waits on the database.
- **Bounded, cluster-wide**: each insert adds the line's length to ``log_store_size`` in the same
  statement, so every node reads the cluster's total from the insert itself. Past ``max_bytes``
  (``AVM_LOG_STORE_MAX_BYTES``, 64 MiB by default) the node that noticed deletes the oldest lines
  down to 90% of the cap, under ``pg_try_advisory_xact_lock``: one node prunes, the others go on
  inserting. A line that cannot be written (the database away) is dropped and counted
  (``dropped``), never raised.
- **Pages**: newest first, by id (the identity's order); the cursor is the last id of the page.
  Reads go through the node's pool (``Database``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING

import psycopg

from agentvm.observability.log_sink import LogWriter, ThreadedLogSink
from agentvm.observability.logstore import page_of, page_select

if TYPE_CHECKING:
    import logging.handlers

    from agentvm.adapters.postgres.database import Database
    from agentvm.ports import LogPage, LogQuery

# the advisory-lock key of pruning: b"avm-logs" as a signed 64-bit integer
PRUNE_LOCK_KEY = int.from_bytes(b"avm-logs", "big", signed=True)

_INSERT = """
WITH added AS (
    INSERT INTO log_lines (ts, level, tenant_id, container_id, session_id, turn_id, line)
    VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING length(line) AS size
)
UPDATE log_store_size SET bytes = bytes + (SELECT size FROM added) RETURNING bytes
"""
_CUT = """
SELECT id, total FROM (SELECT id, SUM(length(line)) OVER (ORDER BY id) AS total FROM log_lines) AS t
WHERE total >= %s ORDER BY id LIMIT 1
"""


class PostgresLogStore(ThreadedLogSink):
    """``agentvm.ports.LogStore`` on PostgreSQL: reads on the node's pool, writes by a thread."""

    def __init__(self, database: Database, *, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self._db = database
        super().__init__(_Writer(database.url, max_bytes))

    async def page(self, query: LogQuery) -> LogPage:
        sql, args = page_select(query, "%s")
        async with self._db.connection() as conn:
            cur = await conn.execute(sql, args)
            return page_of(await cur.fetchall(), query)


class _Writer(LogWriter):
    """Runs in the listener's thread: one insert per line (one round trip), pruning past the cap.
    Its connection is opened on the first line and again after a failure."""

    def __init__(self, url: str, max_bytes: int) -> None:
        super().__init__()
        self._url = url
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self.max_bytes = max_bytes

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        ids = [getattr(record, k, None) for k in ("tenant_id", "container_id", "session_id", "turn_id")]
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self._url, autocommit=True, connect_timeout=5)
                row = self._conn.execute(
                    _INSERT, (int(record.created * 1000), record.levelno, *[_text(v) for v in ids], line)
                ).fetchone()
                if row is not None and int(row[0]) > self.max_bytes:
                    self._prune(self._conn)
            except psycopg.Error:
                self.dropped += 1  # the database away: the line is lost, the process goes on
                self._disconnect()

    def _prune(self, conn: psycopg.Connection) -> None:
        """Delete the oldest lines until the rest fit in 90% of the cap, unless another node is."""
        with conn.transaction():
            locked = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (PRUNE_LOCK_KEY,)).fetchone()
            if not locked or not locked[0]:
                return
            size = conn.execute("SELECT bytes FROM log_store_size FOR UPDATE").fetchone()
            excess = (int(size[0]) if size else 0) - self.max_bytes * 9 // 10
            if excess <= 0:
                return  # another node pruned a moment ago
            cut = conn.execute(_CUT, (excess,)).fetchone()
            if cut is None:
                return
            conn.execute("DELETE FROM log_lines WHERE id <= %s", (cut[0],))
            conn.execute("UPDATE log_store_size SET bytes = bytes - %s", (int(cut[1]),))

    def _disconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._disconnect()
        super().close()


def _text(value: object) -> str | None:
    return None if value is None else str(value)


__all__ = ["PostgresLogStore"]
