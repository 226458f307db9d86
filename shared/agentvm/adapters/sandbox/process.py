"""The ``Sandbox`` port on this machine: a workspace directory per (tenant, container) under the
data dir, and jobs run in it as subprocesses, isolated with bubblewrap when it works here.

Isolation (``bwrap``, Debian's ``bubblewrap``; ``./dev`` installs it): a job runs in new user,
PID, network, IPC, UTS and cgroup namespaces (and may not make user namespaces of its own, where
bubblewrap can forbid it), sees ``/usr`` (and the ``/bin``, ``/lib`` links to it) read-only, a
private ``/tmp`` (a tmpfs of ``file_mb``), ``/proc`` and ``/dev``, and its own workspace at
``/workspace`` (its working directory), nothing else of the host: no other workspace, no data
dir, no network. Bubblewrap reads its arguments from a memfd (``--args``), so the command line a
job sees as pid 1's names no host path. Without bubblewrap, jobs are plain subprocesses in the
workspace (the same limits, none of the isolation); ``isolated`` says which, and ``avm serve``
says it at start.

A job dies with its reason to live: whichever way ``run`` ends (its result, an error, or its task
cancelled by an interrupt, a turn deadline, a toolbox timeout or the shutdown), its ``finally``
SIGKILLs the job's process group and everything in its cgroup, and reaps it off the event loop.
A job is over when its first process exits: what it left in the background is killed.
``close`` kills every live job (``avm serve``'s shutdown). If the server itself is killed, the
kernel kills the job's first process (``PR_SET_PDEATHSIG``); with bubblewrap that is the PID
namespace's parent, and the namespace and all in it die with it; and since bubblewrap arms its own
parent-death signal inside only after its set-up, the job's command runs under a gate (``_GATE``)
that kills the namespace once the server's end of a pipe closes. Without bubblewrap only that
first process dies: its children live on until the next start kills what is left in the job
cgroups of servers that are gone (``job_limits``). And where there is no cgroup, a process that
left the job's process group (``setsid``, a double fork) escapes every kill.

Limits (``SandboxLimits``): wall time and output (read up to the cap) for the job; memory,
process count and CPU time for the job as a whole where it gets its own cgroup
(``adapters/sandbox/job_limits.py``), else per process (``RLIMIT_AS``, ``RLIMIT_CPU``; no bound
on the process count); and, per process always, the largest file (``RLIMIT_FSIZE``), no core
dumps, and ``RLIMIT_CPU`` as a second bound. Past a limit the job is killed and ``stopped_by``
says which.

Files (``read``/``write``/``list``, the change scan, the HTTP workspace routes) go through
``adapters/sandbox/workspace_files.py``: opened beneath the workspace's root descriptor, never
through a link, regular files only, on threads of their own. A job may run at the same time (the
calls of one model message run concurrently) and swap anything in its workspace: that can make a
tool call fail, never reach outside. Writes stop at the workspace quota (``WorkspaceQuota``), and
a job that fills its workspace past it is stopped (``stopped_by="workspace"``; walked at most every
``_WORKSPACE_WATCH_S``, so a fast writer can pass it by what it writes in that time).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agentvm.adapters.sandbox import workspace_files as files
from agentvm.adapters.sandbox.job_limits import detect as detect_cgroups
from agentvm.adapters.sandbox.workspace_files import WORKDIR, WorkspaceError, run_io
from agentvm.ports import SandboxRun, WorkspaceEntry, WorkspaceQuota, WorkspaceScan
from agentvm.records import workspace_digest

if TYPE_CHECKING:
    import builtins
    from collections.abc import Sequence

    from agentvm.adapters.sandbox.job_limits import JobCgroup
    from agentvm.ports import SandboxLimits

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}


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
        # Forbid the job user namespaces of its own, where this bubblewrap can (probed once, here).
        self._disable_userns = self._bwrap is not None and _bwrap_disables_userns(self._bwrap)
        self._cgroups = detect_cgroups()
        self._jobs: set[_Job] = set()  # running, or being reaped: ``close`` kills them

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
        if any("\0" in arg for arg in argv):
            raise ValueError("a job's arguments cannot contain a NUL byte")
        workspace = await self._root(tenant_id, container_id)
        job = _Job(self._cgroups.create(limits))
        self._jobs.add(job)
        try:
            return await self._run(job, workspace, argv, stdin, limits)
        finally:
            # Every way out (a result, an error, the task cancelled by an interrupt, a deadline,
            # a timeout or the shutdown) kills the whole job; the reaping runs on even if this
            # task is cancelled again meanwhile (``close`` waits for it).
            job.kill()
            job.ending = asyncio.ensure_future(self._end(job))
            await asyncio.shield(job.ending)

    async def close(self) -> None:
        """Kill every job still running (the server is shutting down), and wait until each is reaped."""
        for job in list(self._jobs):
            job.stop("shutdown")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_REAP_TIMEOUT_S):
                while self._jobs:  # each job's run reaps it in its ``finally``, and leaves the set
                    await asyncio.sleep(0.01)

    async def _run(
        self, job: _Job, workspace: Path, argv: Sequence[str], stdin: str | None, limits: SandboxLimits
    ) -> SandboxRun:
        alive_fd = None
        if self._bwrap is not None:
            alive_fd, job.alive = os.pipe()  # the job holds the read end, only this server the other
        command, args_fd = self._command(workspace, argv, limits, alive_fd)
        if job.cgroup is not None:
            job.cgroup.prepare_enter()
        try:
            job.proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=workspace,
                env=_ENV,
                pass_fds=tuple(fd for fd in (args_fd, alive_fd) if fd is not None),
                start_new_session=True,  # its own process group: one kill stops it and its children
                preexec_fn=functools.partial(_prepare_child, limits, job.cgroup, os.getpid()),
            )
        except OSError as exc:  # without the file name: it would be a host path
            raise OSError(exc.errno, f"the job could not start: {exc.strerror}") from None
        finally:
            for fd in (args_fd, alive_fd):
                if fd is not None:
                    os.close(fd)
        proc = job.proc
        if job.stopped_by is not None:  # stopped (``close``) while it started: its group is known now
            job.kill()
        if stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin.encode())
                await proc.stdin.drain()
            proc.stdin.close()
        assert proc.stdout is not None
        output = bytearray()
        watch = asyncio.create_task(_watch(job, limits))
        guard = asyncio.create_task(self._watch_workspace(job, workspace))
        try:
            async with asyncio.timeout(limits.wall_s):
                while chunk := await proc.stdout.read(65536):
                    output += chunk
                    if len(output) > limits.output_bytes:
                        job.stop("output")
                        break
        except TimeoutError:
            job.stop("wall_time")
        finally:
            watch.cancel()
            guard.cancel()
        code = await _reap(proc)
        stopped_by = job.stopped_by
        if stopped_by is None and code != 0 and job.cgroup is not None:
            stopped_by = job.cgroup.exceeded(limits)  # in the last moments, before a poll saw it
        if stopped_by is None:
            # Killed by a signal: a negative code from a plain process, 128 + the signal through
            # bubblewrap or a shell (the convention, so a job exiting 152 on its own reads alike).
            signum = -code if code is not None and code < 0 else code - 128 if code and code > 128 else 0
            stopped_by = _LIMIT_SIGNALS.get(signum)
        text = bytes(output[: limits.output_bytes]).decode("utf-8", "replace")
        if stopped_by is None and code != 0 and _out_of_memory(text):
            stopped_by = "memory"
        return SandboxRun(
            exit_code=None if job.stopped_by is not None or code is None else code,
            output=text,
            truncated=len(output) > limits.output_bytes,
            stopped_by=stopped_by,
        )

    async def _watch_workspace(self, job: _Job, workspace: Path) -> None:
        """Stop the job once it fills its workspace past the quota (bytes, entries, or a tree too
        deep or slow to walk). A workspace already past it when the job started may stay there
        (the job may be deleting files) but not grow. Walked on the workspace threads, every
        ``_WORKSPACE_WATCH_S`` or four times as long as a walk takes, whichever is longer."""
        quota = self.quota
        start = await run_io(files.scan, workspace, max_entries=quota.max_entries * 2)
        most_bytes, most_entries = max(quota.max_bytes, start.bytes), max(quota.max_entries, start.entries)
        interval = _WORKSPACE_WATCH_S
        while True:
            await asyncio.sleep(interval)
            began = time.monotonic()
            held = await run_io(files.scan, workspace, max_entries=most_entries)
            interval = max(_WORKSPACE_WATCH_S, 4 * (time.monotonic() - began))
            if held.bytes > most_bytes or not held.complete:
                job.stop("workspace")
                return

    async def _end(self, job: _Job) -> None:
        job.close_alive()
        try:
            if job.proc is not None:
                await _reap(job.proc)
            if job.cgroup is not None:
                await job.cgroup.remove()
        finally:
            self._jobs.discard(job)

    def _command(
        self, workspace: Path, argv: Sequence[str], limits: SandboxLimits, alive_fd: int | None
    ) -> tuple[builtins.list[str], int | None]:  # `list` is a method of this class
        """What to execute, and the descriptor bubblewrap reads its arguments from: they hold the
        workspace's host path, and a command line is visible in ``/proc`` (inside, as pid 1's).
        With bubblewrap the job's command runs under ``_GATE``, watching ``alive_fd``."""
        if self._bwrap is None or alive_fd is None:
            return list(argv), None
        args = ["--unshare-all", "--die-with-parent", "--new-session"]
        if self._disable_userns:
            args += ["--unshare-user", "--disable-userns"]
        args += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):  # merged-/usr links, or real dirs
            path = Path(top)
            if path.is_symlink():
                args += ["--symlink", str(path.readlink()), top]
            elif path.is_dir():
                args += ["--ro-bind", top, top]
        args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        args += ["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]
        # /tmp is memory: sized like the largest file, and counted in the job's memory cgroup.
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(limits.file_mb * 1024 * 1024), "--tmpfs", "/tmp"]
        args += ["--bind", str(workspace), WORKDIR, "--chdir", WORKDIR]
        args_fd = _args_file(args)  # the command itself must follow on the command line
        return [
            self._bwrap,
            "--args",
            str(args_fd),
            "--",
            "/bin/bash",
            "-c",
            _GATE,
            "avm-job",
            str(alive_fd),
            *argv,
        ], args_fd


class _Job:
    """One running job: its first process (the leader of its process group) and its cgroup."""

    def __init__(self, cgroup: JobCgroup | None) -> None:
        self.cgroup = cgroup
        self.proc: asyncio.subprocess.Process | None = None
        self.stopped_by: str | None = None  # the limit it was stopped at, by the sandbox
        self.ending: asyncio.Future[None] | None = None
        self.alive: int | None = None  # with bubblewrap: closed, the job's gate kills the job (_GATE)

    def close_alive(self) -> None:
        if self.alive is not None:
            os.close(self.alive)
            self.alive = None

    def stop(self, reason: str) -> None:
        if self.stopped_by is None:
            self.stopped_by = reason
        self.kill()

    def kill(self) -> None:
        """SIGKILL the job's process group (with bubblewrap, its PID namespace goes with its init)
        and every process in its cgroup (what left the group: ``setsid``, a double fork)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()


async def _watch(job: _Job, limits: SandboxLimits) -> None:
    """While the job runs: stop it when its cgroup passes a limit, and kill what it left in the
    background once its first process has exited (the job is over; its output pipe would stay open)."""
    assert job.proc is not None
    while True:
        await asyncio.sleep(_WATCH_S)
        if job.proc.returncode is not None:
            job.kill()
            return
        exceeded = job.cgroup.exceeded(limits) if job.cgroup is not None else None
        if exceeded is not None:
            job.stop(exceeded)
            return


async def _reap(proc: asyncio.subprocess.Process) -> int | None:
    """The job's exit code, once it has exited and its pipe is closed (asyncio waits for both);
    what is left in the pipe is read and dropped, so a paused reader does not hold it open. None
    if that takes too long (a process that left the group holds the pipe, and there is no cgroup)."""
    assert proc.stdout is not None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_REAP_TIMEOUT_S):
            while await proc.stdout.read(65536):
                pass
            return await proc.wait()
    return proc.returncode


def _args_file(args: list[str]) -> int:
    """An anonymous in-memory file holding ``args`` NUL-separated, for ``bwrap --args``."""
    fd = os.memfd_create("bwrap-args", 0)  # no MFD_CLOEXEC: bubblewrap must inherit it
    os.write(fd, b"".join(os.fsencode(arg) + b"\0" for arg in args))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.cache
def _bwrap_disables_userns(bwrap: str) -> bool:
    """Whether this bubblewrap can forbid new user namespaces inside the sandbox (0.8+, where
    user namespaces can be made): a job then cannot build namespaces of its own to attack from."""
    probe = subprocess.run(
        [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "true"],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return probe.returncode == 0


# Inside bubblewrap, the job's command runs under this gate (``bash -c _GATE avm-job FD argv...``):
# a watcher reads the pipe whose other end only the server holds, and once it reads its end (the
# server is gone, or the job ended) kills every process in the job's PID namespace. bubblewrap's
# ``--die-with-parent`` alone leaves a window: its sandbox's first process arms its parent-death
# signal only after the set-up, and a server killed meanwhile left a job that ran to its end.
# bash, not sh: Debian's sh (dash) cannot name a descriptor past 9, and bash is always there.
_GATE = 'fd=$1; shift; { read -r _ <&"$fd"; kill -KILL -1; } </dev/null >/dev/null 2>&1 & exec {fd}<&-; "$@"'

_LIMIT_SIGNALS: dict[int, str] = {  # by number: an exit code gives one
    signal.SIGXCPU: "cpu_time",
    signal.SIGKILL: "cpu_time",  # the hard CPU limit, one second past the soft one
    signal.SIGXFSZ: "file_size",
}
_WATCH_S = 0.1  # how often a running job's cgroup counters are read
_WORKSPACE_WATCH_S = 0.25  # how often, at most, a running job's workspace is walked for its quota
_REAP_TIMEOUT_S = 5.0
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _prepare_child(limits: SandboxLimits, cgroup: JobCgroup | None, server_pid: int) -> None:
    """In the child, before it runs the job (inherited by bubblewrap and everything it starts):
    into the job's cgroup, killed if the server dies, and the per-process rlimits."""
    if cgroup is not None:
        cgroup.enter()
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != server_pid:  # the server died before the line above took effect
        os.kill(os.getpid(), signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    if cgroup is None or "memory" not in cgroup.dirs:
        # Without a memory cgroup, each process's address space is bounded instead. With one,
        # not: the cgroup bounds what the job really uses, and runtimes that reserve address
        # space they never touch (Go, Java, V8) run.
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = limits.file_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


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


__all__ = ["WORKDIR", "LocalSandbox", "bubblewrap", "quota_problem"]
