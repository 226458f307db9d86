"""Reading a model's stream at the pace its text is sent, not a token at a time.

After a turn's first text delta, the sink (``streaming/sink.py``) merges text into one frame per
flush window: a token read from the provider's socket right away waits in the sink's buffer until
the window ends anyway. On the local host (``TurnSettings.pace_reads``) the model adapters
therefore pause between network reads while text waits for its window, and read again just
before the window ends (``LEAD_S``): every event that arrived meanwhile comes in one read, and is
in the frame sent at the window's end. With the on-demand transport (``adapters/llm/transport.py``)
the socket is not even read in between, so the server wakes about twice per window per stream
(the token that starts the window's text, then the rest just before it ends) instead of once per
token (35 a second in the standard turn): at a thousand streams, most of its CPU per token.

A read that lands late (a busy event loop: streams started together have their windows in step,
and their reads and flushes all fall due at once, so a read's data may only arrive after the
window's timer has fired) would leave its text, some of it nearly a window old, to wait for a
whole new window. So text read after the end of the window it was meant for is sent at once
(``flush``): its lag is the read's lateness, not a window more.

What it costs: the end of the stream (the stop event, a tool call) is seen when the window ends,
not when it arrives: at most one flush window later, which is when the text before it was due.
The first delta, tool calls and every event that is not text are not delayed: nothing waits
while no text is buffered.

The turn says how long to wait through a context variable set in the task that consumes the
stream (``pace_reads_by``); adapters call ``read_pause()`` after handling each read's events;
without a pacer (AWS, compaction summaries, tests that do not ask for it) it returns at once.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

LEAD_S = 0.005  # read this long before the window ends, so the read's text makes that window


class _Pacer:
    __slots__ = ("flush", "next_send", "target")

    def __init__(self, next_send: Callable[[], float | None], flush: Callable[[], None]) -> None:
        self.next_send = next_send
        self.flush = flush
        self.target: float | None = None  # the window end the coming read is meant for


_pacer: ContextVar[_Pacer | None] = ContextVar("agentvm_read_pacer", default=None)


def pace_reads_by(next_send: Callable[[], float | None], flush: Callable[[], None]) -> None:
    """In the task that consumes a model stream: ``next_send()`` is the event loop time at which
    buffered text will be sent, or None when nothing waits; ``flush()`` sends it now."""
    _pacer.set(_Pacer(next_send, flush))


async def read_pause() -> None:
    """After a network read's events were handled: wait until just before buffered text is sent."""
    pacer = _pacer.get()
    if pacer is None:
        return
    loop = asyncio.get_running_loop()
    if pacer.target is not None and loop.time() >= pacer.target:
        pacer.flush()  # the read just handled came after the window it was meant for: send it now
    pacer.target = due = pacer.next_send()
    if due is None:
        return
    delay = due - LEAD_S - loop.time()
    if delay > 0:
        await asyncio.sleep(delay)


__all__ = ["LEAD_S", "pace_reads_by", "read_pause"]
