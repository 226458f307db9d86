"""Who may do what: API keys, authentication, tenants, token budgets, rate limits, per-tenant
limits and the storage account.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.security.apikeys import (
        KEY_ID_CHARS,
        SCOPES,
        TOKEN_RE,
        ApiKeys,
        ServerSecrets,
        check_scopes,
        check_tenant_id,
        key_id_of,
        new_token,
    )
    from agentvm.security.auth import (
        INVALID_KEY,
        MAX_CACHE_S,
        Authenticator,
        Principal,
        bearer_token,
    )
    from agentvm.security.budgets import (
        BudgetedModelClient,
        Budgets,
        Limit,
        Scope,
        Windows,
        binding,
        counted_scopes,
        has_limits,
        usage_key,
    )
    from agentvm.security.ratelimit import (
        RateLimiter,
    )
    from agentvm.security.setup import (
        DEFAULT_TENANT,
        SECRET_NAMES,
        LazyServerSecrets,
        Security,
        build_security,
        ensure_admin_key,
        server_secrets,
    )
    from agentvm.security.storage_quota import (
        StorageQuota,
        image_size,
    )
    from agentvm.security.tenant_limits import (
        Limits,
        TenantLimits,
        connection_cap,
    )
    from agentvm.security.tenants import (
        LISTED,
        RESERVED_IDS,
        check_new_id,
        delete,
        every,
        get,
        listing,
        refuse_deleted,
        register,
        update,
    )

__all__ = [
    "ApiKeys",
    "Authenticator",
    "BudgetedModelClient",
    "Budgets",
    "DEFAULT_TENANT",
    "INVALID_KEY",
    "KEY_ID_CHARS",
    "LISTED",
    "LazyServerSecrets",
    "Limit",
    "Limits",
    "MAX_CACHE_S",
    "Principal",
    "RESERVED_IDS",
    "RateLimiter",
    "SCOPES",
    "SECRET_NAMES",
    "Scope",
    "Security",
    "ServerSecrets",
    "StorageQuota",
    "TOKEN_RE",
    "TenantLimits",
    "Windows",
    "bearer_token",
    "binding",
    "build_security",
    "check_new_id",
    "check_scopes",
    "check_tenant_id",
    "connection_cap",
    "counted_scopes",
    "delete",
    "ensure_admin_key",
    "every",
    "get",
    "has_limits",
    "image_size",
    "key_id_of",
    "listing",
    "new_token",
    "refuse_deleted",
    "register",
    "server_secrets",
    "update",
    "usage_key",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "apikeys": [
            "ApiKeys",
            "KEY_ID_CHARS",
            "SCOPES",
            "ServerSecrets",
            "TOKEN_RE",
            "check_scopes",
            "check_tenant_id",
            "key_id_of",
            "new_token",
        ],
        "auth": [
            "Authenticator",
            "INVALID_KEY",
            "MAX_CACHE_S",
            "Principal",
            "bearer_token",
        ],
        "budgets": [
            "BudgetedModelClient",
            "Budgets",
            "Limit",
            "Scope",
            "Windows",
            "binding",
            "counted_scopes",
            "has_limits",
            "usage_key",
        ],
        "ratelimit": [
            "RateLimiter",
        ],
        "setup": [
            "DEFAULT_TENANT",
            "LazyServerSecrets",
            "SECRET_NAMES",
            "Security",
            "build_security",
            "ensure_admin_key",
            "server_secrets",
        ],
        "storage_quota": [
            "StorageQuota",
            "image_size",
        ],
        "tenant_limits": [
            "Limits",
            "TenantLimits",
            "connection_cap",
        ],
        "tenants": [
            "LISTED",
            "RESERVED_IDS",
            "check_new_id",
            "delete",
            "every",
            "get",
            "listing",
            "refuse_deleted",
            "register",
            "update",
        ],
    },
)
