"""The interrupt poll of a worker: one read per interval for all the turns it runs.

On AWS an interrupt arrives in another Lambda (``ws_default``, or the operator's ``/v1/turns/cancel``),
which writes the turn's cancel mark (``Store.request_cancel``); the worker running the turn finds it
by polling every ``cancel_poll_ms``. Polling each turn's own mark cost one read per turn per
interval: ten reads a second for an invocation running a batch of ten turns. Instead the worker
names itself: while it runs turns, a process (one Lambda invocation, on one event loop) has a
**poller id**, fresh whenever it goes from no turn to one; each turn's ``running`` status write
(which the worker makes anyway) carries it (``TurnRecord.poller``). ``request_cancel``, after
writing the turn's mark, reads the turn record and, if the turn is running under a poller, marks
it for that poller too; the poller reads all its marks with one request per interval
(``Store.cancel_requests``: on DynamoDB an eventually consistent Query of ``POLL#<poller>``, 0.5
RRU while empty), whatever its number of turns, and sets the cancel event of each turn it finds.
A turn leaves the poll when its attempt suspends or ends; with no turn left, nothing is read.

**Why no interrupt is missed.** Two sequences race. The interrupt: (A) write the turn's mark
``SESSION#<s>/CANCEL#<turn>``, then (B) read the turn record, strongly consistent, and mark the
poller it names if it is running. The worker: (C) write the turn's ``running`` record naming its
poller, then (D) read the turn's mark, strongly consistent (``Store.is_cancel_requested``, once, at
the start of the attempt). Each side writes before it reads, and both reads are strongly consistent
(they see every write acknowledged before them). If B does not see C, B came before C, so A < B < C
< D and D sees A: the attempt starts cancelled. If B sees C, the poller's mark is written and the
poll reads it at most one interval later (plus the eventual consistency's lag, which a later poll
catches up on). Either way the turn stops. The cases this covers:

* an interrupt that races the turn's start: above (B before C: D sees it; B after C: the poll);
* a redelivered attempt (a new invocation, a new poller id): its own C and D, as above; an interrupt
  sent before it started is A < D; an interrupt whose B read the dead attempt's record (its old
  poller, which nobody polls) came before this attempt's C, so D sees its A;
* a suspended turn: not running, so not polled and no poller mark (B sees ``suspended``); the
  interrupt wakes it (``cancel_turn_waits``) and its continuation's D sees A;
* a turn that ends: its terminal record names no poller and it has left the poll; a mark of it
  under its poller is ignored by later polls of that poller (no such turn there) and never read
  once the poller id changes (TTL: one day). An interrupt is the turn's for good (its own mark), so
  a mark read for a turn is never wrong, only late or unneeded;
* several turns of one session interrupted at once: one mark per turn, under each turn's own key.

The local host runs gateway and worker in one process (or relays between its processes) and uses
in-process signals (``runtime.CancelSignals``): ``cancel_poll_s`` is 0 there, no poller exists and
no turn record names one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.turns")


@dataclass
class _Poll:
    """The poll of one event loop (one Lambda invocation): its id, its turns, its task."""

    poller: str
    turns: dict[str, asyncio.Event] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class CancelPoll:
    """The interrupt poll of one process: ``watch`` a turn while it runs (see the module docstring)."""

    def __init__(self) -> None:
        # one poll per event loop: tests run several "Lambdas" in threads of one process
        self._polls: dict[asyncio.AbstractEventLoop, _Poll] = {}

    @contextlib.contextmanager
    def watch(self, rt: Runtime, turn_id: str, cancelled: asyncio.Event) -> Iterator[str]:
        """Poll for ``turn_id`` until the block ends; yields the poller id its ``running`` write names."""
        loop = asyncio.get_running_loop()
        poll = self._polls.get(loop)
        if poll is None:  # the first turn since the loop had none: a fresh id
            poll = self._polls[loop] = _Poll(rt.ids.new("poll"))
        poll.turns[turn_id] = cancelled
        if poll.task is None:
            poll.task = loop.create_task(_poll(rt, poll))
        try:
            yield poll.poller
        finally:
            poll.turns.pop(turn_id, None)
            if not poll.turns:  # no turn left: stop reading
                self._polls.pop(loop, None)
                poll.task.cancel()

    def poller_of(self, turn_id: str) -> str | None:
        """The poller id watching ``turn_id`` on the running loop, if any (tests)."""
        poll = self._polls.get(asyncio.get_running_loop())
        return poll.poller if poll is not None and turn_id in poll.turns else None


async def _poll(rt: Runtime, poll: _Poll) -> None:
    while poll.turns:
        await asyncio.sleep(rt.turns.cancel_poll_s)
        if not poll.turns:
            return
        try:
            # eventually consistent (half the price): a mark read late is read at the next poll
            found = await rt.store.cancel_requests(poll.poller)
        except Exception as exc:  # a failed read must not fail turns that stream fine: poll again
            log.warning("cancel poll failed", extra={"poller": poll.poller, "error": type(exc).__name__})
            continue
        for turn_id in found:
            event = poll.turns.get(turn_id)
            if event is not None:
                event.set()


__all__ = ["CancelPoll"]
