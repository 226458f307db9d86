"""What one tenant may hold or spend, whatever its number of API keys (issue 25).

Per-key limits multiply with keys: a tenant admin who mints keys multiplies every one of them (5
keys admitted 3,000 requests in 14 s against 600 per minute per key; 40 self-minted keys opened
19,971 WebSockets and took the server's descriptors). So each is also bounded per tenant:

=========================  ======================================  =========================
limit                      server setting (default; 0 = none)      refused with
=========================  ======================================  =========================
live WebSocket connections ``AVM_MAX_CONNECTIONS_PER_TENANT`` 1000 ``rate_limited`` (429 at
                                                                   the upgrade, like the
                                                                   per-address cap)
active API keys            ``AVM_MAX_API_KEYS_PER_TENANT`` 50      ``conflict`` 409 (``limit``)
requests per minute, all   ``AVM_TENANT_RATE_LIMIT_PER_MINUTE``    ``rate_limited`` 429
of its keys together       1800                                    (``security/ratelimit.py``)
bytes stored (messages,    ``AVM_TENANT_STORAGE_BYTES`` 1 GiB      ``storage_quota_exceeded``
workspaces, resources,                                             507 (``limit``, ``used``;
images: every write path)                                          ``security/storage_quota.py``)
=========================  ======================================  =========================

A platform admin sets any of them for one tenant: ``limits`` of its registry record
(``PATCH /v1/tenants/{id}``; ``null`` keeps the server's). The record is read at most once per
``cache_s`` per tenant per process (``AVM_KEY_CACHE_S``, 30 s: the bound within which a change
reaches every process), so the request path costs no read in between. A tenant with no registry
record (keys made with ``avm keys create --tenant X``) has the server's limits.

The key cap counts the tenant's active keys before making one more: two requests racing for the
last slot may both pass (one key over, per concurrent request); the operator's ``avm keys create``
is not capped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.errors import KeyLimitReached

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.ports import Clock, PerTenantLimits, TenantStore
    from agentvm.records import TenantLimitOverrides
    from agentvm.security.apikeys import ApiKeys

_MAX_CACHED = 10_000  # tenants whose limits a process remembers (oldest forgotten first)


@dataclass(frozen=True, slots=True)
class Limits:
    """One tenant's limits (0 = none)."""

    connections: int
    api_keys: int
    requests_per_minute: int
    storage_bytes: int = 0  # the storage account (``security/storage_quota.py``)

    def overridden(self, overrides: TenantLimitOverrides | None) -> Limits:
        if overrides is None:
            return self
        return Limits(
            connections=_pick(overrides.maxConnections, self.connections),
            api_keys=_pick(overrides.maxApiKeys, self.api_keys),
            requests_per_minute=_pick(overrides.rateLimitPerMinute, self.requests_per_minute),
            storage_bytes=_pick(overrides.storageBytes, self.storage_bytes),
        )


def _pick(override: int | None, default: int) -> int:
    return default if override is None else override


class TenantLimits:
    """The limits of each tenant: the server's, with the platform's overrides from the registry."""

    def __init__(self, defaults: Limits, clock: Clock, *, cache_s: float = 30.0) -> None:
        self.defaults = defaults
        self._tenants: Callable[[], TenantStore | None] = lambda: None
        self._clock = clock
        self.cache_s = cache_s
        self._cache: dict[str, tuple[float, Limits]] = {}  # tenant -> (read at, limits)

    def read_overrides_from(self, tenants: Callable[[], TenantStore | None]) -> None:
        """Where the platform's overrides are (the runtime's registry, attached after security)."""
        self._tenants = tenants

    async def of(self, tenant_id: str) -> Limits:
        store = self._tenants()
        if store is None:
            return self.defaults
        now = self._clock.monotonic()
        entry = self._cache.get(tenant_id)
        if entry is not None and now - entry[0] < self.cache_s:
            return entry[1]
        record = await store.get_tenant(tenant_id)
        limits = self.defaults.overridden(None if record is None else record.limits)
        if self.cache_s > 0:
            self._cache.pop(tenant_id, None)
            if len(self._cache) >= _MAX_CACHED:
                self._cache.pop(next(iter(self._cache)))  # oldest first: dicts keep insertion order
            self._cache[tenant_id] = (now, limits)
        return limits

    def forget(self, tenant_id: str) -> None:
        """This process reads the tenant's limits again on next use (after a platform admin's change)."""
        self._cache.pop(tenant_id, None)

    async def connection_cap(self, tenant_id: str | None) -> int:
        """The live connections ``tenant_id`` may hold (0: no cap; a connection with no tenant yet
        is bounded by its address and its ``auth`` deadline instead)."""
        return 0 if tenant_id is None else (await self.of(tenant_id)).connections

    async def check_key_room(self, keys: ApiKeys, tenant_id: str) -> None:
        """Raises ``KeyLimitReached`` if the tenant may not have one more active key."""
        limit = (await self.of(tenant_id)).api_keys
        if limit <= 0:
            return
        active = sum(1 for key in await keys.list(tenant_id) if key.revokedAt is None)
        if active >= limit:
            raise KeyLimitReached(
                f"this tenant has {active} active API keys, the most it may have ({limit}); "
                "revoke one (DELETE /v1/auth/keys/{keyId}) before creating another",
                limit=limit,
            )


async def connection_cap(limits: PerTenantLimits | None, tenant_id: str | None) -> int:
    """What a host passes to ``Connections.register`` (``tenant_cap``): 0 without tenant limits."""
    return 0 if limits is None else await limits.connection_cap(tenant_id)


__all__ = ["Limits", "TenantLimits", "connection_cap"]
