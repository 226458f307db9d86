"""The data dir of a real ``avm serve`` is its user's only: the directory and every directory in it
0700, every file 0600 (SQLite's -wal and -shm included), on a fresh install and on one an older
version left readable by others, which the start tightens and says so (hosts/data_dir.py)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import httpx

from tests.integration.avm_process import avm_serve, free_port


def modes(data_dir: Path, *, skip: Path | None = None) -> dict[str, str]:
    """``ls -l`` of the tree: each path (relative) and its permission bits, links left out."""
    out = {".": f"{stat.S_IMODE(data_dir.stat().st_mode):04o}"}
    for top, dirs, files in os.walk(data_dir):
        if skip is not None and Path(top) == skip:
            dirs.clear()
            files = []
        for name in (*dirs, *files):
            path = Path(top) / name
            info = path.lstat()
            if not stat.S_ISLNK(info.st_mode):
                out[str(path.relative_to(data_dir))] = f"{stat.S_IMODE(info.st_mode):04o}"
    return out


def test_a_fresh_data_dir_is_private_to_the_servers_user(tmp_path):
    data = tmp_path / "fresh" / "state"  # not there yet: the server makes it
    with avm_serve(data, free_port()) as server:
        token = server.admin_token()
        # writes to agentvm.db (a key, a config value), queue.db and logs.db while it runs
        r = httpx.post(
            f"{server.http}/v1/auth/keys",
            headers={"Authorization": f"Bearer {token}"},
            json={"scopes": ["client"]},
        )
        assert r.status_code in (200, 201), r.text
        running = modes(data)
    after = modes(data)
    for seen in (running, after):
        assert {"agentvm.db", "queue.db", "logs.db", "auth_secret", "workspaces"} <= set(seen)
        assert any(name.endswith("-wal") for name in running)  # SQLite's own files are checked too
        for name, mode in seen.items():
            is_dir = (data / name).is_dir()
            assert mode == ("0700" if is_dir else "0600"), (name, mode, seen)
    assert "made it private" not in server.output()  # nothing to tighten on a fresh install


def test_a_loose_data_dir_is_tightened_at_start_and_the_change_logged(tmp_path):
    data = tmp_path / "state"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    with sqlite3.connect(data / "agentvm.db") as db:  # as an older version left it
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
    (data / "auth_secret").write_text("an-old-auth-secret-0123456789abcdefghijklmnop")
    job_file = data / "workspaces" / "abc123" / "result.txt"  # a job's file: not the server's to change
    job_file.parent.mkdir(parents=True)
    job_file.write_text("42")
    for path, mode in [
        (data / "agentvm.db", 0o644),
        (data / "auth_secret", 0o644),
        (data / "workspaces", 0o755),
        (job_file.parent, 0o755),
        (job_file, 0o644),
    ]:
        path.chmod(mode)

    with avm_serve(data, free_port()) as server:
        seen = modes(data, skip=data / "workspaces")
        log = server.output()
    for name, mode in seen.items():
        assert mode == ("0700" if (data / name).is_dir() else "0600"), (name, mode)
    # one line that says what changed
    [line] = [ln for ln in log.splitlines() if "made it private" in ln]
    for change in ("agentvm.db 0644 -> 0600", "auth_secret 0644 -> 0600", "workspaces 0755 -> 0700"):
        assert change in line
    assert ". 0755 -> 0700" in line
    # inside the workspaces: the job's files as the job left them
    assert f"{stat.S_IMODE(job_file.stat().st_mode):04o}" == "0644"
    assert f"{stat.S_IMODE(job_file.parent.stat().st_mode):04o}" == "0755"
