"""The sandbox tools an image gets by declaring ``{"type": "sandbox"}``: ``sh``, ``python``,
``read``, ``write``, ``edit`` and ``ls``, on the container's persistent workspace.

The workspace belongs to the image's container (the end user): files written in one turn are
there in the next, and no other container or tenant sees them. Jobs (``sh``, ``python``) run under
the declaration's limits (``SandboxLimits``); a job stopped at a limit is an error result that
says which limit, so the model can try something smaller.

Each mutating call (everything but ``ls`` and ``read``) is charged to the tenant's storage account
(``security/storage_quota.py``): the workspace's bytes after the call minus before (the scans the
``file_changed`` events are made from, so no extra I/O on the workspace), a negative delta given
back. A tenant already at its account is refused the call (an error result naming the quota), so
one call can pass the account by what it writes, bounded by the container's workspace quota. A
call that raises or is cancelled (an interrupted turn) is not charged: what it wrote before it
stopped stays uncounted (the workspace quota still bounds it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.errors import StorageQuotaExceeded
from agentvm.llm import ToolSpec
from agentvm.ports import FileChange, SandboxLimits, ToolOutput

if TYPE_CHECKING:
    from agentvm.agent.tools.declarations import SandboxToolDecl
    from agentvm.ports import Sandbox, SandboxRun, StorageAccount

MAX_READ_BYTES = 256 * 1024
MAX_EDIT_BYTES = 4 * 1024 * 1024
_STOPPED = {
    "wall_time": "it ran longer than its wall-time limit of {wall_s:g} s",
    "cpu_time": "it used more than its CPU-time limit of {cpu_s} s",
    "memory": "it ran out of memory (limit {memory_mb} MB)",
    "processes": "it tried to run more than {processes} processes at once",
    "shutdown": "the server shut down while it ran",
    "output": "it printed more than {output_bytes} bytes",
    "file_size": "it wrote a file larger than {file_mb} MB",
    "workspace": "it filled the workspace past its quota (size, files or depth); delete files first",
}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_PATH = {"type": "string", "description": "a path in the workspace, relative or under /workspace"}
SPECS = {
    "sh": ToolSpec(
        "sh",
        "Run a shell command (/bin/sh -c) in your workspace, /workspace, which keeps its files between "
        "turns. No network. Returns the combined stdout and stderr, and the exit code.",
        _object({"command": {"type": "string", "minLength": 1}}, ["command"]),
    ),
    "python": ToolSpec(
        "python",
        "Run Python 3 code in your workspace (/workspace, the working directory). No network. "
        "Returns what it prints and the exit code.",
        _object({"code": {"type": "string", "minLength": 1}}, ["code"]),
    ),
    "read": ToolSpec(
        "read",
        f"Read a text file of the workspace (at most {MAX_READ_BYTES // 1024} KB).",
        _object({"path": _PATH}, ["path"]),
    ),
    "write": ToolSpec(
        "write",
        "Write a text file in the workspace (parent directories are created; an existing file is replaced).",
        _object({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
    ),
    "edit": ToolSpec(
        "edit",
        "Replace one exact occurrence of `old` with `new` in a workspace file.",
        _object(
            {"path": _PATH, "old": {"type": "string", "minLength": 1}, "new": {"type": "string"}},
            ["path", "old", "new"],
        ),
    ),
    "ls": ToolSpec(
        "ls",
        "List a directory of the workspace (default: its root).",
        _object({"path": _PATH}, []),
    ),
}


@dataclass(frozen=True)
class SandboxTool:
    """One sandbox tool, bound to one container's workspace."""

    spec: ToolSpec
    sandbox: Sandbox
    tenant_id: str
    container_id: str
    limits: SandboxLimits
    storage: StorageAccount | None = None  # the tenant's storage account (None: not counted)

    @property
    def timeout_s(self) -> float:
        return self.limits.wall_s + 10  # the job's own wall-time limit answers first, and says so

    @property
    def idempotent(self) -> bool:
        return self.spec.name in ("read", "write", "ls")

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        """The tool's output, with the workspace files it changed (``ls`` and ``read`` change none)."""
        if self.spec.name in ("ls", "read"):
            return await self._call(arguments)
        ids = (self.tenant_id, self.container_id)
        if self.storage is not None:
            try:
                await self.storage.refuse_if_full(self.tenant_id)
            except StorageQuotaExceeded as exc:
                return ToolOutput(f"Error: {exc.message}", is_error=True)
        before = await self.sandbox.scan(*ids)
        output = await self._call(arguments)  # a job stopped at a limit returns: charged below
        after = await self.sandbox.scan(*ids)
        if before.complete and after.complete and self.storage is not None:
            await self.storage.charge(self.tenant_id, after.bytes - before.bytes)
        if not (before.complete and after.complete):  # too many files to compare: no events
            return output
        return dataclasses.replace(output, files=changes(before.files, after.files))

    async def _call(self, arguments: dict[str, Any]) -> ToolOutput:
        name, ids = self.spec.name, (self.tenant_id, self.container_id)
        if name == "sh":
            return self._job(await self._run(["/bin/sh", "-c", arguments["command"]], None))
        if name == "python":
            return self._job(await self._run(["python3", "-"], arguments["code"]))
        if name == "read":
            data = await self.sandbox.read(*ids, arguments["path"], max_bytes=MAX_READ_BYTES + 1)
            text = data[:MAX_READ_BYTES].decode("utf-8", "replace")
            if len(data) > MAX_READ_BYTES:
                text += f"\n[file longer than {MAX_READ_BYTES} bytes: cut]"
            return ToolOutput(text)
        if name == "write":
            data = arguments["content"].encode()
            await self.sandbox.write(*ids, arguments["path"], data)
            return ToolOutput(f"wrote {len(data)} bytes to {arguments['path']}")
        if name == "edit":
            return await self._edit(arguments["path"], arguments["old"], arguments["new"])
        entries = await self.sandbox.list(*ids, arguments.get("path") or ".")
        lines = [f"{e.path}/" if e.kind == "dir" else f"{e.path}  ({e.size} bytes)" for e in entries]
        return ToolOutput("\n".join(lines) or "(empty)")

    async def _run(self, argv: list[str], stdin: str | None) -> SandboxRun:
        return await self.sandbox.run(
            self.tenant_id, self.container_id, argv, stdin=stdin, limits=self.limits
        )

    def _job(self, run: SandboxRun) -> ToolOutput:
        text = run.output
        if run.truncated:
            text += f"\n[output cut at {self.limits.output_bytes} bytes]"
        if run.stopped_by is not None:
            why = _STOPPED[run.stopped_by].format(
                wall_s=self.limits.wall_s,
                cpu_s=self.limits.cpu_s,
                memory_mb=self.limits.memory_mb,
                output_bytes=self.limits.output_bytes,
                file_mb=self.limits.file_mb,
                processes=self.limits.processes,
            )
            return ToolOutput(f"{text}\n[stopped: {why}]", is_error=True)
        return ToolOutput(f"{text}\n[exit code {run.exit_code}]", is_error=run.exit_code != 0)

    async def _edit(self, path: str, old: str, new: str) -> ToolOutput:
        ids = (self.tenant_id, self.container_id)
        data = await self.sandbox.read(*ids, path, max_bytes=MAX_EDIT_BYTES + 1)
        if len(data) > MAX_EDIT_BYTES:  # editing the part read would cut the file
            limit = MAX_EDIT_BYTES // (1024 * 1024)
            return ToolOutput(f"Error: {path} is too large to edit (over {limit} MB); use sh", is_error=True)
        text = data.decode("utf-8")
        count = text.count(old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            return ToolOutput(f"Error: `old` {where} in {path}; it must occur exactly once", is_error=True)
        await self.sandbox.write(*ids, path, text.replace(old, new, 1).encode())
        return ToolOutput(f"edited {path}")


MAX_CHANGES = 100  # file_changed events per tool call; the rest are left out


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[FileChange, ...]:
    """What changed between two snapshots, sorted by path (at most ``MAX_CHANGES``)."""
    out = [
        FileChange(path, "created" if path not in before else "modified", after[path][0])
        for path in after
        if before.get(path) != after[path]
    ]
    out += [FileChange(path, "deleted") for path in before if path not in after]
    return tuple(sorted(out, key=lambda c: c.path)[:MAX_CHANGES])


@dataclass(frozen=True)
class RemoteSandboxTool:
    """A sandbox tool whose jobs run elsewhere (AWS: the sandbox worker): never called in the
    turn; the turn suspends on the job (``agent.waits``, kind ``sandbox``)."""

    spec: ToolSpec
    limits: SandboxLimits
    runs_remotely = True
    idempotent = False

    @property
    def timeout_s(self) -> float:
        """How long the turn waits for the job: its wall time, plus the queue and the sync."""
        return self.limits.wall_s + 120

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        raise RuntimeError("this sandbox tool runs on the sandbox worker, not in the turn")


def limits_of(decl: SandboxToolDecl) -> SandboxLimits:
    return SandboxLimits(
        wall_s=decl.wallS,
        cpu_s=decl.cpuS,
        memory_mb=decl.memoryMb,
        output_bytes=decl.outputBytes,
        processes=decl.processes,
    )


def sandbox_tools(
    decl: SandboxToolDecl,
    sandbox: Sandbox,
    tenant_id: str,
    container_id: str,
    storage: StorageAccount | None = None,
) -> list[SandboxTool]:
    limits = limits_of(decl)
    return [SandboxTool(spec, sandbox, tenant_id, container_id, limits, storage) for spec in SPECS.values()]


def remote_sandbox_tools(decl: SandboxToolDecl) -> list[RemoteSandboxTool]:
    return [RemoteSandboxTool(spec, limits_of(decl)) for spec in SPECS.values()]


__all__ = [
    "MAX_READ_BYTES",
    "SPECS",
    "RemoteSandboxTool",
    "SandboxTool",
    "limits_of",
    "remote_sandbox_tools",
    "sandbox_tools",
]
