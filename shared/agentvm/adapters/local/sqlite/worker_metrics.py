"""The ``SnapshotTable`` of ``avm serve --workers N``: the workers' metrics in the data dir's database.

Each worker is its own process with its own Prometheus registry; the kernel hands a ``/v1/metrics``
request to any of them. With this table (``worker_metrics``, one row per worker, upserted every few
seconds by ``adapters/prometheus/board.py``'s ``MetricsBoard``) every worker answers for all of
them, each sample labelled ``worker``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.sqlite.store import connect

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS worker_metrics (
    worker       TEXT PRIMARY KEY,
    published_at INTEGER NOT NULL,
    families     TEXT NOT NULL
) WITHOUT ROWID;
"""


class SqliteWorkerSnapshots:
    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def publish(self, member: str, at_ms: int, families: str) -> None:
        self._conn.execute(
            "INSERT INTO worker_metrics (worker, published_at, families) VALUES (?, ?, ?)"
            " ON CONFLICT (worker) DO UPDATE SET published_at = excluded.published_at,"
            " families = excluded.families",
            (member, at_ms, families),
        )

    async def others(self, member: str, since_ms: int) -> list[tuple[str, list[dict[str, Any]]]]:
        rows = self._conn.execute(
            "SELECT worker, families FROM worker_metrics WHERE worker <> ? AND published_at >= ?"
            " ORDER BY worker",
            (member, since_ms),
        ).fetchall()
        return [(str(worker), json.loads(families)) for worker, families in rows]

    async def withdraw(self, member: str) -> None:
        self._conn.execute("DELETE FROM worker_metrics WHERE worker = ?", (member,))


__all__ = ["SqliteWorkerSnapshots"]
