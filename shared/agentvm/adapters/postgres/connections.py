"""The ``Connections`` port on PostgreSQL: the live WebSockets of every node of the cluster.

A client's socket lives on one node while the turn it subscribed to may run on another: the turn's
node finds the session's subscribers here (their cursors and protocols, one query) and which node
holds each socket, and hands each frame to that node (``adapters/postgres/push.py``). The twin of
``adapters/local/sqlite/connections.py`` (the workers of one machine) with ``node`` for ``worker``,
and of the AWS host's DynamoDB registry; the port's contract suite runs on all of them.

Semantics are the port's: subscribing again without a cursor keeps the stored one; the per-key and
per-tenant caps count connections on every node (read in the registering transaction; two nodes
registering the same key's last slot at the same instant may both get it). A node deletes its own
rows when it starts (``forget_node``: a crash leaves them behind) and a socket's rows when it
closes; rows of a node that died for good are pruned by the first turn that finds its node dead
(``node_of``, ``ConnectionGone``), as API Gateway's 410 prunes on AWS.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from agentvm.errors import RateLimited
from agentvm.ports import PROTOCOL_V1, ConnectionInfo, Subscription

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database

_UPSERT = """
INSERT INTO ws_connections (connection_id, node, tenant_id, key_id, connected_at, protocol, batch, cadence)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (connection_id) DO UPDATE SET
    node = excluded.node, tenant_id = excluded.tenant_id, key_id = excluded.key_id,
    connected_at = excluded.connected_at, protocol = excluded.protocol, batch = excluded.batch,
    cadence = excluded.cadence
"""


class PostgresConnections:
    """``agentvm.ports.Connections`` shared by the nodes of a cluster; ``node``: this one."""

    def __init__(self, database: Database, *, node: str, max_per_key: int = 0) -> None:
        self._db = database
        self.node = node
        self.max_per_key = max_per_key
        self._local: dict[str, str | None] = {}  # this node's connections -> tenant (for metrics)

    async def forget_node(self) -> int:
        """Drop the rows this node left behind when it last stopped (it holds no socket yet)."""
        async with self._db.connection() as conn:
            cursor = await conn.execute("DELETE FROM ws_connections WHERE node = %s", (self.node,))
            return cursor.rowcount

    async def register(self, info: ConnectionInfo, *, tenant_cap: int = 0) -> None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT key_id, protocol, batch, tenant_id, cadence FROM ws_connections"
                " WHERE connection_id = %s FOR UPDATE",
                (info.connection_id,),
            )
            old = await cursor.fetchone()
            old_key = old[0] if old is not None else None
            old_tenant = old[3] if old is not None else None
            if info.tenant_id is not None and info.tenant_id != old_tenant and tenant_cap > 0:
                cursor = await conn.execute(
                    "SELECT COUNT(*) FROM ws_connections WHERE tenant_id = %s", (info.tenant_id,)
                )
                row = await cursor.fetchone()
                if row is not None and row[0] >= tenant_cap:
                    raise RateLimited(
                        f"too many connections for this tenant (at most {tenant_cap})",
                        limit=tenant_cap,
                        reset_at_ms=info.connected_at,  # a slot frees as soon as one of them closes
                    )
            if info.key_id is not None and info.key_id != old_key and self.max_per_key > 0:
                cursor = await conn.execute(
                    "SELECT COUNT(*) FROM ws_connections WHERE key_id = %s", (info.key_id,)
                )
                row = await cursor.fetchone()
                if row is not None and row[0] >= self.max_per_key:
                    raise RateLimited(
                        f"too many connections for this API key (at most {self.max_per_key})",
                        limit=self.max_per_key,
                        reset_at_ms=info.connected_at,  # a slot frees as soon as one of them closes
                    )
            protocol = info.protocol if info.protocol is not None or old is None else old[1]
            batch = info.batch or (old is not None and bool(old[2]))  # declared at the upgrade, kept
            cadence = info.cadence or (old[4] if old is not None else None)  # likewise
            await conn.execute(
                _UPSERT,
                (
                    info.connection_id,
                    self.node,
                    info.tenant_id,
                    info.key_id,
                    info.connected_at,
                    protocol,
                    batch,
                    cadence,
                ),
            )
        self._local[info.connection_id] = info.tenant_id

    async def get(self, connection_id: str) -> ConnectionInfo | None:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT tenant_id, connected_at, key_id, protocol, batch, cadence FROM ws_connections"
                " WHERE connection_id = %s",
                (connection_id,),
            )
            row = await cursor.fetchone()
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

    async def node_of(self, connection_id: str) -> tuple[str, bool] | None:
        """The node holding the connection's socket and whether that node is alive (its push
        heartbeat is current); None: no such connection."""
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT c.node, COALESCE(n.alive_until > now(), false) FROM ws_connections AS c"
                " LEFT JOIN cluster_nodes AS n ON n.node = c.node WHERE c.connection_id = %s",
                (connection_id,),
            )
            row = await cursor.fetchone()
        return None if row is None else (str(row[0]), bool(row[1]))

    async def remove(self, connection_id: str) -> None:
        async with self._db.connection() as conn:  # its subscriptions go with it (ON DELETE CASCADE)
            await conn.execute("DELETE FROM ws_connections WHERE connection_id = %s", (connection_id,))
        self._local.pop(connection_id, None)

    async def subscribe(
        self,
        connection_id: str,
        session_id: str,
        after_seq: int | None = None,
        *,
        known: ConnectionInfo | None = None,  # unused: one statement checks and writes
    ) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO ws_subscriptions (session_id, connection_id, after_seq)"
                " SELECT %(session)s, connection_id, %(after)s FROM ws_connections"
                " WHERE connection_id = %(conn)s"
                " ON CONFLICT (session_id, connection_id) DO UPDATE SET"
                " after_seq = COALESCE(excluded.after_seq, ws_subscriptions.after_seq)",
                {"session": session_id, "conn": connection_id, "after": after_seq},
            )

    async def subscribers(self, session_id: str) -> Sequence[str]:
        return [sub.connection_id for sub in await self.subscriptions(session_id)]

    async def subscribers_with_cursor(self, session_id: str) -> Sequence[tuple[str, int | None]]:
        return [(sub.connection_id, sub.after_seq) for sub in await self.subscriptions(session_id)]

    async def subscriptions(self, session_id: str) -> Sequence[Subscription]:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT s.connection_id, s.after_seq, c.protocol, c.batch, c.cadence"
                " FROM ws_subscriptions AS s JOIN ws_connections AS c ON c.connection_id = s.connection_id"
                " WHERE s.session_id = %s",
                (session_id,),
            )
            rows = await cursor.fetchall()
        return [
            Subscription(conn_id, cursor_, protocol or PROTOCOL_V1, bool(batch), cadence)
            for conn_id, cursor_, protocol, batch, cadence in rows
        ]

    async def claim_protocol(self, connection_id: str, protocol: str) -> str:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE ws_connections SET protocol = COALESCE(protocol, %s) WHERE connection_id = %s"
                " RETURNING protocol",
                (protocol, connection_id),
            )
            row = await cursor.fetchone()
        return protocol if row is None else str(row[0])

    def __len__(self) -> int:
        """This node's live connections (``/v1/metrics`` is per node until the cluster view)."""
        return len(self._local)

    def by_tenant(self) -> Counter[str | None]:
        """This node's live connections by tenant (None: not authenticated yet)."""
        return Counter(self._local.values())


__all__ = ["PostgresConnections"]
