"""The cluster host's node: what one ``avm serve`` node on PostgreSQL starts and stops (issue 28).

``ClusterNode.start`` opens the node's pool, applies the migrations (under their advisory lock),
opens its one listening connection, forgets the sockets a previous run of the same node id left
in the registry, and announces the node (``cluster_nodes``); it yields the cluster's turn queue,
connection registry, push, interrupt signals and MCP questions' store, wired to each other.
``aclose`` undoes it in reverse; a consumer running on ``queue`` should be cancelled first (it
hands its turns back).

``avm serve --database-url`` starts one (``hosts/cluster_server.py``: ``start_node``) and builds the
runtime on its pool; the queue's and the fan-out's tests use it directly.

A node's id is ``AVM_NODE_ID`` when set (a Kubernetes pod name or a compose service: a restarted
node then takes back its own rows at once), else host name, process id and a random suffix (a
restarted node is then a new node, and the old one's turns come back through its lease).
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from dataclasses import dataclass
from typing import Any

from agentvm.adapters.postgres.connections import PostgresConnections
from agentvm.adapters.postgres.database import DEFAULT_MAX_SIZE, DEFAULT_MIN_SIZE, Database
from agentvm.adapters.postgres.elicitations import CHANNEL as ELICITATION_CHANNEL
from agentvm.adapters.postgres.elicitations import PostgresElicitations
from agentvm.adapters.postgres.migrations import migrate
from agentvm.adapters.postgres.notifications import Notifications
from agentvm.adapters.postgres.push import PostgresPush, PostgresSignals
from agentvm.adapters.postgres.queue import PostgresTurnQueue


def node_id() -> str:
    """This process's node id (see the module docstring): at most 48 of ``[A-Za-z0-9_.-]``."""
    explicit = os.environ.get("AVM_NODE_ID")
    if explicit:
        return explicit
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:30] or "node"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass
class ClusterNode:
    node: str
    database: Database
    notifications: Notifications
    queue: PostgresTurnQueue
    connections: PostgresConnections
    push: PostgresPush
    signals: PostgresSignals
    # MCP servers' open questions; an answer stored on any node wakes the waiting one (NOTIFY)
    elicitations: PostgresElicitations | None = None

    @classmethod
    async def start(
        cls,
        url: str,
        *,
        node: str | None = None,
        pool_min_size: int = DEFAULT_MIN_SIZE,
        pool_max_size: int = DEFAULT_MAX_SIZE,
        max_per_key: int = 0,
        queue_options: dict[str, Any] | None = None,
        push_options: dict[str, Any] | None = None,
    ) -> ClusterNode:
        name = node or node_id()
        database = Database(url, min_size=pool_min_size, max_size=pool_max_size)
        await database.open()
        notifications: Notifications | None = None
        try:
            await migrate(database)
            notifications = Notifications(url, name=f"agentvm-listen-{name}"[:63])
            queue = PostgresTurnQueue(
                database, node=name, notifications=notifications, **(queue_options or {})
            )
            connections = PostgresConnections(database, node=name, max_per_key=max_per_key)
            push = PostgresPush(database, connections, notifications, **(push_options or {}))
            signals = PostgresSignals()
            signals.push = push
            push.on_cancel = signals.fire_here
            queue.before_resume = push.barrier
            elicitations = PostgresElicitations(database)
            notifications.on(ELICITATION_CHANNEL, elicitations.answered)
            await notifications.start()
            await connections.forget_node()
            await push.start()
        except BaseException:
            if notifications is not None:
                await notifications.aclose()
            await database.close()
            raise
        return cls(name, database, notifications, queue, connections, push, signals, elicitations)

    async def aclose(self) -> None:
        await self.push.aclose()
        await self.notifications.aclose()
        await self.database.close()


__all__ = ["ClusterNode", "node_id"]
