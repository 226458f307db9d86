"""The ``ResourceStore`` port on SQLite (the local host): versions, heads and dependency edges."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect
from agentvm.records import ResourceHead, ResourceVersion

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS resource_versions (
    tenant_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL,
    seq INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, name, version)
);
CREATE TABLE IF NOT EXISTS resource_heads (
    tenant_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, seq INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, name)
);
CREATE TABLE IF NOT EXISTS resource_edges (
    tenant_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    dependent TEXT NOT NULL, selector TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, name, dependent, selector)
);
"""


class SqliteResourceStore:
    """``agentvm.ports.ResourceStore`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def create_version(self, version: ResourceVersion) -> bool:
        cur = self._conn.execute(
            "INSERT INTO resource_versions (tenant_id, kind, name, version, seq, record)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
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
        row = self._conn.execute(
            "SELECT record FROM resource_versions"
            " WHERE tenant_id = ? AND kind = ? AND name = ? AND version = ?",
            (tenant_id, kind, name, version),
        ).fetchone()
        return None if row is None else ResourceVersion.model_validate_json(row[0])

    async def list_versions(self, tenant_id: str, kind: str, name: str) -> list[ResourceVersion]:
        rows = self._conn.execute(
            "SELECT record FROM resource_versions WHERE tenant_id = ? AND kind = ? AND name = ? ORDER BY seq",
            (tenant_id, kind, name),
        ).fetchall()
        return [ResourceVersion.model_validate_json(r[0]) for r in rows]

    async def delete_version(self, tenant_id: str, kind: str, name: str, version: str) -> None:
        self._conn.execute(
            "DELETE FROM resource_versions WHERE tenant_id = ? AND kind = ? AND name = ? AND version = ?",
            (tenant_id, kind, name, version),
        )

    async def put_head(self, head: ResourceHead, *, force: bool = False) -> bool:
        guard = "" if force else " WHERE excluded.seq >= resource_heads.seq"
        cur = self._conn.execute(
            "INSERT INTO resource_heads (tenant_id, kind, name, seq, record) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (tenant_id, kind, name) DO UPDATE SET seq = excluded.seq, record = excluded.record"
            + guard,
            (head.tenantId, head.kind, head.name, head.seq, head.model_dump_json()),
        )
        return cur.rowcount == 1

    async def get_head(self, tenant_id: str, kind: str, name: str) -> ResourceHead | None:
        row = self._conn.execute(
            "SELECT record FROM resource_heads WHERE tenant_id = ? AND kind = ? AND name = ?",
            (tenant_id, kind, name),
        ).fetchone()
        return None if row is None else ResourceHead.model_validate_json(row[0])

    async def delete_head(self, tenant_id: str, kind: str, name: str) -> None:
        self._conn.execute(
            "DELETE FROM resource_heads WHERE tenant_id = ? AND kind = ? AND name = ?",
            (tenant_id, kind, name),
        )

    async def list_heads(self, tenant_id: str, kind: str | None = None) -> list[ResourceHead]:
        sql, args = "SELECT record FROM resource_heads WHERE tenant_id = ?", [tenant_id]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        rows = self._conn.execute(sql + " ORDER BY kind, name", args).fetchall()
        return [ResourceHead.model_validate_json(r[0]) for r in rows]

    async def add_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        self._conn.executemany(
            "INSERT INTO resource_edges (tenant_id, kind, name, dependent, selector) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            [(t, k, n, dependent, s) for t, k, n, s in targets],
        )

    async def remove_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        self._conn.executemany(
            "DELETE FROM resource_edges WHERE tenant_id = ? AND kind = ? AND name = ? AND dependent = ?"
            " AND selector = ?",
            [(t, k, n, dependent, s) for t, k, n, s in targets],
        )

    async def dependents(self, tenant_id: str, kind: str, name: str) -> list[tuple[str, str]]:
        rows = self._conn.execute(
            "SELECT dependent, selector FROM resource_edges WHERE tenant_id = ? AND kind = ? AND name = ?"
            " ORDER BY dependent",
            (tenant_id, kind, name),
        ).fetchall()
        return [(r[0], r[1]) for r in rows]


__all__ = ["SqliteResourceStore"]
