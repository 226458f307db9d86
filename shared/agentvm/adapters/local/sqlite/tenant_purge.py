"""The ``TenantPurge`` port on this machine: a deleted tenant's conversations go at once.

Cheap here (a few SQLite statements in one transaction, and a directory per container), so the
local host purges while the tenant is deleted; so does the cluster host (``avm serve
--database-url``), on its PostgreSQL store and reply cache. The AWS host has none: there a purge
would be a Query and a batch of deletes per session, and turn records are found by no tenant index
(a table scan), so a deleted tenant's conversations are kept and marked instead (docs/tenants.md).
"""

from __future__ import annotations

import asyncio
import shutil
from typing import TYPE_CHECKING, Protocol

from agentvm.records import workspace_digest

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.records import ContainerRecord


class PurgeableStore(Protocol):
    """The store's side of a purge (SQLite's and PostgreSQL's ``Store``)."""

    async def list_containers(self, tenant_id: str) -> list[ContainerRecord]: ...
    async def purge_tenant(self, tenant_id: str) -> int: ...


class PurgeableReplies(Protocol):
    """The reply cache's side (SQLite's and PostgreSQL's), and the cluster's stored workspaces'."""

    async def purge_tenant(self, tenant_id: str) -> int: ...


class LocalTenantPurge:
    def __init__(
        self,
        store: PurgeableStore,
        workspaces: Path | None = None,
        *,
        replies: PurgeableReplies | None = None,
        stored_workspaces: PurgeableReplies | None = None,
        memory: PurgeableReplies | None = None,
    ) -> None:
        self._store = store
        self._workspaces = workspaces  # the sandbox's root (None: this host has no workspaces)
        self._replies = replies  # the images' cached first replies (written from its conversations)
        # the cluster's shared copy of the workspaces (adapters/postgres/workspaces.py), if any
        self._stored_workspaces = stored_workspaces
        self._memory = memory  # what its agents kept about its end users (docs/memory.md)

    async def purge_tenant(self, tenant_id: str) -> int:
        # Workspaces first: they are found through the containers the store purges.
        if self._workspaces is not None:
            root = self._workspaces
            for container in await self._store.list_containers(tenant_id):
                path = root / workspace_digest(tenant_id, container.containerId)
                await asyncio.to_thread(shutil.rmtree, path, True)
        if self._stored_workspaces is not None:
            await self._stored_workspaces.purge_tenant(tenant_id)
        if self._replies is not None:
            await self._replies.purge_tenant(tenant_id)
        if self._memory is not None:
            await self._memory.purge_tenant(tenant_id)
        return await self._store.purge_tenant(tenant_id)


__all__ = ["LocalTenantPurge"]
