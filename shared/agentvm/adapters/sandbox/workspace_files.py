"""A workspace's files, opened beneath its root and never through a link: the one implementation
behind the model's file tools (``read``, ``write``, ``edit``, ``ls``), the HTTP workspace routes,
the change scan around each job, and the AWS worker's S3 sync.

Why it exists: these run on the host as the server's user while a job in the same workspace may
change it at any moment (the calls of one model message run concurrently, and a job can leave a
process behind). Checking a path and then opening it by name loses that race: a directory swapped
for a symlink between the two sends the open anywhere on the host (other tenants' files, the
server's secret). So a path is never opened by name from the host's root. It is resolved from a
file descriptor of the workspace root, and no component may be a symlink:

- ``openat2(2)`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where the
  kernel has it (Linux 5.6+): the kernel resolves the whole path in one call and refuses any link
  or escape. Python has no wrapper for it (``os.open`` has none, and no maintained package wraps
  this one system call), so it is called through ctypes: one call, one struct of three u64.
- else a walk: each directory opened relative to the previous one's descriptor with
  ``O_DIRECTORY | O_NOFOLLOW``, the last component with ``O_NOFOLLOW``. Creating a file's parent
  directories always walks this way (``mkdirat`` one component at a time).

``..`` is folded in by name before either (no component may be a link, so that is what the kernel
would do), and one that climbs out is refused, as are absolute paths outside ``/workspace`` and
NUL bytes.

Only regular files and directories are used. A file is opened with ``O_NONBLOCK`` (a FIFO's open
returns at once instead of waiting for a writer, or fails without a reader) and checked with
``fstat`` before a byte moves; FIFOs, sockets and devices are refused. So is a regular file with
other hard links: the tools cannot tell where its other names are.

Nothing here runs on the event loop: ``run_io`` hands each operation to a small thread pool of its
own, so a slow disk or a huge directory delays workspace calls, never ``/health`` or another
tenant's stream. Walks are bounded by entries, depth and time, and say when a bound cut them.

Errors are ``WorkspaceError`` (a ``ValueError``) naming the caller's path, never a host path.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, BinaryIO, ParamSpec, TypeVar

from agentvm.ports import WorkspaceEntry, WorkspaceScan

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

WORKDIR = "/workspace"  # where a job sees its workspace, and the absolute paths tools accept

_P = ParamSpec("_P")
_T = TypeVar("_T")


class WorkspaceError(ValueError):
    """A workspace path that cannot be used, said with the caller's path only."""


# -- paths -------------------------------------------------------------------------------------


def relative_parts(path: str) -> tuple[str, ...]:
    """The components of ``path`` below the workspace root (``()`` for the root itself).

    Accepts a relative path or one under ``/workspace``; refuses other absolute paths, NUL bytes
    and a ``..`` that climbs out of the workspace. ``..`` inside is folded in by name (``a/../b``
    is ``b``), which is what the kernel would do, as no component may be a link."""
    rel = path.strip()
    if rel == WORKDIR or rel.startswith(WORKDIR + "/"):
        rel = rel[len(WORKDIR) :]
    elif rel.startswith("/"):
        raise WorkspaceError(f"{path!r}: use a path inside the workspace ({WORKDIR}/... or relative)")
    if "\0" in rel:
        raise WorkspaceError(f"{path!r}: a path inside the workspace cannot hold a NUL byte")
    parts: list[str] = []
    for part in rel.split("/"):
        if part == "..":
            if not parts:
                raise WorkspaceError(f"{path!r} is outside the workspace")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return tuple(parts)


def _message(path: str, err: int) -> str:
    known = {
        errno.ENOENT: "does not exist in the workspace",
        errno.ELOOP: "goes through a symbolic link, which workspace tools never follow",
        errno.EXDEV: "is outside the workspace",
        errno.ENOTDIR: "has a part that is not a directory",
        errno.EISDIR: "is a directory",
        errno.ENXIO: "is not a regular file",
        errno.EACCES: "cannot be accessed",
        errno.EPERM: "cannot be accessed",
        errno.ENOSPC: "cannot be written: no space is left",
        errno.EDQUOT: "cannot be written: no space is left",
        errno.EFBIG: "cannot be written: the file is too large",
        errno.ENAMETOOLONG: "has a name that is too long",
        errno.EEXIST: "already exists and is not a directory",
    }
    return f"{path!r} {known.get(err) or os.strerror(err).lower()}"


@contextlib.contextmanager
def _explained(path: str) -> Iterator[None]:
    """OSErrors become ``WorkspaceError``: the caller's path and the reason, no host path."""
    try:
        yield
    except OSError as exc:
        raise WorkspaceError(_message(path, exc.errno or errno.EIO)) from None


# -- opening beneath the root ------------------------------------------------------------------

_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added after the tables merged)
_RESOLVE = 0x02 | 0x04 | 0x08  # RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.cache
def _syscall() -> Callable[..., int] | None:
    """libc's ``syscall`` if ``openat2`` works here (not on old kernels, nor under a seccomp
    filter that refuses it), else None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.syscall
    except (OSError, AttributeError):
        return None
    call.restype = ctypes.c_long
    how = _OpenHow(_DIR, 0, _RESOLVE)
    fd = call(_SYS_OPENAT2, ctypes.c_int(-100), b"/", ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:  # AT_FDCWD with "/" under BENEATH is EXDEV where it works; ENOSYS/EPERM where not
        return call if ctypes.get_errno() == errno.EXDEV else None
    os.close(fd)
    return call


use_openat2 = True  # False: always walk (tests run both)


def _open_beneath(root_fd: int, parts: tuple[str, ...], flags: int, mode: int = 0) -> int:
    """A descriptor of ``parts`` beneath ``root_fd``, no component a link. Raises OSError."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    name = "/".join(parts) or "."
    call = _syscall() if use_openat2 else None
    if call is not None:
        how = _OpenHow(flags, mode, _RESOLVE)
        for _ in range(8):  # EAGAIN: a rename raced the resolution; EINTR: a signal
            size = ctypes.c_size_t(ctypes.sizeof(how))
            fd = call(_SYS_OPENAT2, ctypes.c_int(root_fd), name.encode(), ctypes.byref(how), size)
            if fd >= 0:
                return int(fd)
            err = ctypes.get_errno()
            if err not in (errno.EAGAIN, errno.EINTR):
                raise OSError(err, os.strerror(err))
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
    parent = _walk(root_fd, parts[:-1], create=False)
    try:
        return os.open(parts[-1] if parts else ".", flags, mode, dir_fd=parent)
    finally:
        os.close(parent)


def _walk(root_fd: int, parts: tuple[str, ...], *, create: bool) -> int:
    """A new descriptor of the directory ``parts`` beneath ``root_fd``, following no link;
    ``create`` makes missing directories on the way."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            step = _open_dir(part, fd)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_dir(name: str, dir_fd: int) -> int:
    """``name`` in ``dir_fd`` as a directory, not through a link (a link is ELOOP, as openat2
    says it, not the ENOTDIR that ``O_DIRECTORY | O_NOFOLLOW`` gives)."""
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except NotADirectoryError:
        if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
        raise


@contextlib.contextmanager
def _root(root: Path) -> Iterator[int]:
    fd = os.open(root, _DIR)
    try:
        yield fd
    finally:
        os.close(fd)


def _checked_file(fd: int, path: str) -> os.stat_result:
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise WorkspaceError(f"{path!r} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise WorkspaceError(f"{path!r} is not a regular file (a FIFO, socket or device): refused")
    if st.st_nlink > 1:
        raise WorkspaceError(f"{path!r} has other hard links: workspace tools refuse it")
    return st


# -- the operations (blocking: call them through ``run_io``) -----------------------------------


def read_file(root: Path, path: str, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` of the regular file ``path``."""
    parts = relative_parts(path)
    with _explained(path), _root(root) as root_fd:
        fd = _open_beneath(root_fd, parts, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            _checked_file(fd, path)
            chunks, left = [], max_bytes
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


@contextlib.contextmanager
def open_file(root: Path, path: str) -> Iterator[BinaryIO]:
    """The regular file ``path`` open for reading (the S3 push streams it)."""
    parts = relative_parts(path)
    with _explained(path), _root(root) as root_fd:
        fd = _open_beneath(root_fd, parts, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            _checked_file(fd, path)
        except BaseException:
            os.close(fd)
            raise
    with os.fdopen(fd, "rb") as f:
        yield f


@contextlib.contextmanager
def create_file(root: Path, path: str) -> Iterator[BinaryIO]:
    """``path`` open for writing from its start, emptied (created with its parent directories
    when missing). Refused when it exists as anything but a lone regular file."""
    parts = relative_parts(path)
    if not parts:
        raise WorkspaceError(f"{path!r} is a directory")
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC
    with _explained(path), _root(root) as root_fd:
        parent = _walk(root_fd, parts[:-1], create=True)
        try:
            fd = os.open(parts[-1], flags, 0o644, dir_fd=parent)
        finally:
            os.close(parent)
        try:
            _checked_file(fd, path)
            os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
    with _explained(path), os.fdopen(fd, "wb") as f:
        yield f


def write_file(root: Path, path: str, data: bytes) -> None:
    with create_file(root, path) as f:
        f.write(data)


MAX_LISTED = 1000  # entries a listing returns
_MAX_LIST_READ = 20_000  # names a listing reads from one directory before it stops


def list_dir(root: Path, path: str) -> list[WorkspaceEntry]:
    """The entries of directory ``path`` (sorted by name, at most ``MAX_LISTED``); a link is
    shown as a link, never followed."""
    parts = relative_parts(path)
    with _explained(path), _root(root) as root_fd:
        fd = _open_beneath(root_fd, parts, os.O_RDONLY | os.O_DIRECTORY)
        try:
            found: list[tuple[str, os.stat_result]] = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):  # removed while listed
                        found.append((entry.name, entry.stat(follow_symlinks=False)))
                    if len(found) >= _MAX_LIST_READ:
                        break
        finally:
            os.close(fd)
    prefix = "/".join(parts) + "/" if parts else ""
    out = []
    for name, st in sorted(found, key=lambda item: item[0])[:MAX_LISTED]:
        kind = _kind(st.st_mode)
        out.append(WorkspaceEntry(prefix + name, kind, st.st_size if kind == "file" else 0))
    return out


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


MAX_DEPTH = 64  # directories deeper than this are not walked (the scan says it was cut)
# A workspace store's push (S3 on AWS, PostgreSQL on a cluster) walks this many entries at most:
# past the workspace quota's entries, so it sees every file the quota allows.
PUSH_MAX_ENTRIES = 200_000
STORED_MAX_BYTES = 256 * 1024 * 1024  # a stored workspace pulled at most (the default quota's bytes)


class WorkspaceTooLarge(Exception):
    """A stored workspace past the bytes a pull may bring down: refused before anything is written."""


def scan(
    root: Path, *, max_entries: int, max_depth: int = MAX_DEPTH, max_seconds: float = 5.0
) -> WorkspaceScan:
    """Walk the workspace without following links, within the bounds. Depth first, holding one
    descriptor per level (each directory opened from its parent's, ``O_NOFOLLOW``), never one per
    directory found: a directory of 100,000 subdirectories costs no more descriptors than one."""
    deadline = time.monotonic() + max_seconds
    files: dict[str, tuple[int, int]] = {}
    total = entries = 0
    with _explained("."), _root(root) as root_fd:
        # Each level: its descriptor, its path prefix, and the subdirectories still to walk.
        levels: list[tuple[int, str, list[str]]] = []
        fd, prefix = os.dup(root_fd), ""
        try:
            while True:
                subdirs: list[str] = []
                with os.scandir(fd) as listing:
                    for entry in listing:
                        entries += 1
                        if entries > max_entries or time.monotonic() > deadline:
                            return WorkspaceScan(files, total, entries, complete=False)
                        with contextlib.suppress(OSError):  # removed while walked
                            st = entry.stat(follow_symlinks=False)
                            if stat.S_ISREG(st.st_mode):
                                files[prefix + entry.name] = (st.st_size, st.st_mtime_ns)
                                total += st.st_size
                            elif stat.S_ISDIR(st.st_mode):
                                subdirs.append(entry.name)
                if subdirs and len(levels) >= max_depth:
                    return WorkspaceScan(files, total, entries, complete=False)
                levels.append((fd, prefix, subdirs))
                fd = -1
                while levels and fd < 0:  # the next subdirectory to walk, climbing when a level is done
                    parent, parent_prefix, pending = levels[-1]
                    if not pending:
                        os.close(parent)
                        levels.pop()
                        continue
                    name = pending.pop()
                    with contextlib.suppress(OSError):  # removed, or swapped for a link, meanwhile
                        fd, prefix = os.open(name, _DIR, dir_fd=parent), f"{parent_prefix}{name}/"
                if fd < 0:
                    return WorkspaceScan(files, total, entries)
        finally:
            if fd >= 0:
                os.close(fd)
            for level_fd, _, _ in levels:
                os.close(level_fd)


# -- off the event loop ------------------------------------------------------------------------

_IO = ThreadPoolExecutor(max_workers=4, thread_name_prefix="avm-workspace-io")


async def run_io(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """``fn(*args, **kwargs)`` on the workspace I/O threads (never the event loop's thread)."""
    return await asyncio.get_running_loop().run_in_executor(_IO, functools.partial(fn, *args, **kwargs))


__all__ = [
    "MAX_LISTED",
    "PUSH_MAX_ENTRIES",
    "STORED_MAX_BYTES",
    "WORKDIR",
    "WorkspaceError",
    "WorkspaceTooLarge",
    "create_file",
    "list_dir",
    "open_file",
    "read_file",
    "relative_parts",
    "run_io",
    "scan",
    "write_file",
]
