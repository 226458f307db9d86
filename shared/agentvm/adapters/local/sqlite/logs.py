"""The ``LogStore`` port on SQLite: the local host's recent log lines, for ``/v1/logs``.

Every line the process logs (masked and tagged with its ids by the root handlers' filters:
``logs.add_log_handler``) is also written to ``<data_dir>/logs.db``, one row per line with its
time, level and tenant, container, session and turn ids as indexed columns. SQLite rather than
rotated JSON files: a tenant's lines are one indexed range away, pages are keyed by row id, and
the cap is exact.

- **Off the hot path**: ``handler()`` is a ``QueueHandler``; a ``QueueListener`` thread does the
  inserts, so logging never waits on the disk.
- **Bounded**: the lines' bytes are capped at ``max_bytes`` (``AVM_LOG_STORE_MAX_BYTES``, 64 MiB by
  default); past it the oldest lines are deleted down to 90% of the cap (rotation by age). A line
  that cannot be written (a full disk) is dropped and counted (``dropped``), never raised.
- **Pages**: newest first; the cursor is the last row id of the page.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from typing import TYPE_CHECKING

from agentvm.observability.log_sink import LogWriter, ThreadedLogSink
from agentvm.observability.logstore import page_of, page_select

if TYPE_CHECKING:
    import logging.handlers
    from pathlib import Path

    from agentvm.ports import LogPage, LogQuery

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log_lines (
    id           INTEGER PRIMARY KEY,
    ts           INTEGER NOT NULL,   -- epoch ms
    level        INTEGER NOT NULL,
    tenant_id    TEXT,               -- NULL: a platform-internal line
    container_id TEXT,
    session_id   TEXT,
    turn_id      TEXT,
    line         TEXT NOT NULL       -- the masked JSON line, as the console got it
);
CREATE INDEX IF NOT EXISTS log_lines_by_tenant ON log_lines (tenant_id, id);
CREATE INDEX IF NOT EXISTS log_lines_by_turn ON log_lines (turn_id, id);
"""


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    return conn


class SqliteLogStore(ThreadedLogSink):
    def __init__(self, path: str | Path, *, max_bytes: int = 64 << 20) -> None:
        self.path = str(path)
        self.max_bytes = max_bytes
        self._reader = _connect(self.path)
        super().__init__(_Writer(self.path, max_bytes))

    def close(self) -> None:
        super().close()
        self._reader.close()

    async def page(self, query: LogQuery) -> LogPage:
        sql, args = page_select(query, "?")
        return page_of(self._reader.execute(sql, args).fetchall(), query)


class _Writer(LogWriter):
    """Runs in the listener's thread: one insert per line, pruning past the cap."""

    def __init__(self, path: str, max_bytes: int) -> None:
        super().__init__()
        self._conn = _connect(path)
        self._lock = threading.Lock()
        self.max_bytes = max_bytes
        self._bytes = int(
            self._conn.execute("SELECT COALESCE(SUM(length(line)), 0) FROM log_lines").fetchone()[0]
        )

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        ids = [getattr(record, k, None) for k in ("tenant_id", "container_id", "session_id", "turn_id")]
        with self._lock:
            try:
                self._conn.execute(
                    "INSERT INTO log_lines (ts, level, tenant_id, container_id, session_id, turn_id, line)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (int(record.created * 1000), record.levelno, *[_text(v) for v in ids], line),
                )
                self._bytes += len(line)
                if self._bytes > self.max_bytes:
                    self._prune()
            except sqlite3.Error:
                self.dropped += 1  # a full disk: the line is lost, the process goes on

    def _prune(self) -> None:
        """Delete the oldest lines until the rest fit in 90% of the cap."""
        target = self.max_bytes * 9 // 10
        excess = self._bytes - target
        cut = self._conn.execute(
            "SELECT id, total FROM (SELECT id, SUM(length(line)) OVER (ORDER BY id) AS total FROM log_lines)"
            " WHERE total >= ? ORDER BY id LIMIT 1",
            (excess,),
        ).fetchone()
        if cut is None:
            return
        self._conn.execute("DELETE FROM log_lines WHERE id <= ?", (cut[0],))
        self._bytes -= int(cut[1])

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()
        super().close()


def _text(value: object) -> str | None:
    return None if value is None else str(value)


__all__ = ["SqliteLogStore"]
