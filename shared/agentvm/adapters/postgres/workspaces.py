"""Sandbox workspaces in PostgreSQL, so that every node of a cluster sees a container's files.

A node runs a job (and the model's file tools) in its own local copy of the workspace
(``adapters/sandbox/replicated.py``); this store is the copy they all agree on. One row per file
(``workspace_files``: path, MD5, size, bytes) and one version per workspace (``workspace_versions``,
+1 on each write-back that changed something). ``pull`` writes the stored files into a fresh
directory and says which version it saw; ``push`` writes back what changed since the pull (by MD5)
and deletes what the job removed, in one transaction, and says whether another node had written in
between (the caller then pulls again before its next use). Like the S3 store of the AWS sandbox
worker (``adapters/sandbox/s3_workspaces.py``), files are read and written only through
``adapters/sandbox/workspace_files.py``: lone regular files beneath the directory, never through a
link, so a job cannot smuggle a file of the node into storage.

Why rows and not large objects or a shared filesystem: a job's workspace is bounded by the
workspace quota (``AVM_SANDBOX_WORKSPACE_MB``, 256 MB by default), one row per file keeps a
write-back to the files that changed, and the rows go with the database's backups and a tenant
purge. A workspace past ``max_bytes`` is refused at the pull, before anything is written.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from agentvm.adapters.sandbox.replicated import Checkout
from agentvm.adapters.sandbox.workspace_files import (
    PUSH_MAX_ENTRIES,
    STORED_MAX_BYTES,
    WorkspaceError,
    WorkspaceTooLarge,
    create_file,
    open_file,
    relative_parts,
    scan,
)
from agentvm.records import workspace_digest

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.adapters.postgres.database import Database


class PostgresWorkspaces:
    def __init__(self, database: Database, *, max_bytes: int = STORED_MAX_BYTES) -> None:
        self._db = database
        self.max_bytes = max_bytes

    async def version(self, tenant_id: str, container_id: str) -> int:
        """The stored version (0: nothing stored yet). One indexed read."""
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT version FROM workspace_versions WHERE workspace = %s",
                (workspace_digest(tenant_id, container_id),),
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def pull(self, tenant_id: str, container_id: str, dest: Path) -> Checkout:
        """Write the stored files beneath ``dest`` (a fresh, empty directory)."""
        workspace = workspace_digest(tenant_id, container_id)
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                "SELECT version FROM workspace_versions WHERE workspace = %s", (workspace,)
            )
            row = await cur.fetchone()
            version = int(row[0]) if row else 0
            cur = await conn.execute(
                "SELECT COALESCE(SUM(size), 0) FROM workspace_files WHERE workspace = %s", (workspace,)
            )
            total = int((await cur.fetchone() or (0,))[0])
            if total > self.max_bytes:
                raise WorkspaceTooLarge(f"the workspace holds {total} bytes (at most {self.max_bytes})")
            dest.mkdir(parents=True, exist_ok=True, mode=0o700)
            checkout = Checkout(version)
            cur = await conn.execute(
                "SELECT path, md5, body FROM workspace_files WHERE workspace = %s ORDER BY path", (workspace,)
            )
            async for path, md5, body in cur:
                try:
                    ours = path != "" and "/".join(relative_parts(path)) == path
                except WorkspaceError:
                    ours = False
                if not ours:
                    continue  # never written by push: not a file of this workspace
                with create_file(dest, path) as f:
                    f.write(body)
                checkout.files[path] = md5
        return checkout

    async def push(
        self, tenant_id: str, container_id: str, src: Path, before: Checkout
    ) -> tuple[Checkout, bool]:
        """Store what changed in ``src`` since ``before``; returns what is stored now and whether
        the store was still at ``before``'s version (False: another node wrote meanwhile)."""
        workspace = workspace_digest(tenant_id, container_id)
        held = scan(src, max_entries=PUSH_MAX_ENTRIES, max_seconds=60)
        now: dict[str, str] = {}
        changed: list[tuple[str, str, bytes]] = []
        for rel in held.files:
            try:
                with open_file(src, rel) as f:
                    body = f.read()
            except WorkspaceError:
                continue  # no longer a lone regular file: not stored (as if removed)
            digest = hashlib.md5(body, usedforsecurity=False).hexdigest()
            now[rel] = digest
            if before.files.get(rel) != digest:
                changed.append((rel, digest, body))
        # A cut scan has not seen every file: deleting what it missed would lose files.
        seen = set(before.files) if held.complete else set(before.files) & set(held.files)
        gone = sorted(seen - set(now))
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                "SELECT version FROM workspace_versions WHERE workspace = %s FOR UPDATE", (workspace,)
            )
            row = await cur.fetchone()
            stored = int(row[0]) if row else 0
            version = stored
            if changed or gone:
                for rel, digest, body in changed:
                    await conn.execute(
                        "INSERT INTO workspace_files (tenant_id, workspace, path, md5, size, body)"
                        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (workspace, path) DO UPDATE"
                        " SET md5 = EXCLUDED.md5, size = EXCLUDED.size, body = EXCLUDED.body",
                        (tenant_id, workspace, rel, digest, len(body), body),
                    )
                if gone:
                    await conn.execute(
                        "DELETE FROM workspace_files WHERE workspace = %s AND path = ANY(%s)",
                        (workspace, gone),
                    )
                cur = await conn.execute(
                    "INSERT INTO workspace_versions (workspace, tenant_id, version) VALUES (%s, %s, 1)"
                    " ON CONFLICT (workspace) DO UPDATE SET version = workspace_versions.version + 1"
                    " RETURNING version",
                    (workspace, tenant_id),
                )
                version = int((await cur.fetchone() or (1,))[0])
        return Checkout(version, now), stored == before.version

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete every workspace of the tenant (a tenant purge); returns how many files."""
        async with self._db.transaction() as conn:
            cur = await conn.execute("DELETE FROM workspace_files WHERE tenant_id = %s", (tenant_id,))
            await conn.execute("DELETE FROM workspace_versions WHERE tenant_id = %s", (tenant_id,))
            return cur.rowcount


__all__ = ["PostgresWorkspaces"]
