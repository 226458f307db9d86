"""Limits for a sandbox job as a whole: each job in its own cgroup, where this machine lets us make
one, so its memory, process count and CPU time are counted over every process it starts, and one
write kills all of them.

Rlimits (``RLIMIT_AS``, ``RLIMIT_CPU``) bound each process on its own: a job that starts eight
processes gets eight times its memory, and nothing bounds how many it starts. A cgroup bounds the
job: ``memory`` (its pages, its private ``/tmp`` included; past the limit the kernel's OOM killer
runs inside the job), ``pids`` (a fork past the limit fails), and CPU time read from its usage
counter (``cpu.stat`` / ``cpuacct.usage``), which the sandbox polls. Two layouts:

* cgroup v2 (a user's machine with a delegated subtree, a systemd service with ``Delegate=yes``):
  the server's own cgroup must offer ``memory`` and ``pids``; jobs are its children. v2 forbids
  processes in a cgroup whose controllers are handed down, so the server moves itself into a leaf
  ``avm-server`` first (what systemd's delegation documentation prescribes); if other processes
  share its cgroup, v2 is not used. CPU time is ``cpu.stat``'s ``usage_usec``, which every v2
  cgroup has. Killing is one write to ``cgroup.kill`` (Linux 5.14+; else as v1).
* cgroup v1 (root, each controller its own hierarchy): a directory per job under the server's
  cgroup in each of ``memory``, ``pids`` and ``cpuacct``; killing is SIGKILL to every pid in
  ``cgroup.procs`` until it is empty.

Anywhere else (no cgroup we may write, AWS Lambda) ``detect`` finds none and the sandbox keeps
per-process rlimits; ``describe`` is the line ``avm serve`` logs so the operator knows which.

The job's first process joins its cgroup itself, before it execs anything (``enter``, called in
the child between fork and exec): nothing it runs exists outside the cgroup even for an instant.
Writing the child's pid from the parent after the spawn would leave a window in which the job
could fork children that stay outside; ``CLONE_INTO_CGROUP`` would close it too, but Python's
``subprocess`` does not offer it and it is v2 only.

There is no well-kept Python library for cgroups (``cgroupspy`` is v1 only and unmaintained), and
what is needed is a few reads and writes of the kernel's files: they are written here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentvm.ports import SandboxLimits

_V1_CONTROLLERS = ("memory", "pids", "cpuacct")
_V2_NEEDED = ("memory", "pids")
_SERVER_LEAF = "avm-server"
_JOB_PREFIX = "avm-job-"
_REMOVE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class JobCgroups:
    """Where this machine lets each job have its own cgroup: ``version`` 2, 1, or 0 for none, and
    for each controller the directory new job cgroups go in."""

    version: int
    parents: dict[str, Path]  # controller -> parent directory ("memory", "pids", "cpu")

    @property
    def controllers(self) -> frozenset[str]:
        return frozenset(self.parents)

    def describe(self) -> str:
        """Which limits hold for a job as a whole, and how; for the start-up log."""
        if not self.parents:
            return (
                "sandbox limits per process (rlimits: address space, CPU time, file size; no writable "
                "cgroup): no bound on a job's process count or on its total memory and CPU"
            )
        per_job = [name for name in ("memory", "pids", "cpu") if name in self.parents]
        per_process = ["file size"] + (["address space"] if "memory" not in self.parents else [])
        return (
            f"sandbox limits per job (cgroup v{self.version}): {', '.join(per_job)}; "
            f"per process (rlimits): {', '.join(per_process)}, CPU time"
        )

    def create(self, limits: SandboxLimits) -> JobCgroup | None:
        """A new cgroup for one job, with its limits written; None where there are none."""
        if not self.parents:
            return None
        name = f"{_JOB_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"  # the owner's pid: see _reap_orphans
        dirs: dict[str, Path] = {}
        cgroup = JobCgroup(self.version, dirs)
        try:
            for controller, parent in self.parents.items():
                path = parent / name
                if path not in dirs.values():
                    path.mkdir()
                dirs[controller] = path
            cgroup.write_limits(limits)
        except OSError:
            cgroup.remove_now()
            raise
        return cgroup


@dataclass
class JobCgroup:
    """One job's cgroup (one directory per v1 hierarchy, one in v2)."""

    version: int
    dirs: dict[str, Path]

    @functools.cached_property
    def _procs_files(self) -> tuple[bytes, ...]:
        return tuple(os.fsencode(path / "cgroup.procs") for path in dict.fromkeys(self.dirs.values()))

    def write_limits(self, limits: SandboxLimits) -> None:
        memory = str(limits.memory_mb * 1024 * 1024)
        if self.version == 2:
            path = self.dirs["memory"]
            _write(path / "memory.max", memory)
            _write(path / "memory.swap.max", "0", missing_ok=True)
            _write(self.dirs["pids"] / "pids.max", str(limits.processes))
            return
        if "memory" in self.dirs:
            _write(self.dirs["memory"] / "memory.limit_in_bytes", memory)
            _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", memory, missing_ok=True)
        if "pids" in self.dirs:
            _write(self.dirs["pids"] / "pids.max", str(limits.processes))

    def enter(self) -> None:
        """Move the calling process into this cgroup ("0" is the writer itself). Called in the
        child between fork and exec: only ``os`` calls, on paths encoded beforehand."""
        for procs in self._procs_files:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def prepare_enter(self) -> None:
        """Encode the paths ``enter`` writes in the parent, so the child allocates nothing new."""
        _ = self._procs_files

    def exceeded(self, limits: SandboxLimits) -> str | None:
        """Which limit the job hit as a whole, if one: "memory" (the OOM killer ran in it),
        "processes" (a fork failed at its limit) or "cpu_time"; as ``SandboxRun.stopped_by``."""
        events = "memory.events" if self.version == 2 else "memory.oom_control"
        if self._counter("memory", events, "oom_kill"):
            return "memory"
        if self._counter("pids", "pids.events", "max"):
            return "processes"
        cpu = self.cpu_seconds()
        if cpu is not None and cpu > limits.cpu_s:
            return "cpu_time"
        return None

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process of the job so far, alive or gone."""
        with contextlib.suppress(OSError, ValueError):
            if self.version == 2:
                return self._counter("memory", "cpu.stat", "usage_usec") / 1e6
            if "cpu" in self.dirs:
                return int((self.dirs["cpu"] / "cpuacct.usage").read_text()) / 1e9
        return None

    def pids(self) -> set[int]:
        out: set[int] = set()
        for path in dict.fromkeys(self.dirs.values()):
            with contextlib.suppress(OSError, ValueError):
                out.update(int(line) for line in (path / "cgroup.procs").read_text().split())
        return out

    def kill(self) -> None:
        """SIGKILL every process in the job (one pass; ``remove`` repeats until none is left)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(self.dirs["memory"] / "cgroup.kill", "1")
                return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    async def remove(self) -> None:
        """Kill what is left of the job, wait until the cgroup is empty, and delete it."""
        deadline = asyncio.get_running_loop().time() + _REMOVE_TIMEOUT_S
        while self.pids() and asyncio.get_running_loop().time() < deadline:
            self.kill()
            await asyncio.sleep(0.01)
        self.remove_now()

    def remove_now(self) -> None:
        for path in dict.fromkeys(self.dirs.values()):
            with contextlib.suppress(OSError):  # gone already, or still busy: nothing more to do
                path.rmdir()

    def _counter(self, controller: str, file: str, key: str) -> int:
        path = self.dirs.get(controller)
        if path is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for line in (path / file).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        return 0


@functools.cache
def detect() -> JobCgroups:
    """The cgroups this process may create job cgroups in: v2 with memory and pids if it can, else
    v1 (each of memory, pids, cpuacct that is writable), else none."""
    mounts = _cgroup_mounts()
    own = _own_cgroups()
    found = _detect_v2(mounts, own)
    if found is None:
        parents: dict[str, Path] = {}
        for controller in _V1_CONTROLLERS:
            parent = cgroup_dir(mounts, own, controller)
            if parent is not None and _can_make_children(parent):
                parents["cpu" if controller == "cpuacct" else controller] = parent
        found = JobCgroups(1 if parents else 0, parents)
    _reap_orphans(found)
    return found


def _reap_orphans(cgroups: JobCgroups) -> None:
    """Kill and remove the job cgroups of servers that are gone (killed, so they could not): what
    their jobs left running (without bubblewrap, a crashed server's job loses only its first
    process) dies at the next start. Each job cgroup is named after its server's pid."""
    for parent in dict.fromkeys(cgroups.parents.values()):
        for path in parent.glob(f"{_JOB_PREFIX}*"):
            owner = path.name[len(_JOB_PREFIX) :].split("-", 1)[0]
            if not owner.isdigit() or _alive(int(owner)):
                continue
            orphan = JobCgroup(cgroups.version, {"memory": path})
            for _ in range(100):  # until empty: what was forking meanwhile is in the next list
                if not orphan.pids():
                    break
                orphan.kill()
                time.sleep(0.01)  # once, at start-up
            orphan.remove_now()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _detect_v2(mounts: dict[str, tuple[Path, str]], own: dict[str, str]) -> JobCgroups | None:
    parent = cgroup_dir(mounts, own, "")
    if parent is None:
        return None
    try:
        offered = (parent / "cgroup.controllers").read_text().split()
        if not all(name in offered for name in _V2_NEEDED):
            return None
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        if not all(name in enabled for name in _V2_NEEDED):
            _hand_down(parent, list(_V2_NEEDED))
        if not _can_make_children(parent):
            return None
    except OSError:
        return None
    return JobCgroups(2, {"memory": parent, "pids": parent, "cpu": parent})


def _hand_down(parent: Path, controllers: list[str]) -> None:
    """Enable ``controllers`` for the children of ``parent``. v2 allows that only in a cgroup
    without processes: if this server is in it, it moves itself into a leaf first; if other
    processes share it (a terminal's scope), it fails and the caller falls back, rather than
    moving processes that are not ours."""
    request = " ".join(f"+{name}" for name in controllers)
    try:
        _write(parent / "cgroup.subtree_control", request)
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        leaf = parent / _SERVER_LEAF
        leaf.mkdir(exist_ok=True)
        _write(leaf / "cgroup.procs", str(os.getpid()))  # the whole process, every thread
        _write(parent / "cgroup.subtree_control", request)


def _cgroup_mounts() -> dict[str, tuple[Path, str]]:
    try:
        return parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return {}


def parse_mountinfo(text: str) -> dict[str, tuple[Path, str]]:
    """Controller ("" for the v2 hierarchy) -> (mount point, the mount's root in its hierarchy),
    from ``/proc/self/mountinfo``."""
    out: dict[str, tuple[Path, str]] = {}
    for line in text.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, rest = fields.split(), tail.split()
        if len(parts) < 5 or len(rest) < 3:
            continue
        root, mount_point, fstype = parts[3], Path(parts[4]), rest[0]
        if fstype == "cgroup2":
            out.setdefault("", (mount_point, root))
        elif fstype == "cgroup":
            for option in rest[2].split(","):
                out.setdefault(option, (mount_point, root))
    return out


def _own_cgroups() -> dict[str, str]:
    try:
        return parse_proc_cgroup(Path("/proc/self/cgroup").read_text())
    except OSError:
        return {}


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """Controller ("" for v2) -> a process's cgroup in that hierarchy, from ``/proc/<pid>/cgroup``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            out[controller] = path
    return out


def cgroup_dir(mounts: dict[str, tuple[Path, str]], own: dict[str, str], controller: str) -> Path | None:
    """Where this process's cgroup of ``controller`` is in the file system, if it is mounted
    (a container sees its hierarchy from its own cgroup down: the mount's root is not "/")."""
    if controller not in mounts or controller not in own:
        return None
    mount_point, root = mounts[controller]
    path = own[controller]
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None  # our cgroup is not inside what is mounted here
    relative = path[len(root) :] if root != "/" else path
    return mount_point / relative.lstrip("/")


def _can_make_children(parent: Path) -> bool:
    probe = parent / f"avm-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _write(path: Path, value: str, *, missing_ok: bool = False) -> None:
    try:
        path.write_text(value)
    except FileNotFoundError:
        if not missing_ok:
            raise


__all__ = ["JobCgroup", "JobCgroups", "cgroup_dir", "detect", "parse_mountinfo", "parse_proc_cgroup"]
