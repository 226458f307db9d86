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

Paths given to ``read``/``write``/``list`` are resolved on the host, symlinks included, and must
stay inside the workspace. No job runs between two tool calls (each job's processes die with
it), so a link a job made cannot be swapped between the check and the use.
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
import stat
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from agentvm.ports import SandboxRun, WorkspaceEntry

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.ports import SandboxLimits

WORKDIR = "/workspace"  # where a job sees its workspace (isolated), and the paths tools accept
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
_MAX_LISTED = 1000
_MAX_SNAPSHOT = 5000  # files compared before and after a job; past this, no file_changed events


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
    def __init__(self, root: Path, *, isolate: bool = True) -> None:
        self.root = root
        self._bwrap = bubblewrap() if isolate else None

    @property
    def isolated(self) -> bool:
        return self._bwrap is not None

    # the workspace

    def workspace(self, tenant_id: str, container_id: str) -> Path:
        """The container's workspace directory (created on first use). Named by a hash of the
        ids: client-chosen names never become path components."""
        path = self.root / workspace_digest(tenant_id, container_id)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path.resolve()

    def _resolve(self, tenant_id: str, container_id: str, path: str) -> tuple[Path, Path]:
        root = self.workspace(tenant_id, container_id)
        rel = path.strip()
        if rel == WORKDIR or rel.startswith(WORKDIR + "/"):
            rel = rel[len(WORKDIR) :].lstrip("/")
        if rel.startswith("/") or "\0" in rel:
            raise ValueError(f"{path!r}: use a path inside the workspace ({WORKDIR}/... or relative)")
        target = (root / rel).resolve()
        if target != root and root not in target.parents:
            raise ValueError(f"{path!r} is outside the workspace")
        return root, target

    async def read(self, tenant_id: str, container_id: str, path: str, *, max_bytes: int) -> bytes:
        _, target = self._resolve(tenant_id, container_id, path)
        if not target.is_file():
            raise ValueError(f"{path!r} is not a file in the workspace")
        with target.open("rb") as f:
            return f.read(max_bytes)

    async def write(self, tenant_id: str, container_id: str, path: str, data: bytes) -> None:
        root, target = self._resolve(tenant_id, container_id, path)
        if target == root or target.is_dir():
            raise ValueError(f"{path!r} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: the last component was resolved above, and must not have become a link.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    async def list(self, tenant_id: str, container_id: str, path: str) -> list[WorkspaceEntry]:
        root, target = self._resolve(tenant_id, container_id, path or ".")
        if not target.is_dir():
            raise ValueError(f"{path!r} is not a directory in the workspace")
        out = []
        for entry in sorted(target.iterdir())[:_MAX_LISTED]:
            kind = "link" if entry.is_symlink() else "dir" if entry.is_dir() else "file"
            size = entry.lstat().st_size if kind == "file" else 0
            out.append(WorkspaceEntry(str(entry.relative_to(root)), kind, size))
        return out

    async def snapshot(self, tenant_id: str, container_id: str) -> dict[str, tuple[int, int]] | None:
        root = self.workspace(tenant_id, container_id)
        out: dict[str, tuple[int, int]] = {}
        for dirpath, _dirs, files in os.walk(root, followlinks=False):
            for name in files:
                path = Path(dirpath) / name
                with contextlib.suppress(OSError):
                    st = path.lstat()
                    if stat.S_ISREG(st.st_mode):
                        out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
                if len(out) > _MAX_SNAPSHOT:
                    return None
        return out

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


__all__ = ["WORKDIR", "LocalSandbox", "bubblewrap", "workspace_digest"]
