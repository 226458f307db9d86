"""The ``Counters`` port on PostgreSQL (the cluster host): one row per (counter, field).

Any node may add to any counter at once, so every write is one transaction that first takes a
transaction-level advisory lock on the counter's key (``pg_advisory_xact_lock``: the class
``_LOCK_CLASS``, the key's ``hashtext``; released at commit). Under it: drop the counter if it has
expired, upsert the fields (``INSERT ... ON CONFLICT DO UPDATE SET value = value + ...``), and give
every field of the counter the new expiry. The lock orders writers of one counter as SQLite's
``BEGIN IMMEDIATE`` does, without a row to lock for a counter that does not exist yet, and without
the deadlock two writers of different fields of one counter would otherwise meet in the expiry
update. Writers of different counters never wait for each other (a ``hashtext`` collision only
makes two counters' writers take turns).

An increment sends its statements in one pipeline: one round trip. A lease reads the field under
the lock and then writes (or, finding nothing left, writes nothing): two round trips. Expired rows
are also swept every ``_SWEEP_EVERY`` increments of the node, so the table stays small.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from agentvm.ports import CounterLease

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentvm.adapters.postgres.database import Database

FIELD_RE = re.compile(r"[a-z0-9]{1,16}")
_SWEEP_EVERY = 1000
# the advisory-lock class of counters' keys: b"avmc" as a signed 32-bit integer
_LOCK_CLASS = int.from_bytes(b"avmc", "big", signed=True)

_LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
_DROP_EXPIRED = "DELETE FROM counters WHERE key = %s AND expires_at <= %s"
_SWEEP = "DELETE FROM counters WHERE expires_at <= %s"
_ADD = """
INSERT INTO counters (key, field, value, expires_at)
SELECT %(key)s, f.field, f.amount, %(expires)s
FROM unnest(%(fields)s::text[], %(amounts)s::bigint[]) AS f (field, amount)
ON CONFLICT (key, field) DO UPDATE SET value = counters.value + excluded.value,
    expires_at = excluded.expires_at
RETURNING field, value
"""
_EXPIRE_ALL = "UPDATE counters SET expires_at = %s WHERE key = %s AND expires_at <> %s"


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


class PostgresCounters:
    """``agentvm.ports.Counters`` on the node's ``Database``."""

    def __init__(self, database: Database, *, now: Callable[[], float] = time.time) -> None:
        self._db = database
        self._now = now
        self._writes = 0

    async def incr(self, key: str, amounts: Mapping[str, int], *, expires_at: int) -> dict[str, int]:
        check_fields(amounts)
        now = int(self._now())
        self._writes += 1
        fields = sorted(amounts)
        async with self._db.transaction() as conn, conn.pipeline():
            await conn.execute(_LOCK, (_LOCK_CLASS, key))
            if self._writes % _SWEEP_EVERY == 0:
                await conn.execute(_SWEEP, (now,))
            else:
                await conn.execute(_DROP_EXPIRED, (key, now))
            added = await conn.execute(
                _ADD,
                {
                    "key": key,
                    "expires": expires_at,
                    "fields": fields,
                    "amounts": [int(amounts[f]) for f in fields],
                },
            )
            # one expiry per counter: the latest add sets it for every field
            await conn.execute(_EXPIRE_ALL, (expires_at, key, expires_at))
            rows = await added.fetchall()
        return {name: int(value) for name, value in rows}

    async def lease(
        self, key: str, field: str, amount: int, *, limit: int, expires_at: int, whole: bool = False
    ) -> CounterLease:
        amount = check_lease(field, amount, limit, whole=whole)
        now = int(self._now())
        async with self._db.transaction() as conn:
            async with conn.pipeline():
                await conn.execute(_LOCK, (_LOCK_CLASS, key))
                await conn.execute(_DROP_EXPIRED, (key, now))
                found = await conn.execute(
                    "SELECT value FROM counters WHERE key = %s AND field = %s", (key, field)
                )
                row = await found.fetchone()
            value = int(row[0]) if row is not None else 0
            granted = (
                (amount if value + amount <= limit else 0) if whole else max(0, min(amount, limit - value))
            )
            if granted == 0:
                return CounterLease(0, value)
            async with conn.pipeline():
                await conn.execute(
                    _ADD, {"key": key, "expires": expires_at, "fields": [field], "amounts": [granted]}
                )
                await conn.execute(_EXPIRE_ALL, (expires_at, key, expires_at))
        return CounterLease(granted, value + granted)

    async def get(self, key: str) -> dict[str, int]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT field, value FROM counters WHERE key = %s AND expires_at > %s",
                (key, int(self._now())),
            )
            rows = await cur.fetchall()
        return {name: int(value) for name, value in rows}


__all__ = ["PostgresCounters", "check_fields", "check_lease"]
