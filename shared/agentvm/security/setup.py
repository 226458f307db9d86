"""Security wiring both hosts share: an authenticator, budgets and a rate limiter over given stores.

``hosts.local.local_security`` and ``hosts.aws.aws_security`` choose the stores and where the server
secret comes from; this module builds the same ``Security`` from them, and holds the first-start
admin key rule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.security.apikeys import ApiKeys, ServerSecrets
from agentvm.security.auth import Authenticator
from agentvm.security.budgets import Budgets
from agentvm.security.ratelimit import RateLimiter
from agentvm.security.storage_quota import StorageQuota
from agentvm.security.tenant_limits import Limits, TenantLimits

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.config import Settings
    from agentvm.ports import BudgetStore, Clock, Counters, KeyStore
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.security")

DEFAULT_TENANT = "default"  # the tenant of the admin key `avm serve` creates on first start

# The names the AWS host's secret parameter may hold (those of the local environment variables).
SECRET_NAMES = ("AVM_AUTH_SECRET", "AVM_AUTH_SECRET_PREVIOUS")


@dataclass
class Security:
    auth: Authenticator | None  # None in the open dev mode
    budgets: Budgets
    rate_limiter: RateLimiter
    storage_quota: StorageQuota | None = None
    tenant_limits: TenantLimits | None = None
    counters: Counters | None = None

    def attach(self, rt: Runtime) -> None:
        rt.auth = self.auth
        rt.budgets = self.budgets
        self.budgets.read_sums_from(lambda: rt.usage)  # seeds new budgets; usage without one
        rt.rate_limiter = self.rate_limiter
        rt.storage_quota = self.storage_quota
        if self.tenant_limits is not None:
            self.tenant_limits.read_overrides_from(lambda: rt.tenants)  # the registry, set after this
        rt.tenant_limits = self.tenant_limits
        rt.counters = self.counters


def server_secrets(settings: Settings) -> ServerSecrets:
    """The HMAC secrets from ``AVM_AUTH_SECRET`` (+ ``AVM_AUTH_SECRET_PREVIOUS``); required."""
    if settings.auth_secret is None:
        raise ValueError("AVM_AUTH_SECRET is not set (at least 32 random bytes, e.g. `openssl rand -hex 32`)")
    previous = settings.auth_secret_previous
    return ServerSecrets(
        settings.auth_secret.get_secret_value().encode(),
        None if previous is None else previous.get_secret_value().encode(),
    )


class LazyServerSecrets:
    """``ServerSecrets`` built on first use: when a token is first hashed or checked.

    The AWS host reads its secret from SSM this way, so no function's cold start waits for SSM and
    KMS, and functions that never verify a token (``$connect``, ``$disconnect``, the worker)
    never read it. A failed load is not remembered: the next use tries again.
    """

    def __init__(self, load: Callable[[], ServerSecrets]) -> None:
        self._load = load
        self._secrets: ServerSecrets | None = None

    def __repr__(self) -> str:
        return "LazyServerSecrets(loaded)" if self._secrets is not None else "LazyServerSecrets(not loaded)"

    def _get(self) -> ServerSecrets:
        if self._secrets is None:
            self._secrets = self._load()
        return self._secrets

    @property
    def current_id(self) -> str:
        return self._get().current_id

    @property
    def previous_id(self) -> str | None:
        return self._get().previous_id

    def hash(self, token: str) -> str:
        return self._get().hash(token)

    def matches(self, token: str, secret_hash: str, secret_id: str) -> bool:
        return self._get().matches(token, secret_hash, secret_id)

    def newest_first(self) -> tuple[bytes, ...]:
        """The secrets, loaded on first use (``ServerSecrets.newest_first``; sealing keys are derived
        from them: ``configcentre.sealing``)."""
        return self._get().newest_first()


def build_security(
    settings: Settings,
    clock: Clock,
    *,
    keys: KeyStore,
    budgets: BudgetStore,
    counters: Counters,
    secrets_: ServerSecrets | LazyServerSecrets | None,
) -> Security:
    auth = None
    if secrets_ is not None:
        auth = Authenticator(ApiKeys(keys, secrets_, clock), clock, cache_s=settings.key_cache_s)
    tenant_limits = (
        None
        if auth is None
        else TenantLimits(  # the open dev mode has one tenant
            Limits(
                connections=settings.max_connections_per_tenant,
                api_keys=settings.max_api_keys_per_tenant,
                requests_per_minute=settings.tenant_rate_limit_per_minute,
                storage_bytes=settings.tenant_storage_bytes,
            ),
            clock,
            cache_s=settings.key_cache_s,
        )
    )
    return Security(
        auth=auth,
        budgets=Budgets(budgets, counters, clock),
        rate_limiter=RateLimiter(
            counters,
            clock,
            per_minute=settings.rate_limit_per_minute,
            unauthenticated_per_minute=settings.unauthenticated_frames_per_minute,
            lease_max=settings.rate_lease_max,
            tenant_limits=tenant_limits,
            unauthorized_per_minute=settings.unauthorized_per_minute,
        ),
        storage_quota=StorageQuota(
            counters, limit_bytes=settings.tenant_storage_bytes, tenant_limits=tenant_limits
        ),
        tenant_limits=tenant_limits,
        counters=counters,
    )


async def ensure_admin_key(auth: Authenticator, settings: Settings) -> str | None:
    """Make sure tenant ``default`` has an admin key; returns a new token to show once, else None.

    With ``AVM_ADMIN_KEY`` that token is stored (hashed) and nothing is returned. Otherwise a key
    is created when the store has no active admin key of tenant ``default`` (the first start).
    """
    if settings.admin_key is not None:
        record = await auth.keys.import_token(
            settings.admin_key.get_secret_value(), DEFAULT_TENANT, ["admin"], name="AVM_ADMIN_KEY"
        )
        if record.revokedAt is not None:
            log.warning("AVM_ADMIN_KEY names a revoked key; it will not authenticate")
        return None
    if await auth.keys.has_active(DEFAULT_TENANT, "admin"):
        return None
    _, token = await auth.keys.create(DEFAULT_TENANT, ["admin"], name="initial admin key")
    return token


__all__ = [
    "DEFAULT_TENANT",
    "LazyServerSecrets",
    "SECRET_NAMES",
    "Security",
    "build_security",
    "ensure_admin_key",
    "server_secrets",
]
