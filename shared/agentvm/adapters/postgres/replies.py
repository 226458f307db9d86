"""The ``ReplyCache`` port on PostgreSQL (the cluster host): a two-way set-associative table of cached
replies (``ports/replies.py``): one row per ``(tenant, slot)``, slot = set * 2 + way, so a tenant
holds ``slots`` rows at most.

A get is one primary-key range read of the key's set (the stored key and expiry re-checked). A put
is one transaction: a transaction-level advisory lock on the tenant's set (class ``_LOCK_CLASS``),
the read of the set, then the upsert of the way ``way_for`` picks. The lock keeps two nodes
storing into one set at once from both picking the same free way (one reply lost) or one key from
landing in both ways; a put's two round trips (the lock and the read share one, pipelined) are
off the turn's path (the reply has been streamed by then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.ports import DEFAULT_REPLY_SLOTS, REPLY_WAYS, CachedReply, reply_set, way_for

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from agentvm.adapters.postgres.database import Database

_COLUMNS = "cache_key, text, model, input_tokens, output_tokens, created_at, expires_at"
# the advisory-lock class of reply-cache sets: b"avmr" as a signed 32-bit integer
_LOCK_CLASS = int.from_bytes(b"avmr", "big", signed=True)
_READ_SET = f"SELECT slot, {_COLUMNS} FROM reply_cache WHERE tenant_id = %s AND slot >= %s AND slot < %s"
_PUT = f"""
INSERT INTO reply_cache (tenant_id, slot, {_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (tenant_id, slot) DO UPDATE SET cache_key = excluded.cache_key, text = excluded.text,
    model = excluded.model, input_tokens = excluded.input_tokens,
    output_tokens = excluded.output_tokens, created_at = excluded.created_at,
    expires_at = excluded.expires_at
"""


class PostgresReplyCache:
    """``agentvm.ports.ReplyCache`` on the node's ``Database``; ``slots``: the entries a tenant may
    hold."""

    def __init__(self, database: Database, *, slots: int = DEFAULT_REPLY_SLOTS) -> None:
        self._db = database
        self._slots = slots

    async def _held(self, conn: AsyncConnection, tenant_id: str, first: int) -> dict[int, CachedReply]:
        cur = await conn.execute(_READ_SET, (tenant_id, first, first + REPLY_WAYS))
        return {row[0] - first: CachedReply(*row[1:]) for row in await cur.fetchall()}

    async def get(self, tenant_id: str, key: str, *, now_ms: int) -> CachedReply | None:
        first = reply_set(key, self._slots) * REPLY_WAYS
        async with self._db.connection() as conn:
            held = await self._held(conn, tenant_id, first)
        return next((r for r in held.values() if r.key == key and r.expires_at > now_ms), None)

    async def put(self, tenant_id: str, reply: CachedReply) -> None:
        first = reply_set(reply.key, self._slots) * REPLY_WAYS
        async with self._db.transaction() as conn:
            async with conn.pipeline():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s || '#' || %s))",
                    (_LOCK_CLASS, tenant_id, first),
                )
                held = await self._held(conn, tenant_id, first)
            await conn.execute(
                _PUT,
                (
                    tenant_id,
                    first + way_for(held, reply.key, now_ms=reply.created_at),
                    reply.key,
                    reply.text,
                    reply.model,
                    reply.input_tokens,
                    reply.output_tokens,
                    reply.created_at,
                    reply.expires_at,
                ),
            )

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete every reply of a deleted tenant; how many there were."""
        async with self._db.connection() as conn:
            cur = await conn.execute("DELETE FROM reply_cache WHERE tenant_id = %s", (tenant_id,))
            return cur.rowcount

    async def count(self, tenant_id: str) -> int:
        """The entries the tenant holds (for tests and operators)."""
        async with self._db.connection() as conn:
            cur = await conn.execute("SELECT COUNT(*) FROM reply_cache WHERE tenant_id = %s", (tenant_id,))
            row = await cur.fetchone()
        return int(row[0]) if row is not None else 0


__all__ = ["PostgresReplyCache"]
