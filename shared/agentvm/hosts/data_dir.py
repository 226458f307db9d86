"""The local data dir is private to the server's user: the directory 0700, every file in it 0600.

It holds every tenant's messages and key hashes (``agentvm.db``), the turn queue, recent log lines,
the server secret (``auth_secret``, the HMAC key of every API key and the key the config centre's
secrets are sealed with) and the sandbox workspaces. Any other local user who can read it can read
all of that, so nothing in it is ever readable by group or others.

How, on a fresh data dir and on one an older version (or a careless ``cp``) left loose:

* ``avm serve`` and the CLI commands that act on the data dir set the process umask to 0o077
  (``private_umask``): whatever the process creates later (SQLite's ``-wal``/``-shm`` files, a
  worker's relay socket, a workspace) is private without anyone remembering to chmod it.
* ``prepare_data_dir`` does not rely on the umask alone (a program that embeds ``local_runtime``
  keeps its own): it creates the directory, the workspaces root and the SQLite files empty with
  their final modes before any connection opens them (SQLite gives a database's ``-wal`` and
  ``-shm`` the database's own mode), and tightens what an existing install left looser, saying so
  in one log line that names each path and its old and new mode. It never walks into a workspace:
  the files there belong to the jobs that wrote them (the workspaces root itself is 0700, which
  already keeps other users out of everything below it).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("agentvm.hosts.data_dir")

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600
DATABASES = ("agentvm.db", "queue.db", "logs.db")
WORKSPACES = "workspaces"


def private_umask() -> None:
    """Files and directories this process creates from now on are its user's only."""
    os.umask(PRIVATE_UMASK)


def prepare_data_dir(data_dir: Path) -> list[str]:
    """Create ``data_dir`` (0700) with its workspaces root and empty databases (0600), tighten
    anything already there that is looser, and return what was changed (also logged once)."""
    data_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    (data_dir / WORKSPACES).mkdir(mode=DIR_MODE, exist_ok=True)
    for name in DATABASES:
        # An empty file is a new, empty SQLite database; created here it gets its mode from us.
        os.close(os.open(data_dir / name, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    changed = tighten(data_dir)
    if changed:
        log.warning(
            "the data dir was readable by other users; made it private to this user",
            extra={"data_dir": str(data_dir), "changed": changed},
        )
    return changed


def tighten(data_dir: Path) -> list[str]:
    """Take group and other bits off ``data_dir`` and everything in it (not inside workspaces);
    ``["agentvm.db 0644 -> 0600", ...]`` for what had them. Symbolic links are neither followed
    nor changed."""
    changed: list[str] = []
    _restrict(data_dir, data_dir, changed)
    for top, dirs, files in os.walk(data_dir):
        here = Path(top)
        if here == data_dir and WORKSPACES in dirs:
            dirs.remove(WORKSPACES)  # the jobs' files; the root itself is restricted here
            _restrict(here / WORKSPACES, data_dir, changed)
        for name in (*dirs, *files):
            _restrict(here / name, data_dir, changed)
    return changed


def _restrict(path: Path, data_dir: Path, changed: list[str]) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:  # gone meanwhile (a SQLite -shm, a worker's socket)
        return
    if stat.S_ISLNK(info.st_mode):
        return
    mode = stat.S_IMODE(info.st_mode)
    wanted = mode & 0o700  # the owner's bits only (a file made here is 0600, a directory 0700)
    if wanted == mode:
        return
    path.chmod(wanted)
    shown = "." if path == data_dir else str(path.relative_to(data_dir))
    changed.append(f"{shown} {mode:04o} -> {wanted:04o}")


__all__ = [
    "DATABASES",
    "DIR_MODE",
    "FILE_MODE",
    "PRIVATE_UMASK",
    "prepare_data_dir",
    "private_umask",
    "tighten",
]
