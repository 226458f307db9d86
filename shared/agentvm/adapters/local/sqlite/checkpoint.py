"""The local databases' write-ahead logs checkpointed by a thread, never by a commit on the event loop.

In WAL mode SQLite appends each commit to ``<file>-wal`` and copies the log back into the database
file ("checkpoint") when a commit finds the log over 1,000 pages (~4 MB). That commit, whichever
statement of whichever turn it is, then does the copy and its fsyncs before it returns: on the
local host every statement runs on the event loop (``sqlite.store``), so every few seconds at a
thousand streams (~10 commits a turn, ~70 turns a second) the loop stopped for the copy, and the
server's busiest second went to ~95 % of its core (``benchmarks/local_load.py``).

Here, connections to a file registered with ``checkpoint_in_background`` never checkpoint by
themselves (``wal_autocheckpoint=0``, set by ``sqlite.store.connect``), and one daemon thread per
process runs a ``PASSIVE`` checkpoint of each registered file whose log has grown past
``WAL_BYTES``, every ``INTERVAL_S``. A passive checkpoint neither waits for nor blocks readers and
writers; SQLite's C code runs without the GIL, so the loop goes on while it copies. After a
complete checkpoint the next writer starts the log again from its beginning, so the log stays
about one interval's writes long. With several ``avm serve --workers`` each process's thread
checkpoints the shared files; one of two concurrent checkpoints just finds the other busy.

The thread opens its own short connection per checkpoint (read-write, never creating a file): a
registered file that was deleted (a test's temporary directory) costs one ``stat`` a pass and is
never recreated. If the thread cannot checkpoint (a full disk), it logs and tries again
at the next interval; when the last connection to a file closes, SQLite checkpoints it anyway.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger("agentvm.sqlite")

INTERVAL_S = 1.0  # how often the thread looks at the logs
WAL_BYTES = 1024 * 1024  # a log this long is checkpointed (SQLite's own threshold is ~4 MB)

_files: set[Path] = set()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def _key(path: str | Path) -> Path:
    return Path(path).resolve()


def checkpoint_in_background(*paths: str | Path) -> None:
    """From now on, connections opened to ``paths`` leave checkpoints to this module's thread
    (started on first use). Call it before opening them: one opened earlier still checkpoints
    itself, which is only slower."""
    global _thread
    with _lock:
        _files.update(_key(p) for p in paths)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="agentvm-wal-checkpoint", daemon=True)
            _thread.start()


def in_background(path: str | Path) -> bool:
    """Whether connections to ``path`` leave their checkpoints to the thread."""
    return bool(_files) and str(path) != ":memory:" and _key(path) in _files


def checkpoint_now() -> None:
    """Run one pass of the thread's work in the caller (tests, shutdown)."""
    with _lock:
        files = sorted(_files)
    for path in files:
        _checkpoint(path)


def _run() -> None:
    while True:
        time.sleep(INTERVAL_S)
        checkpoint_now()


def _checkpoint(path: Path) -> None:
    try:
        if path.with_name(path.name + "-wal").stat().st_size < WAL_BYTES:
            return
        conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, timeout=0, isolation_level=None)
    except (OSError, sqlite3.Error):  # no log (yet, or any more), or no file: nothing to copy
        return
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error as exc:
        log.warning("could not checkpoint %s (%s): will try again", path.name, exc)
    finally:
        conn.close()


__all__ = ["INTERVAL_S", "WAL_BYTES", "checkpoint_in_background", "checkpoint_now", "in_background"]
