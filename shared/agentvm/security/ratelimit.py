"""Requests per API key per minute: a fixed one-minute window on a ``Counters`` item, taken in leases.

Counted: every frame of a connection authenticated with a key (requests, ``subscribe``, ``auth``),
and every ``/v1`` HTTP request. A key's own ``rateLimitPerMinute`` beats the server default; 0
means unlimited. A connection that has not authenticated yet has its own, small allowance
(``AVM_UNAUTHENTICATED_FRAMES_PER_MINUTE``), counted by connection id: it bounds key guessing
through ``auth`` frames and the work any unauthenticated frame costs. The open dev mode (no
keys) has no rate limiter.

Per tenant
----------

Keys add up per tenant instead of multiplying: every request of a key is also counted on its
tenant's window (``rate#tenant#<tenant>#<minute>``, leased the same way), against the tenant's
limit (``AVM_TENANT_RATE_LIMIT_PER_MINUTE``, 1800, or the platform's override for that tenant:
``security/tenant_limits.py``). A request is admitted only if both its key and its tenant have
room; one refused by its tenant has used one of its key's (under-admission, never over). Keys an
operator made unlimited (``--rate-limit 0``) are still counted against their tenant.

Bad keys
--------

HTTP requests answered ``401`` are counted per client address (``rate#unauth#<address>``, exact,
``AVM_UNAUTHORIZED_PER_MINUTE``, 60). Once a process learns an address's minute is full it answers
that address ``429`` before reading its key (no key lookup, no HMAC, no log line beyond the
refusal's), until the minute ends: a flood of bad keys costs a dictionary look-up per request.

Leases
------

The window's count is the item ``rate#<key>#<minute>`` (field ``n``). A process (a Lambda execution
environment, or ``avm serve``) does not add 1 per request: it takes a **lease** of ``L`` requests
of the key's current window with one conditional write (``Counters.lease``: add ``L`` only if the
count stays within the limit, else what is left, else nothing), then admits up to ``L`` requests of
that key in that window from memory, with no write. The sum of every process's leases never
exceeds the limit, so **a key never goes over its limit**, however many processes serve it.

``L = min(limit // 20, AVM_RATE_LEASE_MAX, (limit - count) // 4)``, at least 1: ``count`` is the
window's count this process last saw (0 before its first lease of the window), so leases shrink
as a window fills and its last requests are not stranded in one process. ``AVM_RATE_LEASE_MAX=1``
is the exact counter of before: one write per admitted request.

The price is **under-admission**: a request can be refused while other processes still hold
leased requests of the key they have not used (at most ``L - 1`` each, lost when the window
ends). A process that learns the window is full refuses the key's requests until the window ends
without writing again (the count of a window never goes down, so this is exact).

Memory: one small entry per key that made a request in this process in the current window; the
entries of past windows are dropped when the window turns, and at most ``_MAX_LEASES`` are kept
(dropping one only forgets leased requests: under-admission, never over-admission).

Unauthenticated frames are counted exactly (leases of 1): they are keyed by connection, a
connection sends about one (its ``auth`` frame) and on AWS each frame may reach a different
execution environment, so a lease would be left unused in almost every case; and they are the key
guessing bound, which should not loosen.

Cost on AWS: one UpdateItem (1 WRU) per lease, so about ``1/L`` writes per request for a key whose
requests reach a warm process; a refusal is one failed conditional write (1 WRU), then none for
that key in that window in that process (docs/cost.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agentvm.errors import RateLimited

if TYPE_CHECKING:
    from agentvm.ports import Clock, Counters
    from agentvm.security.auth import Principal
    from agentvm.security.tenant_limits import TenantLimits

_MINUTE_MS = 60_000
_FIELD = "n"
_LIMIT_SHARE = 20  # a lease is at most limit // 20 requests (5 % of the window)...
_LEFT_SHARE = 4  # ...and at most a quarter of what this process last saw left
_MAX_LEASES = 50_000  # entries kept per process (the keys active in the current window)


@dataclass(slots=True)
class _Lease:
    minute: int
    limit: int
    left: int  # leased requests not used yet
    total: int  # the window's count when this process last wrote it


class RateLimiter:
    def __init__(
        self,
        counters: Counters,
        clock: Clock,
        *,
        per_minute: int,
        unauthenticated_per_minute: int = 30,
        lease_max: int = 10,
        tenant_limits: TenantLimits | None = None,
        unauthorized_per_minute: int = 0,
    ) -> None:
        if lease_max < 1:
            raise ValueError("lease_max must be at least 1")
        self._counters = counters
        self._clock = clock
        self.per_minute = per_minute
        self.unauthenticated_per_minute = unauthenticated_per_minute
        self.lease_max = lease_max
        self.tenant_limits = tenant_limits  # None: keys are not counted per tenant
        self.unauthorized_per_minute = unauthorized_per_minute  # HTTP 401s per address; 0 = no limit
        self._leases: dict[str, _Lease] = {}
        self._minute = 0  # the window the entries are of (older ones are dropped when it turns)

    async def hit(self, principal: Principal) -> None:
        """Count one request of ``principal``; raises ``RateLimited`` past the key's limit."""
        if principal.key_id is None:
            return
        limit = principal.rate_limit_per_minute
        limit = self.per_minute if limit is None else limit
        await self._count(f"rate#{principal.key_id}", limit, "for this API key", self.lease_max)
        if self.tenant_limits is not None:
            tenant_limit = (await self.tenant_limits.of(principal.tenant_id)).requests_per_minute
            await self._count(
                f"rate#tenant#{principal.tenant_id}",
                tenant_limit,
                "for this tenant (all its API keys together)",
                self.lease_max,
            )

    def check_unauthorized(self, source: str) -> None:
        """Raises ``RateLimited`` if this process knows ``source`` (a client address) used up its
        minute of ``401`` answers: no I/O, so refusing it costs nothing."""
        limit = self.unauthorized_per_minute
        if limit <= 0:
            return
        minute = self._clock.now_ms() // _MINUTE_MS
        lease = self._leases.get(f"rate#unauth#{source}")
        if lease is not None and lease.minute == minute and lease.total >= limit:
            raise self._refusal(limit, (minute + 1) * _MINUTE_MS, "for requests with no or a bad API key")

    async def hit_unauthorized(self, source: str) -> None:
        """Count one ``401`` answer to ``source`` (a client address); raises ``RateLimited`` past it."""
        limit = self.unauthorized_per_minute
        await self._count(f"rate#unauth#{source}", limit, "for requests with no or a bad API key", 1)

    async def hit_unauthenticated(self, connection_id: str) -> None:
        """Count one frame of a connection that has no key yet (an ``auth`` attempt included)."""
        await self._count(
            f"rate#conn#{connection_id}",
            self.unauthenticated_per_minute,
            "for a connection that has not authenticated",
            1,
        )

    async def _count(self, key: str, limit: int, whose: str, lease_max: int) -> None:
        if limit <= 0:
            return
        minute = self._clock.now_ms() // _MINUTE_MS
        reset_ms = (minute + 1) * _MINUTE_MS
        self._turn(minute)
        lease = self._leases.get(key)
        if lease is not None and (lease.minute != minute or lease.limit != limit):
            lease = None  # another window, or the key's limit changed: its leased requests are void
        if lease is not None and lease.left > 0:
            lease.left -= 1
            return
        if lease is None or lease.total < limit:
            seen = lease.total if lease is not None else 0
            size = max(1, min(limit // _LIMIT_SHARE, lease_max, (limit - seen) // _LEFT_SHARE))
            taken = await self._counters.lease(
                f"{key}#{minute}", _FIELD, size, limit=limit, expires_at=reset_ms // 1000
            )
            # Another request of this key may have leased meanwhile (both awaited): add, never replace.
            lease = self._leases.get(key)
            if lease is None or lease.minute != minute or lease.limit != limit:
                lease = self._leases[key] = _Lease(minute, limit, 0, 0)
                self._bound()
            lease.total = max(lease.total, taken.total)
            if taken.granted > 0:
                lease.left += taken.granted - 1  # one is this request's
                return
        raise self._refusal(limit, reset_ms, whose)

    @staticmethod
    def _refusal(limit: int, reset_ms: int, whose: str) -> RateLimited:
        reset = datetime.fromtimestamp(reset_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return RateLimited(
            f"rate limit of {limit} requests per minute reached {whose}; retry after {reset}",
            limit=limit,
            reset_at_ms=reset_ms,
        )

    def _turn(self, minute: int) -> None:
        """A new window: drop the entries of past ones (their leases are void)."""
        if minute > self._minute:
            self._minute = minute
            self._leases = {k: v for k, v in self._leases.items() if v.minute >= minute}

    def _bound(self) -> None:
        while len(self._leases) > _MAX_LEASES:
            del self._leases[next(iter(self._leases))]  # the oldest entry: its leased requests are lost


__all__ = ["RateLimiter"]
