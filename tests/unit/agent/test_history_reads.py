"""A turn's first attempt reads its history eventually consistent (half the price on DynamoDB) and
falls back to a strongly consistent read whenever that read may have missed a message it needs
(agent/context.py: seqs have no gaps, so a whole read is checkable)."""

from __future__ import annotations

from typing import Any

import pytest

from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.agent.context import load_context
from agentvm.messages import UserMessage


class LaggingStore:
    """A store whose eventually consistent reads miss the ``lag`` newest messages (or ``hole``)."""

    def __init__(self, inner: SqliteStore, *, lag: int = 0, hole: int | None = None) -> None:
        self.inner = inner
        self.lag = lag
        self.hole = hole
        self.reads: list[bool] = []  # fresh, per read

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def recent_messages_after(self, session_id: str, after: int, limit: int, *, fresh: bool = True):
        self.reads.append(fresh)
        if fresh:
            return await self.inner.recent_messages_after(session_id, after, limit)
        every = await self.inner.recent_messages_after(session_id, after, 10_000)
        seen = [e for e in every[: len(every) - self.lag] if e.seq != self.hole]
        return seen[-limit:]


@pytest.fixture
async def store(tmp_path):
    inner = SqliteStore(tmp_path / "s.db")
    for i in range(12):
        await inner.append_message("ses", UserMessage(id=f"m{i}", timestamp=i, content=f"message {i}"))
    return inner


async def test_a_read_holding_every_message_up_to_the_turns_own_is_enough(store):
    lagging = LaggingStore(store, lag=2)  # misses seqs 11 and 12: later than the turn's message (10)
    context = await load_context(lagging, "ses", 5, summarised=False, through_seq=10)
    assert lagging.reads == [False]
    assert [e.seq for e in context.entries] == [6, 7, 8, 9, 10]


async def test_a_read_missing_the_turns_own_message_is_made_again_strongly_consistent(store):
    lagging = LaggingStore(store, lag=3)  # misses 10, 11 and 12
    context = await load_context(lagging, "ses", 5, summarised=False, through_seq=10)
    assert lagging.reads == [False, True]
    assert [e.seq for e in context.entries] == [8, 9, 10, 11, 12]


async def test_a_read_with_a_gap_before_the_turns_message_is_made_again(store):
    lagging = LaggingStore(store, hole=9)
    context = await load_context(lagging, "ses", 5, summarised=False, through_seq=10)
    assert lagging.reads == [False, True]
    assert 9 in [e.seq for e in context.entries]


async def test_without_a_seq_to_hold_the_read_is_strongly_consistent(store):
    lagging = LaggingStore(store, lag=0)
    await load_context(lagging, "ses", 5, summarised=False)
    assert lagging.reads == [True]
