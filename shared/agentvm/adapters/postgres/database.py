"""``Database``: one PostgreSQL connection pool per node, shared by every store of that node.

The pool holds between ``min_size`` and ``max_size`` connections (``AVM_DATABASE_POOL_MIN_SIZE``,
``AVM_DATABASE_POOL_MAX_SIZE``; defaults 1 and 10). Every store method borrows one connection for
the few statements it runs and gives it back, so a node needs about as many connections as it has
statements in flight at once, not one per session or WebSocket. Size the server for it:
PostgreSQL's ``max_connections`` (default 100) must exceed nodes x ``max_size`` plus each node's
listening connections (the fan-out, later) and the operator's own.

Connections are in autocommit mode: a single statement commits on its own, and a store that needs
several statements to be atomic opens ``transaction()``. Server-side prepared statements are
psycopg's default (a statement run 5 times is prepared); behind a transaction-mode PgBouncer they
would have to be turned off (``prepare_threshold=None``), which this pool does not do yet.

The URL may hold a password: it is never logged or put in an error; ``redacted_url`` is the form
that may be shown.

A cancellation is never lost here. On Python 3.11, psycopg_pool waits for a free connection with
``asyncio.wait_for``, which swallows a ``cancel()`` landing in the instant the pool hands that
waiter a connection (it returns the connection instead; fixed in 3.12's ``wait_for``). Measured: a
cancel within two loop iterations of the hand-over was lost 60 times in 60. A queue consumer
cancelled at that instant (SIGTERM) went on consuming and never ended. ``connection()`` compares the
task's pending cancel requests before and after taking the connection, and raises the lost
``CancelledError`` itself (the connection goes back to the pool).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentvm.errors import StorageUnavailable

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from psycopg import AsyncConnection

logger = logging.getLogger(__name__)

DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 10
DEFAULT_CONNECT_TIMEOUT_S = 10.0


def redacted_url(url: str) -> str:
    """The URL with its password (and any ``password=`` query parameter) replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:***@{hostport}" if colon else f"{user}@{hostport}"
    query = "&".join(
        "password=***" if pair.lower().startswith("password=") else pair
        for pair in parts.query.split("&")
        if pair
    )
    # by hand: urlunsplit drops the empty host of postgresql:///dbname?host=/run/postgresql
    return (
        f"{parts.scheme}://{netloc}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )


class Database:
    """The node's connection pool. ``await open()`` before use, ``await close()`` at shutdown."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = DEFAULT_MIN_SIZE,
        max_size: int = DEFAULT_MAX_SIZE,
        timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        name: str = "agentvm",
    ) -> None:
        self.url = url
        self.display_url = redacted_url(url)
        self._pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            open=False,
            name=name,
            kwargs={"autocommit": True},
        )

    @property
    def max_size(self) -> int:
        return self._pool.max_size

    async def open(self) -> None:
        """Open the pool and wait for its first connections; an unreachable server raises
        ``StorageUnavailable`` naming the redacted URL (never the password)."""
        try:
            await self._pool.open(wait=True, timeout=self._pool.timeout)
        except (PoolTimeout, psycopg.OperationalError) as exc:
            await self._pool.close()
            logger.error("postgres: cannot connect to %s", self.display_url)
            raise StorageUnavailable(f"PostgreSQL at {self.display_url} is not reachable") from exc

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection from the pool (autocommit), back to the pool on exit.

        A lost server, a full disk, too many connections or no free connection in time
        (psycopg's ``OperationalError``, SQLSTATE classes 08, 53, 57...) raise ``StorageUnavailable``,
        so the gateway answers ``storage_unavailable`` (503) and a turn fails cleanly.
        """
        task = asyncio.current_task()
        cancels = task.cancelling() if task is not None else 0
        try:
            async with self._pool.connection() as conn:
                if task is not None and task.cancelling() > cancels:
                    raise asyncio.CancelledError  # requested while we waited, lost by the pool
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            logger.warning("postgres: %s on %s", type(exc).__name__, self.display_url)
            raise StorageUnavailable() from exc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A connection inside one transaction: committed on exit, rolled back on an exception."""
        async with self.connection() as conn, conn.transaction():
            yield conn
