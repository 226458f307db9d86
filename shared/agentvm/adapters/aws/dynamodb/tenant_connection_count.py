"""Live WebSocket connections per tenant on the AWS host, counted so that a lost count heals itself.

On AWS no process sees every connection, so a tenant's connections are counted on the table:
``$connect`` (or the ``auth`` frame that gives a connection its tenant) takes a slot with one
conditional write (``Counters.lease``: add 1 only while the count stays within the cap),
``$disconnect`` gives it back (``ADD -1``). API Gateway delivers ``$disconnect`` only on a
best-effort basis, so a count kept for ever would drift up with every lost event until the tenant
is refused for good. Instead the count is kept in **two-hour windows**, the longest an API Gateway
WebSocket lives:

* a connection is counted in the window it was registered in (``conns#<tenant>#<window>``, field
  ``n``), and its connection item records which (``countedIn``) so its ``$disconnect`` gives the
  slot back to that window;
* a connection registered in window ``W - 2`` or earlier is closed by API Gateway before window
  ``W`` starts, so the tenant's live connections are the counts of ``W`` and ``W - 1``: taking a
  slot reads ``W - 1`` (one eventually consistent GetItem, 0.5 RRU) and leases on ``W`` with the
  limit ``cap - count(W - 1)``. ``W - 1`` only goes down during ``W`` (nothing is counted into a
  past window), so a stale read refuses early, never admits over the cap;
* each window's counter expires at the end of the next window (TTL), and a lost ``$disconnect``
  leaves a phantom slot for at most the rest of that window and the next: **a stale count heals
  within four hours at most**, with no sweeper;
* a ``$disconnect`` of a connection counted in a window older than ``W - 1`` changes nothing (its
  counter is over: adding -1 would start a new window below zero).

Cost per connection: 0.5 RRU and 1 WRU at ``$connect`` (a refusal: the failed conditional write,
1 WRU), 1 WRU at ``$disconnect``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.errors import RateLimited

if TYPE_CHECKING:
    from agentvm.ports import Counters

WINDOW_MS = 2 * 60 * 60 * 1000  # API Gateway's hard cap on one WebSocket connection
_FIELD = "n"


def _key(tenant_id: str, window: int) -> str:
    return f"conns#{tenant_id}#{window}"


def _expires_at(window: int) -> int:
    """Epoch seconds: the end of the window after ``window`` (while it still counts as the previous)."""
    return (window + 2) * WINDOW_MS // 1000


class TenantConnectionCount:
    def __init__(self, counters: Counters) -> None:
        self._counters = counters

    async def take(self, tenant_id: str, cap: int, now_ms: int) -> int:
        """Take a slot of the tenant's connections; the window it is counted in. Raises
        ``RateLimited`` when the tenant holds ``cap`` (this counts a ``$disconnect`` that did not
        come yet, for up to four hours)."""
        window = now_ms // WINDOW_MS
        previous = (await self._counters.get(_key(tenant_id, window - 1))).get(_FIELD, 0)
        room = cap - max(previous, 0)
        if room >= 1:
            lease = await self._counters.lease(
                _key(tenant_id, window), _FIELD, 1, limit=room, expires_at=_expires_at(window)
            )
            if lease.granted:
                return window
        raise RateLimited(
            f"too many connections for this tenant (at most {cap})",
            limit=cap,
            reset_at_ms=now_ms,  # a slot frees as soon as one of them closes
        )

    async def give_back(self, tenant_id: str, counted_in: int, now_ms: int) -> None:
        """The connection counted in ``counted_in`` closed."""
        if counted_in < now_ms // WINDOW_MS - 1:
            return  # that window no longer counts (module docstring)
        await self._counters.incr(
            _key(tenant_id, counted_in), {_FIELD: -1}, expires_at=_expires_at(counted_in)
        )


__all__ = ["WINDOW_MS", "TenantConnectionCount"]
