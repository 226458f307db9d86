"""Security ports: the tenant registry, API keys, budgets and the atomic counters behind limits.

The stores (``TenantStore``, ``TenantPurge``, ``KeyStore``, ``BudgetStore``, ``Counters``) are
implemented by adapters; the services the runtime holds (``Authentication``, ``TokenBudgets``,
``RateLimits``, ``StorageAccount``, ``PerTenantLimits``) by ``agentvm.security``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    from agentvm.ports.observability import UsageRollups
    from agentvm.records import ApiKeyRecord, BudgetRecord, TenantRecord, TenantStatus


class TenantStore(Protocol):
    """The tenant registry. Records are never removed: a deleted tenant stays as a tombstone."""

    async def create_tenant(self, tenant: TenantRecord) -> bool:
        """Create if the id is free (tombstones included). True if this call created it."""
        ...

    async def get_tenant(self, tenant_id: str) -> TenantRecord | None:
        """The tenant in any status; None if the id was never registered."""
        ...

    async def replace_tenant(self, tenant: TenantRecord, *, status: TenantStatus) -> bool:
        """Overwrite the tenant only if its stored status is still ``status`` (atomically), so an
        update never revives a tenant being deleted. True if written."""
        ...

    async def list_tenants(
        self, *, statuses: Collection[TenantStatus] | None = None, limit: int = 100, after: str | None = None
    ) -> tuple[list[TenantRecord], str | None]:
        """Up to ``limit`` tenants (in one of ``statuses``; None: any) by id, after the id ``after``;
        and the cursor of the next page (None on the last)."""
        ...


class TenantPurge(Protocol):
    """Deletes a deleted tenant's conversations at once, where the host can do that cheaply.

    Containers, images, sessions, messages, turns and workspaces go; usage records stay (they are
    what the tenant is billed for). Hosts without one keep the conversations (docs/tenants.md).
    """

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete them; returns how many images (conversations) there were."""
        ...


class KeyStore(Protocol):
    """API keys by ``keyId`` (one point read per verification) and by tenant (for listing)."""

    async def put_key(self, key: ApiKeyRecord) -> None:
        """Create or replace the key with this ``keyId`` (replace: re-hashing after a rotation)."""
        ...

    async def get_key(self, key_id: str) -> ApiKeyRecord | None: ...
    async def list_keys(self, tenant_id: str) -> list[ApiKeyRecord]:
        """The tenant's keys, revoked ones included, oldest first."""
        ...

    async def revoke_key(
        self, key_id: str, *, revoked_at: int, tenant_id: str | None = None
    ) -> ApiKeyRecord | None:
        """Mark the key revoked (a key revoked already keeps its first ``revokedAt``).

        With ``tenant_id``, only a key of that tenant (another tenant's key reads as absent).
        Returns the key as stored after the call, or None if there is no such key.
        """
        ...


@dataclass(frozen=True, slots=True)
class CounterLease:
    """What ``Counters.lease`` took: ``granted`` (0 when nothing was left) and the field's value
    after it (``total``; the value it found when it took nothing)."""

    granted: int
    total: int


class Counters(Protocol):
    """Atomic counters with an expiry: token usage per window, requests per minute, stored bytes.

    A counter is a set of named integer fields under one key (so one write adds to a month's total
    and to that day's field at once). Once ``expires_at`` has passed, the counter reads as empty
    and the next ``incr`` (or ``lease``) starts it over from zero.
    """

    async def incr(self, key: str, amounts: Mapping[str, int], *, expires_at: int) -> dict[str, int]:
        """Atomically add ``amounts`` to the fields; returns those fields' new values.

        ``expires_at`` is in epoch seconds (the end of the counter's window). Field names are
        1-16 characters of ``[a-z0-9]``.
        """
        ...

    async def lease(
        self, key: str, field: str, amount: int, *, limit: int, expires_at: int, whole: bool = False
    ) -> CounterLease:
        """Atomically add up to ``amount`` to ``field`` without taking it over ``limit``.

        Adds ``amount`` if the field stays at or under ``limit``; otherwise what is left
        (``limit - value``, at least 1); when nothing is left it writes nothing and grants 0. The
        sum of every lessee's grants within a window is therefore never over ``limit``, whatever
        runs concurrently (``security/ratelimit.py`` leases requests per key this way).
        ``1 <= amount``, ``1 <= limit``; an ``amount`` over ``limit`` is taken as ``limit``.
        ``expires_at`` is as for ``incr``.

        ``whole``: all or nothing. ``amount`` is granted only if all of it fits (an ``amount`` over
        ``limit`` never does); otherwise nothing is written and 0 granted, with the field's value
        as ``total`` (``security/storage_quota.py`` reserves bytes this way).
        """
        ...

    async def get(self, key: str) -> dict[str, int]:
        """Every field of the counter; empty if it does not exist or has expired."""
        ...


class BudgetStore(Protocol):
    """Token budgets of tenants and of their containers."""

    async def put_budget(self, budget: BudgetRecord) -> None:
        """Create or replace the budget of ``(tenantId, containerId)``."""
        ...

    async def get_budget(self, tenant_id: str, container_id: str | None = None) -> BudgetRecord | None:
        """The tenant-wide budget (``container_id=None``) or that of one container of the tenant."""
        ...

    async def delete_budgets(self, tenant_id: str) -> int:
        """Delete the tenant's budgets (its own and its containers'); returns how many there were."""
        ...


# What the runtime holds of ``agentvm.security`` (``Runtime.auth``, ``budgets``, ``rate_limiter``,
# ``storage_quota``, ``tenant_limits``): the services' public faces, so that the runtime names no
# class above it. Values of the security domain itself (``Principal``, ``Limit``, ``Limits``,
# ``ApiKeys``) are ``Any`` here: ports sit below the domain that defines them.


class Authentication(Protocol):
    """API-key authentication with a short verification cache (``security.auth.Authenticator``)."""

    keys: Any  # the ApiKeys service (``security.apikeys.ApiKeys``)
    cache_s: float

    async def authenticate(self, token: str) -> Any:
        """The ``Principal`` of ``token``; raises ``Unauthorized`` for any bad token."""
        ...

    async def from_headers(self, headers: Mapping[str, str]) -> Any: ...
    async def from_query(self, query: Mapping[str, str]) -> Any: ...
    async def from_request(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Any: ...
    async def principal(self, key_id: str) -> Any: ...
    async def revoke(self, key_id: str, *, tenant_id: str | None = None) -> ApiKeyRecord | None: ...
    def recently_verified(self, headers: Mapping[str, str]) -> bool: ...
    def forget(self, key_id: str) -> None: ...


class TokenBudgets(Protocol):
    """Token budgets per tenant and container, enforced per model call (``security.budgets.Budgets``)."""

    store: BudgetStore

    def read_sums_from(self, sums: Callable[[], UsageRollups | None]) -> None: ...
    async def set(
        self,
        tenant_id: str,
        container_id: str | None,
        *,
        daily_tokens: int | None,
        monthly_tokens: int | None,
    ) -> BudgetRecord: ...
    async def usage(self, tenant_id: str, container_id: str | None = None) -> dict[str, int]: ...
    async def limits(self, tenant_id: str, container_id: str) -> list[Any]: ...
    async def allowance(self, tenant_id: str, container_id: str) -> Any: ...
    async def for_call(self, tenant_id: str, container_id: str) -> tuple[Any, frozenset[Any]]: ...
    async def check(self, tenant_id: str, container_id: str) -> None: ...
    async def record(
        self, tenant_id: str, container_id: str, tokens: int, *, scopes: Collection[Any] | None = None
    ) -> None: ...


class RateLimits(Protocol):
    """Requests per minute per key, per unauthenticated connection and per address
    (``security.ratelimit.RateLimiter``)."""

    per_minute: int
    unauthenticated_per_minute: int
    lease_max: int
    unauthorized_per_minute: int

    async def hit(self, principal: Any) -> None: ...
    def check_unauthorized(self, source: str) -> None: ...
    async def hit_unauthorized(self, source: str) -> None: ...
    async def hit_unauthenticated(self, connection_id: str) -> None: ...


class StorageAccount(Protocol):
    """The bytes each tenant stores, against its quota (``security.storage_quota.StorageQuota``)."""

    limit_bytes: int

    async def limit_of(self, tenant_id: str) -> int: ...
    async def reserve(self, tenant_id: str, size: int) -> int: ...
    async def give_back(self, tenant_id: str, size: int) -> None: ...
    async def charge(self, tenant_id: str, delta: int) -> None: ...
    async def refuse_if_full(self, tenant_id: str) -> None: ...
    async def used(self, tenant_id: str) -> int: ...


class PerTenantLimits(Protocol):
    """Connections, keys and requests per tenant (``security.tenant_limits.TenantLimits``)."""

    defaults: Any  # ``security.tenant_limits.Limits``
    cache_s: float

    def read_overrides_from(self, tenants: Callable[[], TenantStore | None]) -> None: ...
    async def of(self, tenant_id: str) -> Any: ...
    def forget(self, tenant_id: str) -> None: ...
    async def connection_cap(self, tenant_id: str | None) -> int: ...
    async def check_key_room(self, keys: Any, tenant_id: str) -> None: ...


__all__ = [
    "Authentication",
    "BudgetStore",
    "CounterLease",
    "Counters",
    "KeyStore",
    "PerTenantLimits",
    "RateLimits",
    "StorageAccount",
    "TenantPurge",
    "TenantStore",
    "TokenBudgets",
]
