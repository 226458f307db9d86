"""Requests per API key per minute: a fixed one-minute window on a ``Counters`` item.

Counted: every frame of a connection authenticated with a key (requests, ``subscribe``, ``auth``),
and every ``/v1`` HTTP request. A key's own ``rateLimitPerMinute`` beats the server default; 0
means unlimited. A connection that has not authenticated yet has its own, small allowance
(``AVM_UNAUTHENTICATED_FRAMES_PER_MINUTE``), counted by connection id: it bounds key guessing
through ``auth`` frames and the work any unauthenticated frame costs. The open dev mode (no
keys) has no rate limiter.
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
    def __init__(
        self, counters: Counters, clock: Clock, *, per_minute: int, unauthenticated_per_minute: int = 30
    ) -> None:
        self._counters = counters
        self._clock = clock
        self.per_minute = per_minute
        self.unauthenticated_per_minute = unauthenticated_per_minute

    async def hit(self, principal: Principal) -> None:
        """Count one request of ``principal``; raises ``RateLimited`` past the key's limit."""
        if principal.key_id is None:
            return
        limit = principal.rate_limit_per_minute
        limit = self.per_minute if limit is None else limit
        await self._count(f"rate#{principal.key_id}", limit, "for this API key")

    async def hit_unauthenticated(self, connection_id: str) -> None:
        """Count one frame of a connection that has no key yet (an ``auth`` attempt included)."""
        await self._count(
            f"rate#conn#{connection_id}",
            self.unauthenticated_per_minute,
            "for a connection that has not authenticated",
        )

    async def _count(self, key: str, limit: int, whose: str) -> None:
        if limit <= 0:
            return
        minute = self._clock.now_ms() // _MINUTE_MS
        reset_ms = (minute + 1) * _MINUTE_MS
        fields = await self._counters.incr(f"{key}#{minute}", {"n": 1}, expires_at=reset_ms // 1000)
        if fields["n"] > limit:
            reset = datetime.fromtimestamp(reset_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            raise RateLimited(
                f"rate limit of {limit} requests per minute reached {whose}; retry after {reset}",
                limit=limit,
                reset_at_ms=reset_ms,
            )


__all__ = ["RateLimiter"]
