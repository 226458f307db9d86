"""The ``Connections`` port on SQLite: the live WebSockets of every worker of one data dir.

With several ``avm serve`` workers (docs/scaling.md) a client's connection lives in one process
while the turn it subscribed to may run in another: the turn's worker must find its subscribers,
their cursors and protocols, and which worker holds each socket, to hand the frames over
(``adapters/local/relay.py``). This registry is the local twin of the AWS host's DynamoDB one:
one row per connection (with the worker that holds it, its protocol and whether it takes batched
frames) and one per subscription, in the shared
``agentvm.db`` (WAL), so every worker sees every connection.

Semantics are the in-memory registry's (the port's contract, tests/contract): subscribing again
without a cursor keeps the stored one; the per-key cap counts the key's connections on every
worker, and so does the per-tenant cap (``tenant_cap``). A worker deletes its own rows when it
starts (a crash leaves them behind) and its socket's rows when the socket closes; a row of a worker
that died without restarting is pruned by the first turn that fails to reach it
(``ConnectionGone``), as API Gateway's 410 prunes on AWS.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import add_column, connect, transaction
from agentvm.errors import RateLimited
from agentvm.ports import PROTOCOL_V1, ConnectionInfo, Subscription

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ws_connections (
    connection_id TEXT PRIMARY KEY,
    worker        TEXT NOT NULL,
    tenant_id     TEXT,
    key_id        TEXT,
    connected_at  INTEGER NOT NULL,
    protocol      TEXT,
    batch         INTEGER NOT NULL DEFAULT 0,
    cadence       TEXT
);
CREATE INDEX IF NOT EXISTS ws_connections_by_key ON ws_connections (key_id);
CREATE INDEX IF NOT EXISTS ws_connections_by_worker ON ws_connections (worker);
CREATE INDEX IF NOT EXISTS ws_connections_by_tenant ON ws_connections (tenant_id);
CREATE TABLE IF NOT EXISTS ws_subscriptions (
    session_id    TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    after_seq     INTEGER,
    PRIMARY KEY (session_id, connection_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ws_subscriptions_by_connection ON ws_subscriptions (connection_id);
"""


class SqliteConnections:
    """``agentvm.ports.Connections`` shared by the workers of one data dir; ``worker``: this one."""

    def __init__(self, path: str | Path, *, worker: str, max_per_key: int = 0) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        add_column(self._conn, "ws_connections", "batch", "INTEGER NOT NULL DEFAULT 0")  # before batching
        add_column(self._conn, "ws_connections", "cadence", "TEXT")  # before cadences
        self.worker = worker
        self.max_per_key = max_per_key
        self._local: dict[str, str | None] = {}  # this worker's connections -> tenant (for metrics)

    def close(self) -> None:
        self._conn.close()

    def forget_worker(self) -> int:
        """Drop the rows this worker left behind when it last stopped (it holds no socket yet)."""
        with transaction(self._conn):
            self._conn.execute(
                "DELETE FROM ws_subscriptions WHERE connection_id IN"
                " (SELECT connection_id FROM ws_connections WHERE worker = ?)",
                (self.worker,),
            )
            return self._conn.execute("DELETE FROM ws_connections WHERE worker = ?", (self.worker,)).rowcount

    async def register(self, info: ConnectionInfo, *, tenant_cap: int = 0) -> None:
        with transaction(self._conn):
            old = self._conn.execute(
                "SELECT key_id, protocol, batch, tenant_id, cadence FROM ws_connections"
                " WHERE connection_id = ?",
                (info.connection_id,),
            ).fetchone()
            old_key = old[0] if old is not None else None
            old_tenant = old[3] if old is not None else None
            if info.tenant_id is not None and info.tenant_id != old_tenant and tenant_cap > 0:
                (count,) = self._conn.execute(
                    "SELECT COUNT(*) FROM ws_connections WHERE tenant_id = ?", (info.tenant_id,)
                ).fetchone()
                if count >= tenant_cap:
                    raise RateLimited(
                        f"too many connections for this tenant (at most {tenant_cap})",
                        limit=tenant_cap,
                        reset_at_ms=info.connected_at,  # a slot frees as soon as one of them closes
                    )
            if info.key_id is not None and info.key_id != old_key and self.max_per_key > 0:
                (count,) = self._conn.execute(
                    "SELECT COUNT(*) FROM ws_connections WHERE key_id = ?", (info.key_id,)
                ).fetchone()
                if count >= self.max_per_key:
                    raise RateLimited(
                        f"too many connections for this API key (at most {self.max_per_key})",
                        limit=self.max_per_key,
                        reset_at_ms=info.connected_at,  # a slot frees as soon as one of them closes
                    )
            protocol = info.protocol if info.protocol is not None or old is None else old[1]
            batch = info.batch or (old is not None and bool(old[2]))  # declared at the upgrade, kept
            cadence = info.cadence or (old[4] if old is not None else None)  # likewise
            self._conn.execute(
                "INSERT INTO ws_connections"
                " (connection_id, worker, tenant_id, key_id, connected_at, protocol, batch, cadence)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (connection_id) DO UPDATE SET"
                " worker = excluded.worker, tenant_id = excluded.tenant_id, key_id = excluded.key_id,"
                " connected_at = excluded.connected_at, protocol = excluded.protocol, batch = excluded.batch,"
                " cadence = excluded.cadence",
                (
                    info.connection_id,
                    self.worker,
                    info.tenant_id,
                    info.key_id,
                    info.connected_at,
                    protocol,
                    int(batch),
                    cadence,
                ),
            )
        self._local[info.connection_id] = info.tenant_id

    async def get(self, connection_id: str) -> ConnectionInfo | None:
        row = self._conn.execute(
            "SELECT tenant_id, connected_at, key_id, protocol, batch, cadence FROM ws_connections"
            " WHERE connection_id = ?",
            (connection_id,),
        ).fetchone()
        if row is None:
            return None
        return ConnectionInfo(
            connection_id=connection_id,
            tenant_id=row[0],
            connected_at=row[1],
            key_id=row[2],
            protocol=row[3],
            batch=bool(row[4]),
            cadence=row[5],
        )

    def worker_of(self, connection_id: str) -> str | None:
        """The worker holding the connection's socket (None: no such connection)."""
        row = self._conn.execute(
            "SELECT worker FROM ws_connections WHERE connection_id = ?", (connection_id,)
        ).fetchone()
        return row[0] if row is not None else None

    async def remove(self, connection_id: str) -> None:
        with transaction(self._conn):
            self._conn.execute("DELETE FROM ws_subscriptions WHERE connection_id = ?", (connection_id,))
            self._conn.execute("DELETE FROM ws_connections WHERE connection_id = ?", (connection_id,))
        self._local.pop(connection_id, None)

    async def subscribe(
        self,
        connection_id: str,
        session_id: str,
        after_seq: int | None = None,
        *,
        known: ConnectionInfo | None = None,  # unused: the existence check below is a local read
    ) -> None:
        with transaction(self._conn):
            if (
                self._conn.execute(
                    "SELECT 1 FROM ws_connections WHERE connection_id = ?", (connection_id,)
                ).fetchone()
                is None
            ):
                return
            self._conn.execute(
                "INSERT INTO ws_subscriptions (session_id, connection_id, after_seq) VALUES (?, ?, ?)"
                " ON CONFLICT (session_id, connection_id) DO UPDATE SET"
                " after_seq = COALESCE(excluded.after_seq, after_seq)",
                (session_id, connection_id, after_seq),
            )

    async def subscribers(self, session_id: str) -> Sequence[str]:
        return [sub.connection_id for sub in await self.subscriptions(session_id)]

    async def subscribers_with_cursor(self, session_id: str) -> Sequence[tuple[str, int | None]]:
        return [(sub.connection_id, sub.after_seq) for sub in await self.subscriptions(session_id)]

    async def subscriptions(self, session_id: str) -> Sequence[Subscription]:
        rows = self._conn.execute(
            "SELECT s.connection_id, s.after_seq, c.protocol, c.batch, c.cadence FROM ws_subscriptions AS s"
            " JOIN ws_connections AS c ON c.connection_id = s.connection_id WHERE s.session_id = ?",
            (session_id,),
        ).fetchall()
        return [
            Subscription(conn, cursor, protocol or PROTOCOL_V1, bool(batch), cadence)
            for conn, cursor, protocol, batch, cadence in rows
        ]

    async def claim_protocol(self, connection_id: str, protocol: str) -> str:
        with transaction(self._conn):
            row = self._conn.execute(
                "SELECT protocol FROM ws_connections WHERE connection_id = ?", (connection_id,)
            ).fetchone()
            if row is None:
                return protocol
            if row[0] is None:
                self._conn.execute(
                    "UPDATE ws_connections SET protocol = ? WHERE connection_id = ?",
                    (protocol, connection_id),
                )
                return protocol
            return str(row[0])

    def __len__(self) -> int:
        """This worker's live connections (``/v1/metrics`` is per process)."""
        return len(self._local)

    def by_tenant(self) -> Counter[str | None]:
        """This worker's live connections by tenant (None: not authenticated yet)."""
        return Counter(self._local.values())


__all__ = ["SqliteConnections"]
