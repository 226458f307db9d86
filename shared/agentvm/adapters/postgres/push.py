"""How the nodes of a cluster reach each other's sockets: the ``Push`` port over LISTEN/NOTIFY.

A turn runs on the node that claimed it, while its subscribers may be connected to any node. Each
node listens on its own channel, ``avm_push_<node>`` (``Notifications``: one connection per node).
``PostgresPush.send`` writes a frame for one of this node's sockets straight to it (as
``LocalPush`` does), and one for another node's socket as a notification on that node's channel;
the owner is looked up in ``PostgresConnections`` (with whether that node is alive) and remembered
for ``owner_ttl_s``. This is the cluster's ``adapters/local/relay.py``, with PostgreSQL in place of
Unix sockets, so nodes need no address of each other and no port open between them.

Order: the sink awaits each send before the next (``streaming.fanout``), each send commits its own
``NOTIFY`` before returning, and PostgreSQL delivers one listener's notifications in commit order;
the receiving node hands them to one task that writes them in arrival order. So a subscriber on
node B gets node A's frames of a turn in order; resuming by ``afterSeq`` works across nodes because
the cursor is in the shared registry and the finished turns in the shared store.

Size: a NOTIFY payload must stay under 8000 bytes. A larger frame (a long tool result, a batched
pass) is written to ``push_frames`` and the notification carries its id, in the same transaction,
so the row is there when the notification arrives; the receiver reads and deletes it. Rows whose
receiver died are deleted after ``STALE_FRAMES_AFTER`` by the next node that starts.

Delivery is fire-and-forget, like a post to API Gateway that returned 200: a socket closed
meanwhile drops the frame (the client resumes from its last seq). A connection whose node is dead
(its heartbeat in ``cluster_nodes`` ran out) or unknown makes ``send`` raise ``ConnectionGone``, and
the turn prunes it, as a 410 does on AWS. The same channels carry an interrupt to every node
(``avm_cancel``: the node running the turn stops it at once, ``PostgresSignals``).

Wire format of a notification on a node's channel: ``f<connection id>\\n<payload>``,
``p<connection id>\\n<push_frames id>``, or ``b<token>`` (this node's own ``barrier``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import time
from typing import TYPE_CHECKING

from agentvm.adapters.postgres.notifications import MAX_PAYLOAD_BYTES
from agentvm.errors import ConnectionGone
from agentvm.runtime import CancelSignals

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.adapters.postgres.connections import PostgresConnections
    from agentvm.adapters.postgres.database import Database
    from agentvm.adapters.postgres.notifications import Notifications

log = logging.getLogger("agentvm.adapters.postgres.push")

CANCEL_CHANNEL = "avm_cancel"
NODE_LEASE_S = 15.0  # a node that has not renewed its row in cluster_nodes for this long is dead
STALE_FRAMES_AFTER = "10 minutes"
_NODE_ID = re.compile(r"[A-Za-z0-9_.-]{1,48}")


def push_channel(node: str) -> str:
    """The channel a node listens on for frames to its sockets."""
    if not _NODE_ID.fullmatch(node):
        raise ValueError("a node id is 1-48 letters, digits, '_', '.' or '-'")
    return f"avm_push_{node}"


class PostgresPush:
    """``agentvm.ports.Push`` across the nodes of a cluster (see the module docstring)."""

    def __init__(
        self,
        database: Database,
        connections: PostgresConnections,
        notifications: Notifications,
        *,
        node_lease_s: float = NODE_LEASE_S,
        owner_ttl_s: float = 5.0,
    ) -> None:
        self._db = database
        self._connections = connections
        self.node = connections.node
        self.node_lease_s = node_lease_s
        self.owner_ttl_s = owner_ttl_s
        self._senders: dict[str, Callable[[str], Awaitable[None]]] = {}  # this node's sockets
        self._owners: dict[str, tuple[str, float]] = {}  # other nodes' connections -> node, until
        self._inbox: asyncio.Queue[str] = asyncio.Queue()
        self._barriers: dict[str, asyncio.Future[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.on_cancel: Callable[[str], None] | None = None
        notifications.on(push_channel(self.node), self._inbox.put_nowait)
        notifications.on(CANCEL_CHANNEL, self._cancelled)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Say this node is alive (and keep saying it), and start delivering what arrives."""
        await self._heartbeat()
        async with self._db.connection() as conn:
            await conn.execute(
                f"DELETE FROM push_frames WHERE created_at < now() - interval '{STALE_FRAMES_AFTER}'"  # noqa: S608
            )
        self._tasks = [
            asyncio.create_task(self._keep_alive(), name="pg-push-heartbeat"),
            asyncio.create_task(self._deliver_inbox(), name="pg-push-inbox"),
        ]

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        with contextlib.suppress(Exception):  # the others find this node dead at once
            async with self._db.connection() as conn:
                await conn.execute("DELETE FROM cluster_nodes WHERE node = %s", (self.node,))

    async def _heartbeat(self) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO cluster_nodes (node, alive_until) VALUES (%s, now() + make_interval(secs => %s))"
                " ON CONFLICT (node) DO UPDATE SET alive_until = excluded.alive_until",
                (self.node, self.node_lease_s),
            )

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.node_lease_s / 3)
            try:
                await self._heartbeat()
            except Exception:
                log.warning("postgres: could not renew this node's heartbeat; retrying")

    # -- this node's sockets (what LocalPush does in one process) --------------------------------
    def attach(self, connection_id: str, send: Callable[[str], Awaitable[None]]) -> None:
        self._senders[connection_id] = send

    def detach(self, connection_id: str) -> None:
        self._senders.pop(connection_id, None)

    async def send(self, connection_id: str, payload: str) -> None:
        local = self._senders.get(connection_id)
        if local is not None:
            try:
                await local(payload)
            except Exception as exc:  # the socket closed under us: same as API Gateway's 410
                self._senders.pop(connection_id, None)
                raise ConnectionGone(f"connection {connection_id} is gone") from exc
            return
        owner = await self._owner(connection_id)
        message = f"f{connection_id}\n{payload}"
        async with self._db.transaction() as conn:
            if len(message.encode()) <= MAX_PAYLOAD_BYTES:
                await conn.execute("SELECT pg_notify(%s, %s)", (push_channel(owner), message))
            else:
                cursor = await conn.execute(
                    "INSERT INTO push_frames (body) VALUES (%s) RETURNING id", (payload,)
                )
                row = await cursor.fetchone()
                assert row is not None
                await conn.execute(
                    "SELECT pg_notify(%s, %s)", (push_channel(owner), f"p{connection_id}\n{row[0]}")
                )

    async def _owner(self, connection_id: str) -> str:
        cached = self._owners.get(connection_id)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        found = await self._connections.node_of(connection_id)
        if found is None or found[0] == self.node:  # unknown, or ours and already closed
            self._owners.pop(connection_id, None)
            raise ConnectionGone(f"connection {connection_id} is gone")
        node, alive = found
        if not alive:
            self._owners.pop(connection_id, None)
            raise ConnectionGone(f"connection {connection_id}: its node {node} stopped")
        self._owners[connection_id] = (node, time.monotonic() + self.owner_ttl_s)
        return node

    async def _deliver_inbox(self) -> None:
        """Write what other nodes sent to this node's sockets, one at a time in arrival order."""
        while True:
            message = await self._inbox.get()
            kind, rest = message[:1], message[1:]
            connection_id, _, body = rest.partition("\n")
            if kind == "b":
                waiter = self._barriers.pop(rest, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
                continue
            try:
                if kind == "p":
                    async with self._db.connection() as conn:
                        cursor = await conn.execute(
                            "DELETE FROM push_frames WHERE id = %s RETURNING body", (int(body),)
                        )
                        row = await cursor.fetchone()
                    if row is None:
                        continue
                    body = row[0]
                local = self._senders.get(connection_id)
                if local is not None:
                    await local(body)
            except asyncio.CancelledError:
                raise
            except Exception:  # closed since, or the frame's row could not be read: the client resumes
                log.info("dropped a relayed frame", extra={"connection_id": connection_id})

    async def barrier(self, timeout_s: float = 5.0) -> None:
        """Return once every frame other nodes committed for this node's sockets before now has
        been written to them. A turn resumed here after another node ran it calls this first
        (``PostgresTurnQueue.before_resume``): the dead attempt's last frames, still on their way
        through this node's channel, then reach its sockets before the new attempt's, which go to
        local sockets directly. A notification to ourselves arrives after everything committed
        before it (one listener gets notifications in commit order); past ``timeout_s`` (the
        listening connection is down) we go on, and a client resumes from its last seq."""
        token = secrets.token_hex(8)
        waiter = asyncio.get_running_loop().create_future()
        self._barriers[token] = waiter
        try:
            async with self._db.connection() as conn:
                await conn.execute("SELECT pg_notify(%s, %s)", (push_channel(self.node), f"b{token}"))
            async with asyncio.timeout(timeout_s):  # not wait_for: 3.11's can lose a cancel
                await waiter
        except (TimeoutError, OSError):
            log.warning("push barrier timed out; going on")
        finally:
            self._barriers.pop(token, None)

    # -- interrupts to every node ----------------------------------------------------------------
    async def broadcast_cancel(self, turn_id: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (CANCEL_CHANNEL, turn_id))

    def _cancelled(self, turn_id: str) -> None:
        if self.on_cancel is not None:
            self.on_cancel(turn_id)


class PostgresSignals(CancelSignals):
    """Interrupt signals that reach the turn's node whichever node the interrupt arrived on."""

    push: PostgresPush | None = None

    def fire(self, turn_id: str) -> None:
        super().fire(turn_id)
        if self.push is not None:
            task = asyncio.ensure_future(self.push.broadcast_cancel(turn_id))
            task.add_done_callback(_forget)

    def fire_here(self, turn_id: str) -> None:
        """An interrupt another node relayed: this node's turn, if it runs here."""
        super().fire(turn_id)


def _forget(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not tell the other nodes about an interrupt")


__all__ = ["CANCEL_CHANNEL", "NODE_LEASE_S", "PostgresPush", "PostgresSignals", "push_channel"]
