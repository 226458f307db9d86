"""Frames per second of one local WebSocket: a token bucket, checked before a frame is handled.

Every frame counts, keyed or not, whatever its type (``__ack`` and unparseable ones included):
handling a frame costs parsing, a lookup, often a store write, and the API key rate limits only
see frames that parse and name a key. Ten lines, so no library.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


class FrameRate:
    """``rate`` frames per second on average, bursts of up to ``burst``."""

    def __init__(self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._at = clock()

    def take(self) -> bool:
        """Spend one token; False (nothing spent) when the bucket is empty."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


__all__ = ["FrameRate"]
