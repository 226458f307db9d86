"""Sandbox ports: a persistent workspace per container, jobs run in it under limits, and where jobs go.

The value types say what a job may use (``SandboxLimits``), how it ended (``SandboxRun``) and what a
workspace holds (``WorkspaceEntry``, ``WorkspaceQuota``, ``WorkspaceScan``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.records import SandboxJob


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one sandbox job may use. Past a limit the job is stopped and the result says which."""

    wall_s: float = 30.0  # seconds of real time
    cpu_s: int = 20  # seconds of CPU time
    memory_mb: int = 512  # the job's memory (its cgroup), or each process's address space (rlimit)
    output_bytes: int = 64 * 1024  # stdout and stderr together; the rest is cut
    file_mb: int = 64  # the largest file a job may write (and the size of its private /tmp)
    processes: int = 128  # processes alive at once in the job (where it has a cgroup)


@dataclass(frozen=True, slots=True)
class SandboxRun:
    """How a sandbox job ended: its exit code (None when it was stopped), its output (stdout and
    stderr interleaved, cut at the limit), and which limit stopped it, if one did."""

    exit_code: int | None
    output: str
    truncated: bool = False
    # "wall_time" | "cpu_time" | "memory" | "processes" | "output" | "file_size" | "workspace" | "shutdown"
    stopped_by: str | None = None


@dataclass(frozen=True, slots=True)
class WorkspaceEntry:
    path: str  # relative to the workspace root
    kind: str  # "file" | "dir" | "link" | "other" (a FIFO, socket or device)
    size: int


@dataclass(frozen=True, slots=True)
class WorkspaceQuota:
    """What one container's workspace may hold, whatever its jobs and tools do."""

    max_bytes: int = 256 * 1024 * 1024  # the regular files' sizes, added up
    max_entries: int = 20_000  # files, directories, links and others


@dataclass(frozen=True, slots=True)
class WorkspaceScan:
    """What a workspace holds: every regular file (``{path: (size, mtime_ns)}``), the bytes of
    those files, and its entries of every kind (files, directories, links, others). ``complete``
    is False when a bound (entries, depth, time) cut the walk: the counts are then at least."""

    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    bytes: int = 0
    entries: int = 0
    complete: bool = True


class Sandbox(Protocol):
    """A persistent workspace per (tenant, container), and jobs run in it under limits.

    Paths are relative to the workspace root (or under ``/workspace``). ``..``, another absolute
    path, a symlink at any component, and anything but a regular file or a directory raise
    ``ValueError``, whose message names the given path and never a host path. A job sees its own
    workspace only. A workspace past its quota (bytes, entries) refuses writes.
    """

    @property
    def isolated(self) -> bool:
        """Whether jobs run isolated (no other files, no network) or as plain processes."""
        ...

    async def run(
        self,
        tenant_id: str,
        container_id: str,
        argv: Sequence[str],
        *,
        stdin: str | None,
        limits: SandboxLimits,
    ) -> SandboxRun: ...
    async def read(self, tenant_id: str, container_id: str, path: str, *, max_bytes: int) -> bytes: ...
    async def write(self, tenant_id: str, container_id: str, path: str, data: bytes) -> None: ...
    async def list(self, tenant_id: str, container_id: str, path: str) -> list[WorkspaceEntry]: ...
    async def scan(self, tenant_id: str, container_id: str) -> WorkspaceScan:
        """What the workspace holds (its files, bytes and entries), walked within the sandbox's
        bounds (``complete`` says whether one cut the walk)."""
        ...


class SandboxJobs(Protocol):
    """Where sandbox jobs go when this host does not run them in the turn (AWS: their own queue
    and worker). Idempotent by ``(turnId, waitId)``."""

    async def submit(self, job: SandboxJob) -> None: ...


__all__ = [
    "Sandbox",
    "SandboxJobs",
    "SandboxLimits",
    "SandboxRun",
    "WorkspaceEntry",
    "WorkspaceQuota",
    "WorkspaceScan",
]
