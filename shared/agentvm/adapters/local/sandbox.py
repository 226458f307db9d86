"""The ``Sandbox`` port on this machine: a workspace directory per (tenant, container) under the
data dir, and jobs run in it as subprocesses, isolated with bubblewrap when it works here.

Isolation (``bwrap``, Debian's ``bubblewrap``; ``./dev`` installs it): a job runs in new user,
PID, network, IPC, UTS and cgroup namespaces, sees ``/usr`` (and the ``/bin``, ``/lib`` links to
it) read-only, a private ``/tmp``, ``/proc`` and ``/dev``, and its own workspace at ``/workspace``
(its working directory), nothing else of the host: no other workspace, no data dir, no network.
It dies with the server. Without bubblewrap, jobs are plain subprocesses in the workspace (the
same limits, none of the isolation); ``isolated`` says which, and ``avm serve`` says it at start.

Limits on every job, isolated or not (``SandboxLimits``): wall time (the job is killed), CPU time
(``RLIMIT_CPU``), address space (``RLIMIT_AS``), the largest file it may write
(``RLIMIT_FSIZE``), and its output (read up to the cap, then the job is killed). Fork bombs are
bounded by the wall time and the PID namespace only: no cgroups here (documented in SECURITY.md).

Files (``read``/``write``/``list``, the change scan, the HTTP workspace routes) go through
``adapters/sandbox/workspace_files.py``: opened beneath the workspace's root descriptor, never
through a link, regular files only, on threads of their own. A job may run at the same time (the
calls of one model message run concurrently) and swap anything in its workspace: that can make a
tool call fail, never reach outside. Writes stop at the workspace quota (``WorkspaceQuota``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import resource
import shutil
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from agentvm.adapters.sandbox import workspace_files as files
from agentvm.adapters.sandbox.workspace_files import WORKDIR, WorkspaceError, run_io
from agentvm.ports import SandboxRun, WorkspaceEntry, WorkspaceQuota, WorkspaceScan

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.ports import SandboxLimits

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}


def workspace_digest(tenant_id: str, container_id: str) -> str:
    """The name of a container's workspace (a directory here, an S3 prefix on AWS): a hash of the
    ids, so client-chosen names never become path components and tenants never share one."""
    return hashlib.sha256(f"{tenant_id}\0{container_id}".encode()).hexdigest()[:40]


@functools.cache
def bubblewrap() -> str | None:
    """The ``bwrap`` binary if it can create a sandbox on this machine (it needs user namespaces)."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = subprocess.run(
        [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return path if probe.returncode == 0 else None


class LocalSandbox:
    def __init__(self, root: Path, *, isolate: bool = True, quota: WorkspaceQuota | None = None) -> None:
        self.root = root
        self.quota = quota or WorkspaceQuota()
        self._bwrap = bubblewrap() if isolate else None

    @property
    def isolated(self) -> bool:
        return self._bwrap is not None

    # the workspace: every file operation beneath its root, off the event loop (workspace_files)

    def workspace(self, tenant_id: str, container_id: str) -> Path:
        """The container's workspace directory (created on first use). Named by a hash of the
        ids: client-chosen names never become path components."""
        path = self.root.absolute() / workspace_digest(tenant_id, container_id)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    async def _root(self, tenant_id: str, container_id: str) -> Path:
        return await run_io(self.workspace, tenant_id, container_id)

    async def read(self, tenant_id: str, container_id: str, path: str, *, max_bytes: int) -> bytes:
        return await run_io(files.read_file, await self._root(tenant_id, container_id), path, max_bytes)

    async def write(self, tenant_id: str, container_id: str, path: str, data: bytes) -> None:
        root = await self._root(tenant_id, container_id)
        await run_io(self._write_within_quota, root, path, data)

    def _write_within_quota(self, root: Path, path: str, data: bytes) -> None:
        held = files.scan(root, max_entries=self.quota.max_entries)
        problem = quota_problem(self.quota, held, adding=len(data))
        if problem is not None:
            raise WorkspaceError(f"{path!r} cannot be written: {problem}")
        files.write_file(root, path, data)

    async def list(self, tenant_id: str, container_id: str, path: str) -> list[WorkspaceEntry]:
        return await run_io(files.list_dir, await self._root(tenant_id, container_id), path or ".")

    async def scan(self, tenant_id: str, container_id: str) -> WorkspaceScan:
        root = await self._root(tenant_id, container_id)
        return await run_io(files.scan, root, max_entries=self.quota.max_entries)

    # jobs

    async def run(
        self,
        tenant_id: str,
        container_id: str,
        argv: Sequence[str],
        *,
        stdin: str | None,
        limits: SandboxLimits,
    ) -> SandboxRun:
        workspace = self.workspace(tenant_id, container_id)
        command = self._command(workspace, argv)
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=workspace,
            env=_ENV,
            start_new_session=True,  # its own process group: one kill stops it and its children
            preexec_fn=functools.partial(_apply_limits, limits),
        )
        if stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin.encode())
                await proc.stdin.drain()
            proc.stdin.close()
        assert proc.stdout is not None
        output = bytearray()
        stopped_by: str | None = None
        try:
            async with asyncio.timeout(limits.wall_s):
                while chunk := await proc.stdout.read(65536):
                    output += chunk
                    if len(output) > limits.output_bytes:
                        stopped_by = "output"
                        break
        except TimeoutError:
            stopped_by = "wall_time"
        if stopped_by is not None:
            _kill(proc)
            # Read what is left to the end: the pipe's EOF is what lets ``wait`` return (asyncio
            # waits for the pipes as well as the process), and a paused reader never sees it.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    while await proc.stdout.read(65536):
                        pass
        code = await proc.wait()
        if stopped_by is None:
            # Killed by a signal: a negative code from a plain process, 128 + the signal through
            # bubblewrap or a shell (the convention, so a job exiting 152 on its own reads alike).
            signum = -code if code < 0 else code - 128 if code > 128 else 0
            stopped_by = _LIMIT_SIGNALS.get(signum)
        text = bytes(output[: limits.output_bytes]).decode("utf-8", "replace")
        if stopped_by is None and code != 0 and _out_of_memory(text):
            stopped_by = "memory"
        return SandboxRun(
            exit_code=None if stopped_by in ("wall_time", "output") else code,
            output=text,
            truncated=len(output) > limits.output_bytes,
            stopped_by=stopped_by,
        )

    def _command(self, workspace: Path, argv: Sequence[str]) -> list[str]:
        if self._bwrap is None:
            return list(argv)
        cmd = [self._bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
        cmd += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):  # merged-/usr links, or real dirs
            path = Path(top)
            if path.is_symlink():
                cmd += ["--symlink", str(path.readlink()), top]
            elif path.is_dir():
                cmd += ["--ro-bind", top, top]
        cmd += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        cmd += ["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]
        cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        cmd += ["--bind", str(workspace), WORKDIR, "--chdir", WORKDIR, "--", *argv]
        return cmd


_LIMIT_SIGNALS = {
    signal.SIGXCPU: "cpu_time",
    signal.SIGKILL: "cpu_time",  # the hard CPU limit, one second past the soft one
    signal.SIGXFSZ: "file_size",
}


def _apply_limits(limits: SandboxLimits) -> None:
    """In the child, before it runs the job (inherited by bubblewrap and everything it starts)."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    memory = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = limits.file_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _out_of_memory(text: str) -> bool:
    return "MemoryError" in text or "Cannot allocate memory" in text or "out of memory" in text


def quota_problem(quota: WorkspaceQuota, held: WorkspaceScan, *, adding: int = 0) -> str | None:
    """Why the workspace cannot take ``adding`` more bytes, or None when it can."""
    if held.entries > quota.max_entries or not held.complete:
        most = quota.max_entries
        return f"the workspace holds more than {most} files and directories (its quota); delete some"
    if held.bytes + adding > quota.max_bytes:
        mb = quota.max_bytes / (1024 * 1024)
        total = held.bytes + adding
        return f"the workspace would hold {total} bytes, past its quota of {mb:g} MB; delete files"
    return None


__all__ = ["WORKDIR", "LocalSandbox", "bubblewrap", "quota_problem", "workspace_digest"]
