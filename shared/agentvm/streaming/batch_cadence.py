"""When a turn sends a batched subscriber what waits for it: the cadence of ``?frames=batch``.

A connection that takes batched frames (``streaming.batching``) is sent what a turn has due in one
message, and text on its own cadence, since every message is billed on AWS (docs/cost.md):

* text-only passes go at most once per window: the first window ``first_s`` (never shorter than
  the sink's flush window), doubling per message up to ``max_s``;
* the frames that open a message (``message_start``...) wait for its first text, ``start_wait_s``
  at most (``max_s`` unless given);
* a pass with any other event (a message's first text, which comes with
  ``conversation_responding``, tool events, the end) goes at once, with what waited.

A turn keeps one ``BatchCadence`` per cadence (``LIVE``: ``AVM_BATCH_FLUSH_MS``/``_MAX_MS``, 250 ms,
text as a plain client gets it; ``ECONOMY``: ``AVM_ECONOMY_FLUSH_MS``/``_MAX_MS``, 2 s); in both, a
message's opening frames wait up to the economy window for its first text (they carry no text, so
waiting costs no latency and saves a message when the model is slow to start).

The sink (``streaming.sink``) asks ``due`` for each batched subscriber on each pass; when the answer
is "not yet", this sets one timer for the earliest wait to end and calls ``wake`` then, and the
sink makes a pass for the batched subscribers.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.ports import Clock


class BatchCadence:
    def __init__(
        self,
        *,
        first_s: float,
        max_s: float,
        clock: Clock,
        wake: Callable[[], None],
        start_wait_s: float | None = None,
    ) -> None:
        self._first = first_s
        self._max = max(max_s, first_s)
        self._start_wait = self._max if start_wait_s is None else start_wait_s
        self._clock = clock
        self._wake = wake
        self._next: dict[str, tuple[float, float]] = {}  # connection -> (next due, its window)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def due(self, connection_id: str, urgency: str, now: float) -> bool:
        """Whether the connection is sent its waiting frames now, given what they are
        (``FrameLog.urgency``: ``"start"``, ``"text"`` or ``"urgent"``). Anything urgent, or a window
        that is over (the window then doubles if they are text), says yes. A message's opening
        frames seen first wait for its first text, ``start_wait_s`` at most. Otherwise a timer
        is set for when the wait ends, and no."""
        known = self._next.get(connection_id)
        if urgency != "urgent":
            if known is None and urgency == "start":
                known = self._next[connection_id] = (now + self._start_wait, self._first)
            if known is not None and now < known[0]:
                self._wake_at(known[0])
                return False
        window = self._first if known is None else known[1]
        if known is not None and urgency == "text":
            window = min(window * 2, self._max)
        self._next[connection_id] = (now + window, window)
        return True

    def close(self) -> None:
        """No more passes: the timer, if any, is cancelled."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wake_at(self, when: float) -> None:
        if self._timer is not None and self._timer_at <= when:
            return  # an earlier wake-up is set: the pass then asks again
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        delay = max(0.0, when - self._clock.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._over)

    def _over(self) -> None:
        self._timer = None
        self._wake()


__all__ = ["BatchCadence"]
