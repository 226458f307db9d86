"""Paced model reads (agent/pacing.py): when a read waits, and what a read that lands late does."""

from __future__ import annotations

import asyncio

from agentvm.agent.pacing import LEAD_S, pace_reads_by, read_pause


class Sink:
    """Stands for the turn's sink: when its buffered text is due, and a record of early sends."""

    def __init__(self) -> None:
        self.due: float | None = None
        self.flushed = 0

    def next_send(self) -> float | None:
        return self.due

    def flush(self) -> None:
        self.flushed += 1
        self.due = None


async def test_without_a_pacer_or_buffered_text_a_read_does_not_wait():
    loop = asyncio.get_running_loop()
    started = loop.time()
    await read_pause()  # no pacer in this context (AWS, compaction)
    sink = Sink()
    pace_reads_by(sink.next_send, sink.flush)
    await read_pause()  # nothing buffered
    assert loop.time() - started < 0.02


async def test_a_read_waits_until_just_before_the_buffered_text_is_due():
    loop = asyncio.get_running_loop()
    sink = Sink()
    pace_reads_by(sink.next_send, sink.flush)
    sink.due = loop.time() + 0.1
    await read_pause()
    assert sink.due - LEAD_S - 0.005 <= loop.time() < sink.due  # woke just before
    assert sink.flushed == 0


async def test_text_read_after_the_end_of_its_window_is_sent_at_once():
    loop = asyncio.get_running_loop()
    sink = Sink()
    pace_reads_by(sink.next_send, sink.flush)
    sink.due = loop.time() + 0.03
    await read_pause()  # waits for the window...
    await asyncio.sleep(0.05)  # ...but the read's data arrives after it ended (a busy loop)
    sink.due = loop.time() + 0.25  # its text started a new window
    await read_pause()
    assert sink.flushed == 1  # sent now, not a window later
