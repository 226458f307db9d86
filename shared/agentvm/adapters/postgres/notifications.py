"""``Notifications``: the node's one LISTEN connection, shared by the queue and the fan-out.

PostgreSQL's LISTEN/NOTIFY is the cluster's doorbell: the queue rings ``avm_turn_jobs`` when a
job is enqueued or finishes, so idle nodes claim at once instead of at their next poll, and a
node's push channel carries frames for the WebSockets it holds (``adapters/postgres/push.py``).

A notification is sent when its transaction commits, to the sessions listening at that moment; one
sender's notifications arrive in commit order. Nothing is stored: a node that was not listening
(it was reconnecting) misses them, so every user keeps a backstop (the queue polls; a WebSocket
client resumes by ``afterSeq``), and ``on_reconnect`` callbacks run after each reconnection.

The connection is a dedicated one, outside the pool (a pooled connection would be handed to other
work between notifications). It reconnects after ``reconnect_delay_s`` when the server goes away.
Callbacks run on the event loop and must not block: they set an event or put on a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger("agentvm.adapters.postgres.notifications")

MAX_PAYLOAD_BYTES = 7999  # NOTIFY refuses a payload of 8000 bytes or more (default build)
MAX_CHANNEL_BYTES = 63  # NAMEDATALEN - 1


class Notifications:
    """Listen on channels registered with ``on`` before ``start``; ``aclose`` at shutdown."""

    def __init__(self, url: str, *, name: str = "agentvm-listen", reconnect_delay_s: float = 1.0) -> None:
        self._url = url
        self.name = name  # its application_name in pg_stat_activity
        self.reconnect_delay_s = reconnect_delay_s
        self._callbacks: dict[str, list[Callable[[str], None]]] = {}
        self._on_reconnect: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._conn: psycopg.AsyncConnection | None = None

    def on(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(payload)`` for each notification on ``channel`` (before ``start``)."""
        if len(channel.encode()) > MAX_CHANNEL_BYTES:
            raise ValueError(f"channel name longer than {MAX_CHANNEL_BYTES} bytes")
        if self._task is not None:
            raise RuntimeError("register channels before start()")
        self._callbacks.setdefault(channel, []).append(callback)

    def on_reconnect(self, callback: Callable[[], None]) -> None:
        """Called after the listening connection was lost and is back (notifications were missed)."""
        self._on_reconnect.append(callback)

    async def start(self) -> None:
        """Connect and listen; returns once listening (raises if the first connection fails)."""
        conn = await self._connect()
        self._conn = conn
        self._task = asyncio.create_task(self._listen(conn), name="pg-notifications")

    async def _connect(self) -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True, application_name=self.name)
        for channel in self._callbacks:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        self._listening.set()
        return conn

    async def _listen(self, conn: psycopg.AsyncConnection) -> None:
        try:
            await self._listen_on(conn)
        finally:
            with contextlib.suppress(Exception):
                if self._conn is not None:
                    await self._conn.close()

    async def _listen_on(self, conn: psycopg.AsyncConnection) -> None:
        first = True
        while True:
            try:
                if not first:
                    conn = await self._connect()
                    self._conn = conn
                    for missed in self._on_reconnect:
                        missed()
                first = False
                async for note in conn.notifies():
                    for callback in self._callbacks.get(note.channel, ()):
                        try:
                            callback(note.payload)
                        except Exception:
                            log.exception("a notification callback failed", extra={"channel": note.channel})
            except psycopg.OperationalError:
                self._listening.clear()
                log.warning("postgres: the listening connection was lost; reconnecting")
                with contextlib.suppress(Exception):
                    await conn.close()
                await asyncio.sleep(self.reconnect_delay_s)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


__all__ = ["MAX_PAYLOAD_BYTES", "Notifications"]
