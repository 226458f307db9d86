"""The ``Counters`` port on SQLite (the local host): one row per (counter, field).

An increment is one ``BEGIN IMMEDIATE`` transaction: drop the counter if it has expired, then
upsert each field, so concurrent writers (the server and a CLI, or two connections) never lose an
add. Expired rows are also swept every ``_SWEEP_EVERY`` increments, so the table stays small.

A lease (``lease``: add up to ``amount`` without going over ``limit``) is the same transaction with a
read of the field between the drop and the upsert; ``BEGIN IMMEDIATE`` holds the write lock across
both, so concurrent lessees (several ``avm serve --workers`` on one data dir) never take more than
the limit between them. One that finds nothing left (or, ``whole``, not all it asks) writes nothing.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect, transaction
from agentvm.ports import CounterLease

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (
    key        TEXT NOT NULL,
    field      TEXT NOT NULL,
    value      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,  -- epoch seconds
    PRIMARY KEY (key, field)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS counters_by_expiry ON counters (expires_at);
"""
FIELD_RE = re.compile(r"[a-z0-9]{1,16}")
_SWEEP_EVERY = 1000


def check_fields(amounts: Mapping[str, int]) -> None:
    if not amounts:
        raise ValueError("incr needs at least one field")
    for name in amounts:
        if not FIELD_RE.fullmatch(name):
            raise ValueError(f"counter field names are 1-16 characters of [a-z0-9], got {name!r}")


def check_lease(field: str, amount: int, limit: int, *, whole: bool = False) -> int:
    """The amount to ask for (``amount`` capped at ``limit``, unless ``whole``: all or nothing);
    ValueError on a bad field or bound."""
    check_fields({field: amount})
    if amount < 1 or limit < 1:
        raise ValueError(f"a lease needs amount >= 1 and limit >= 1, got {amount} and {limit}")
    return amount if whole else min(amount, limit)


class SqliteCounters:
    """``agentvm.ports.Counters`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path, *, now: Callable[[], float] = time.time) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        self._now = now
        self._writes = 0

    def close(self) -> None:
        self._conn.close()

    async def incr(self, key: str, amounts: Mapping[str, int], *, expires_at: int) -> dict[str, int]:
        check_fields(amounts)
        now = int(self._now())
        self._writes += 1
        with transaction(self._conn):
            if self._writes % _SWEEP_EVERY == 0:
                self._conn.execute("DELETE FROM counters WHERE expires_at <= ?", (now,))
            else:
                self._conn.execute("DELETE FROM counters WHERE key = ? AND expires_at <= ?", (key, now))
            out: dict[str, int] = {}
            for name, amount in amounts.items():
                row = self._conn.execute(
                    "INSERT INTO counters (key, field, value, expires_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key, field) DO UPDATE SET value = value + excluded.value,"
                    " expires_at = excluded.expires_at RETURNING value",
                    (key, name, int(amount), expires_at),
                ).fetchone()
                out[name] = row[0]
            # one expiry per counter: the latest add sets it for every field
            self._conn.execute("UPDATE counters SET expires_at = ? WHERE key = ?", (expires_at, key))
        return out

    async def lease(
        self, key: str, field: str, amount: int, *, limit: int, expires_at: int, whole: bool = False
    ) -> CounterLease:
        amount = check_lease(field, amount, limit, whole=whole)
        now = int(self._now())
        with transaction(self._conn):
            self._conn.execute("DELETE FROM counters WHERE key = ? AND expires_at <= ?", (key, now))
            row = self._conn.execute(
                "SELECT value FROM counters WHERE key = ? AND field = ?", (key, field)
            ).fetchone()
            value = row[0] if row is not None else 0
            granted = (
                (amount if value + amount <= limit else 0) if whole else max(0, min(amount, limit - value))
            )
            if granted == 0:
                return CounterLease(0, value)
            self._conn.execute(
                "INSERT INTO counters (key, field, value, expires_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (key, field) DO UPDATE SET value = value + excluded.value,"
                " expires_at = excluded.expires_at",
                (key, field, granted, expires_at),
            )
            self._conn.execute("UPDATE counters SET expires_at = ? WHERE key = ?", (expires_at, key))
        return CounterLease(granted, value + granted)

    async def get(self, key: str) -> dict[str, int]:
        rows = self._conn.execute(
            "SELECT field, value FROM counters WHERE key = ? AND expires_at > ?", (key, int(self._now()))
        ).fetchall()
        return {name: value for name, value in rows}


__all__ = ["SqliteCounters", "check_fields", "check_lease"]
