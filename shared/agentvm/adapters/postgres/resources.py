"""The ``ResourceStore`` port on PostgreSQL (the cluster host): versions, heads and dependency edges.

A version is created once (``ON CONFLICT DO NOTHING``: of two nodes publishing the same version,
one wins). A head moves only forward unless forced: the upsert's ``DO UPDATE ... WHERE
excluded.seq >= resource_heads.seq`` is re-checked by PostgreSQL on the row as a concurrent writer
left it, so a node holding an older head never moves it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import ResourceHead, ResourceVersion

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database

_PUT_HEAD = (
    "INSERT INTO resource_heads (tenant_id, kind, name, seq, record) VALUES (%s, %s, %s, %s, %s::jsonb)"
    " ON CONFLICT (tenant_id, kind, name) DO UPDATE SET seq = excluded.seq, record = excluded.record"
)


class PostgresResourceStore:
    """``agentvm.ports.ResourceStore`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def create_version(self, version: ResourceVersion) -> bool:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO resource_versions (tenant_id, kind, name, version, seq, record)"
                " VALUES (%s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT DO NOTHING",
                (
                    version.tenantId,
                    version.kind,
                    version.name,
                    version.version,
                    version.seq,
                    version.model_dump_json(),
                ),
            )
            return cur.rowcount == 1

    async def get_version(self, tenant_id: str, kind: str, name: str, version: str) -> ResourceVersion | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM resource_versions"
                " WHERE tenant_id = %s AND kind = %s AND name = %s AND version = %s",
                (tenant_id, kind, name, version),
            )
            row = await cur.fetchone()
        return None if row is None else ResourceVersion.model_validate_json(row[0])

    async def list_versions(self, tenant_id: str, kind: str, name: str) -> list[ResourceVersion]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM resource_versions WHERE tenant_id = %s AND kind = %s AND name = %s"
                " ORDER BY seq",
                (tenant_id, kind, name),
            )
            rows = await cur.fetchall()
        return [ResourceVersion.model_validate_json(r[0]) for r in rows]

    async def delete_version(self, tenant_id: str, kind: str, name: str, version: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "DELETE FROM resource_versions"
                " WHERE tenant_id = %s AND kind = %s AND name = %s AND version = %s",
                (tenant_id, kind, name, version),
            )

    async def put_head(self, head: ResourceHead, *, force: bool = False) -> bool:
        guard = "" if force else " WHERE excluded.seq >= resource_heads.seq"
        async with self._db.connection() as conn:
            cur = await conn.execute(
                _PUT_HEAD + guard, (head.tenantId, head.kind, head.name, head.seq, head.model_dump_json())
            )
            return cur.rowcount == 1

    async def get_head(self, tenant_id: str, kind: str, name: str) -> ResourceHead | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM resource_heads WHERE tenant_id = %s AND kind = %s AND name = %s",
                (tenant_id, kind, name),
            )
            row = await cur.fetchone()
        return None if row is None else ResourceHead.model_validate_json(row[0])

    async def delete_head(self, tenant_id: str, kind: str, name: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "DELETE FROM resource_heads WHERE tenant_id = %s AND kind = %s AND name = %s",
                (tenant_id, kind, name),
            )

    async def list_heads(self, tenant_id: str, kind: str | None = None) -> list[ResourceHead]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM resource_heads"
                " WHERE tenant_id = %s AND (%s::text IS NULL OR kind = %s) ORDER BY kind, name",
                (tenant_id, kind, kind),
            )
            rows = await cur.fetchall()
        return [ResourceHead.model_validate_json(r[0]) for r in rows]

    async def add_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        if not targets:
            return
        async with self._db.connection() as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO resource_edges (tenant_id, kind, name, dependent, selector)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(t, k, n, dependent, s) for t, k, n, s in targets],
            )

    async def remove_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        if not targets:
            return
        async with self._db.connection() as conn, conn.cursor() as cur:
            await cur.executemany(
                "DELETE FROM resource_edges WHERE tenant_id = %s AND kind = %s AND name = %s"
                " AND dependent = %s AND selector = %s",
                [(t, k, n, dependent, s) for t, k, n, s in targets],
            )

    async def dependents(self, tenant_id: str, kind: str, name: str) -> list[tuple[str, str]]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT dependent, selector FROM resource_edges"
                " WHERE tenant_id = %s AND kind = %s AND name = %s ORDER BY dependent",
                (tenant_id, kind, name),
            )
            rows = await cur.fetchall()
        return [(r[0], r[1]) for r in rows]


__all__ = ["PostgresResourceStore"]
