"""The local databases' write-ahead logs are copied back by a thread, not by commits on the loop."""

import shutil
import sqlite3

from agentvm.adapters.local.sqlite import checkpoint as sqlite_checkpoint
from agentvm.adapters.local.sqlite.checkpoint import checkpoint_in_background, checkpoint_now
from agentvm.adapters.local.sqlite.store import connect
from agentvm.config import Settings
from agentvm.hosts.local import local_runtime

ROW = "x" * 3000  # about a page a row


def _write_rows(conn: sqlite3.Connection, n: int) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
    for k in range(n):
        conn.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (k, ROW))  # one commit each


def _wal_bytes(path) -> int:
    return path.with_name(path.name + "-wal").stat().st_size


def test_commits_to_a_registered_file_never_checkpoint_by_themselves(tmp_path):
    path = tmp_path / "busy.db"
    checkpoint_in_background(path)
    conn = connect(path)
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    _write_rows(conn, 1500)  # past SQLite's own 1,000-page threshold
    assert _wal_bytes(path) > 1500 * 4096  # nobody copied it back on the way


def test_an_unregistered_file_keeps_sqlites_own_checkpoints(tmp_path):
    conn = connect(tmp_path / "plain.db")
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)


def test_the_thread_copies_a_long_log_into_the_database_file(tmp_path):
    path = tmp_path / "busy.db"
    checkpoint_in_background(path)
    conn = connect(path)
    _write_rows(conn, 400)  # a log over WAL_BYTES
    checkpoint_now()  # what the thread does every INTERVAL_S
    # The database file alone, without its log, now holds every row.
    copy = tmp_path / "copy.db"
    shutil.copy(path, copy)
    assert sqlite3.connect(copy).execute("SELECT count(*) FROM t").fetchone() == (400,)
    # and the next commit starts the log again from its beginning: the log holds its pages alone
    conn.execute("INSERT INTO t VALUES (10000, 'y')")
    _busy, frames_in_log, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert frames_in_log < 10


def test_a_short_log_and_a_deleted_file_are_left_alone(tmp_path):
    path = tmp_path / "quiet.db"
    checkpoint_in_background(path, tmp_path / "never-made.db")
    conn = connect(path)
    _write_rows(conn, 3)
    before = _wal_bytes(path)
    checkpoint_now()
    assert _wal_bytes(path) == before  # under WAL_BYTES: not worth a pass
    assert not (tmp_path / "never-made.db").exists()  # the thread never creates a file


def test_the_local_host_registers_its_databases_and_the_thread_runs(tmp_path):
    local_runtime(Settings(data_dir=tmp_path, open=True))
    assert sqlite_checkpoint.in_background(tmp_path / "agentvm.db")
    assert sqlite_checkpoint.in_background(tmp_path / "queue.db")
    assert sqlite_checkpoint._thread is not None and sqlite_checkpoint._thread.is_alive()


async def test_the_commit_benchmark_times_every_write_of_both_modes():
    from benchmarks import sqlite_commits

    rows = await sqlite_commits.run(20)
    assert [row["mode"] for row in rows] == ["SQLite's checkpoints, in the commit", "checkpoint thread"]
    for row in rows:
        assert row["writes"] == 20 * 6  # six writes a turn, each timed
        assert 0 < row["write_ms_p50"] <= row["write_ms_p99"] <= row["write_ms_max"]
