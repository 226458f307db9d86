"""A node's sandbox on a cluster: local workspaces kept in step with a shared store.

Each node of a cluster (``avm serve --database-url``) runs jobs and the model's file tools in its
own local workspaces (``LocalSandbox``: isolation, limits, symlink-safe file access). The next turn
of a container may run on another node, so the workspace's files are also kept in the cluster's
store (``adapters/postgres/workspaces.py``). ``ReplicatedSandbox`` wraps the local sandbox:

- before any operation on a container's workspace it reads the stored version (one indexed read);
  if another node wrote since this node's copy was taken, the copy is replaced by the stored files
  (pulled into a fresh directory, swapped in, the old one removed);
- after a write or a job it writes back what changed (by MD5) and what was removed, and bumps the
  version; if another node had written meanwhile, this node pulls again before its next use.

Concurrency: one node runs a container's operations one at a time (a lock per workspace: a pull
must never swap the directory under a running job). Two nodes running jobs on one container at the
same moment (two of its sessions) both write back: per file, the last write-back wins, and a file
one removed and the other did not touch is removed. Turns of one session never overlap.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from agentvm.adapters.sandbox.process import LocalSandbox
    from agentvm.ports import SandboxLimits, SandboxRun, WorkspaceEntry, WorkspaceScan


@dataclass
class Checkout:
    """What a pull saw: the workspace's version and each file's MD5 (-1: pull before next use)."""

    version: int = 0
    files: dict[str, str] = field(default_factory=dict)


class WorkspaceStore(Protocol):
    """The cluster's copy of the workspaces (``adapters/postgres/workspaces.py``)."""

    async def version(self, tenant_id: str, container_id: str) -> int: ...
    async def pull(self, tenant_id: str, container_id: str, dest: Path) -> Checkout: ...
    async def push(
        self, tenant_id: str, container_id: str, src: Path, before: Checkout
    ) -> tuple[Checkout, bool]: ...


class ReplicatedSandbox:
    """The ``Sandbox`` port: ``local``'s workspaces, kept in step with ``store``."""

    def __init__(self, local: LocalSandbox, store: WorkspaceStore) -> None:
        self._local = local
        self._store = store
        self._copies: dict[tuple[str, str], Checkout] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def __getattr__(self, name: str) -> Any:  # root, quota, workspace(), close(): the local sandbox's
        return getattr(self._local, name)

    @property
    def isolated(self) -> bool:
        return self._local.isolated

    async def read(self, tenant_id: str, container_id: str, path: str, *, max_bytes: int) -> bytes:
        async with self._current(tenant_id, container_id):
            return await self._local.read(tenant_id, container_id, path, max_bytes=max_bytes)

    async def list(self, tenant_id: str, container_id: str, path: str) -> list[WorkspaceEntry]:
        async with self._current(tenant_id, container_id):
            return await self._local.list(tenant_id, container_id, path)

    async def scan(self, tenant_id: str, container_id: str) -> WorkspaceScan:
        async with self._current(tenant_id, container_id):
            return await self._local.scan(tenant_id, container_id)

    async def write(self, tenant_id: str, container_id: str, path: str, data: bytes) -> None:
        async with self._current(tenant_id, container_id):
            try:
                await self._local.write(tenant_id, container_id, path, data)
            finally:
                await self._write_back(tenant_id, container_id)

    async def run(
        self,
        tenant_id: str,
        container_id: str,
        argv: Sequence[str],
        *,
        stdin: str | None,
        limits: SandboxLimits,
    ) -> SandboxRun:
        async with self._current(tenant_id, container_id):
            try:
                return await self._local.run(tenant_id, container_id, argv, stdin=stdin, limits=limits)
            finally:  # a job that failed or timed out may have written files too
                await self._write_back(tenant_id, container_id)

    # -- keeping the local copy in step ----------------------------------------------------------

    def _current(self, tenant_id: str, container_id: str) -> _Current:
        key = (tenant_id, container_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        return _Current(self, key, lock)

    async def _refresh(self, tenant_id: str, container_id: str) -> None:
        key = (tenant_id, container_id)
        stored = await self._store.version(tenant_id, container_id)
        copy = self._copies.get(key)
        if copy is not None and copy.version == stored:
            return
        if copy is None and stored == 0:
            # nothing stored yet: what this node has (if anything) is written back at the next change
            self._copies[key] = Checkout(0, {})
            return
        root = self._local.workspace(tenant_id, container_id)
        fresh = root.with_name(f"{root.name}.pull-{secrets.token_hex(4)}")
        try:
            pulled = await self._store.pull(tenant_id, container_id, fresh)
            old = root.with_name(f"{root.name}.old-{secrets.token_hex(4)}")
            root.rename(old)
            fresh.rename(root)
        finally:
            await asyncio.to_thread(shutil.rmtree, fresh, True)
        await asyncio.to_thread(shutil.rmtree, old, True)
        self._copies[key] = pulled

    async def _write_back(self, tenant_id: str, container_id: str) -> None:
        key = (tenant_id, container_id)
        before = self._copies.get(key, Checkout(0, {}))
        stored, current = await self._store.push(
            tenant_id, container_id, self._local.workspace(tenant_id, container_id), before
        )
        # another node wrote meanwhile: this copy lacks its files, so pull before the next use
        self._copies[key] = stored if current else Checkout(-1, stored.files)


class _Current:
    """``async with``: the workspace's lock held, and its local copy up to date."""

    def __init__(self, sandbox: ReplicatedSandbox, key: tuple[str, str], lock: asyncio.Lock) -> None:
        self._sandbox, self._key, self._lock = sandbox, key, lock

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        try:
            await self._sandbox._refresh(*self._key)
        except BaseException:
            self._lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


__all__ = ["Checkout", "ReplicatedSandbox", "WorkspaceStore"]
