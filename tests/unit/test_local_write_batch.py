"""The local host's write batches (``Runtime.write_batch``): the gateway's writes for a message and
a turn's reply with its quota bytes are one SQLite transaction on agentvm.db's shared connection,
all of them or none."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from agentvm.config import Settings
from agentvm.hosts.local import local_runtime, local_security
from agentvm.messages import UserMessage
from agentvm.ports import RunningTurn
from agentvm.records import TurnRecord
from agentvm.runtime import SystemClock

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.runtime import Runtime


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    settings = Settings(_env_file=None, data_dir=tmp_path, open=True)
    runtime = local_runtime(settings).runtime
    local_security(settings, SystemClock()).attach(runtime)
    return runtime


async def _send(rt: Runtime, fail_after_turn: bool = False) -> None:
    with rt.write_batch():
        await rt.store.append_message("ses_1", UserMessage(id="msg_1", timestamp=1, content="hi"))
        assert rt.storage_quota is not None and rt.running is not None
        await rt.storage_quota.add("local", 100)
        await rt.store.put_turn(TurnRecord(turnId="turn_1", sessionId="ses_1", status="queued", updatedAt=1))
        if fail_after_turn:
            raise RuntimeError("the disk went away")
        await rt.running.mark(RunningTurn("local", "c", "img_1", "ses_1", "turn_1", 1, None))


def _other_connection(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp_path / "agentvm.db")


async def test_the_adapters_in_a_batch_write_through_the_stores_one_connection(rt: Runtime):
    conn = rt.store.connection  # type: ignore[attr-defined]
    assert rt.running._conn is conn  # type: ignore[union-attr]
    assert rt.storage_quota._counters._conn is conn  # type: ignore[union-attr]


async def test_a_batch_commits_its_writes_together(rt: Runtime, tmp_path: Path):
    await _send(rt)
    other = _other_connection(tmp_path)
    assert other.execute("SELECT COUNT(*) FROM messages").fetchone() == (1,)
    assert other.execute("SELECT COUNT(*) FROM turns").fetchone() == (1,)
    assert other.execute("SELECT COUNT(*) FROM running_turns").fetchone() == (1,)
    assert other.execute("SELECT value FROM counters WHERE key = 'storage#local'").fetchone() == (100,)
    assert not rt.store.connection.in_transaction  # type: ignore[attr-defined]


async def test_a_batch_that_fails_midway_leaves_nothing_written(rt: Runtime, tmp_path: Path):
    with pytest.raises(RuntimeError):
        await _send(rt, fail_after_turn=True)
    assert await rt.store.list_messages("ses_1") == []
    assert await rt.store.get_turn("turn_1") is None
    assert rt.storage_quota is not None and await rt.storage_quota.used("local") == 0
    other = _other_connection(tmp_path)
    assert other.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)
    # and the connection is usable again: the next batch commits
    await _send(rt)
    assert [m.id for m in await rt.store.list_messages("ses_1")] == ["msg_1"]
