"""Requests per API key per minute: a fixed one-minute window on a ``Counters`` item.

Counted: every ``*_request`` frame of a connection authenticated with a key, and every ``/v1``
HTTP request. A key's own ``rateLimitPerMinute`` beats the server default; 0 means unlimited.
Connections without a key (the open dev mode) are not limited.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agentvm.errors import RateLimited

if TYPE_CHECKING:
    from agentvm.ports import Clock, Counters
    from agentvm.security.auth import Principal

_MINUTE_MS = 60_000


class RateLimiter:
    def __init__(self, counters: Counters, clock: Clock, *, per_minute: int) -> None:
        self._counters = counters
        self._clock = clock
        self.per_minute = per_minute

    async def hit(self, principal: Principal) -> None:
        """Count one request of ``principal``; raises ``RateLimited`` past the key's limit."""
        if principal.key_id is None:
            return
        limit = principal.rate_limit_per_minute
        limit = self.per_minute if limit is None else limit
        if limit <= 0:
            return
        minute = self._clock.now_ms() // _MINUTE_MS
        reset_ms = (minute + 1) * _MINUTE_MS
        fields = await self._counters.incr(
            f"rate#{principal.key_id}#{minute}", {"n": 1}, expires_at=reset_ms // 1000
        )
        if fields["n"] > limit:
            reset = datetime.fromtimestamp(reset_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            raise RateLimited(
                f"rate limit of {limit} requests per minute reached for this API key; retry after {reset}",
                limit=limit,
                reset_at_ms=reset_ms,
            )


__all__ = ["RateLimiter"]
