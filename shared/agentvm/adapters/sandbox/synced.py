"""The synced sandbox: a sandbox job run on its container's workspace synced from and to S3 (the
sandbox worker on AWS, ``functions/sandbox_worker``).

Per job (``SyncedSandbox.checkout``): a fresh directory under /tmp (or ``scratch``) and a sandbox
on it (``LocalSandbox``: limits on wall time, CPU, memory, file size and output; an environment
of four variables, no credentials); ``pull`` brings the workspace down from S3 into it, ``push``
sends it back (``adapters/sandbox/s3_workspaces.py``). When the job is done the directory is deleted
and, in Lambda, every process a job left behind is killed first (``kill_leftovers``), so nothing
of one tenant's job lives on into the next invocation of the execution environment
(docs/deploy.md, "Sandbox isolation on AWS"); ``not_dumpable`` keeps a job away from the worker's
own memory and environment.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from agentvm.adapters.sandbox.process import LocalSandbox
from agentvm.adapters.sandbox.s3_workspaces import S3Workspaces
from agentvm.records import workspace_digest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from agentvm.ports import Sandbox, WorkspaceQuota


class SyncedWorkspace:
    """One job's checkout: its ``sandbox``, on a local copy of the workspace at ``path``."""

    def __init__(
        self, workspaces: S3Workspaces, tenant_id: str, container_id: str, root: Path, sandbox: Sandbox
    ):
        self.sandbox = sandbox
        self.path = root / workspace_digest(tenant_id, container_id)
        self._workspaces = workspaces
        self._ids = (tenant_id, container_id)
        self._before: dict[str, str] = {}

    async def pull(self) -> None:
        """Download the workspace (``WorkspaceTooLarge`` past the quota, before any download)."""
        self._before = await self._workspaces.pull(*self._ids, self.path)

    async def push(self) -> None:
        """Upload what the job changed since the pull, delete what it removed."""
        await self._workspaces.push(*self._ids, self.path, self._before)


class SyncedSandbox:
    """Checkouts of containers' workspaces from ``workspaces`` (default: ``S3Workspaces`` on
    ``bucket``, refusing workspaces past ``quota``), each run by ``factory(root)`` (default:
    ``LocalSandbox`` with ``quota``) in a fresh directory under ``scratch`` (default: the temp dir)."""

    def __init__(
        self,
        quota: WorkspaceQuota,
        bucket: str | None = None,
        *,
        workspaces: S3Workspaces | None = None,
        factory: Callable[[Path], Sandbox] | None = None,
        scratch: Path | None = None,
    ) -> None:
        if factory is None:
            factory = functools.partial(LocalSandbox, quota=quota)
        if workspaces is None:
            assert bucket is not None
            workspaces = S3Workspaces(bucket, max_bytes=quota.max_bytes)
        self._sandbox_factory = factory
        self._workspaces = workspaces
        self._scratch = scratch

    @contextlib.asynccontextmanager
    async def checkout(self, tenant_id: str, container_id: str) -> AsyncIterator[SyncedWorkspace]:
        """A fresh directory and a sandbox on it, for one job; afterwards (whatever happened) the
        job's leftover processes are killed and the directory is deleted. Nothing is pulled yet."""
        root = Path(tempfile.mkdtemp(prefix="avm-sandbox-", dir=self._scratch))
        try:
            sandbox = self._sandbox_factory(root)
            yield SyncedWorkspace(self._workspaces, tenant_id, container_id, root, sandbox)
        finally:
            kill_leftovers()  # first: a leftover could otherwise keep writing while it is removed
            shutil.rmtree(root, ignore_errors=True)


def kill_leftovers() -> None:
    """In Lambda, kill every process of this user but this one and its ancestors: a job that
    detached a child (``setsid``, a double fork) must not outlive its invocation. Outside Lambda
    (tests, a developer's machine) this does nothing: the same user runs everything else there."""
    if not os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        return
    keep = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in keep:
        keep.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    uid = os.getuid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in keep or int(entry.name) == 1:
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == uid:
                os.kill(int(entry.name), signal.SIGKILL)


def not_dumpable() -> None:
    """In Lambda: make this process non-dumpable, so a job (same user) cannot read its memory or
    ``/proc/<pid>/environ``, where the function's credentials are."""
    if not os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4


__all__ = ["SyncedSandbox", "SyncedWorkspace", "kill_leftovers", "not_dumpable"]
