"""Composition of authentication, budgets and rate limits: which adapters each host uses for them.

``bootstrap`` wires the runtime; this module adds the security pieces to it. Local host:
``local_security(settings, clock)`` (SQLite in the data dir, the server secret from
``AVM_AUTH_SECRET`` or ``<data_dir>/auth_secret``). AWS host: ``aws_security(settings, clock)``
(the single DynamoDB table; ``AVM_AUTH_SECRET`` is required). Either result is attached to a
``Runtime`` with ``Security.attach``. Like bootstrap, nothing here does network I/O.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.core.apikeys import ApiKeys, ServerSecrets
from agentvm.core.auth import Authenticator
from agentvm.core.budgets import Budgets
from agentvm.core.ratelimit import RateLimiter

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.config import Settings
    from agentvm.core.runtime import Runtime
    from agentvm.ports import BudgetStore, Clock, Counters, KeyStore

log = logging.getLogger("agentvm.security")

DEFAULT_TENANT = "default"  # the tenant of the admin key `avm serve` creates on first start
SECRET_FILE = "auth_secret"


@dataclass
class Security:
    auth: Authenticator | None  # None in the open dev mode
    budgets: Budgets
    rate_limiter: RateLimiter

    def attach(self, rt: Runtime) -> None:
        rt.auth = self.auth
        rt.budgets = self.budgets
        rt.rate_limiter = self.rate_limiter


def server_secrets(settings: Settings) -> ServerSecrets:
    """The HMAC secrets from ``AVM_AUTH_SECRET`` (+ ``AVM_AUTH_SECRET_PREVIOUS``); required."""
    if settings.auth_secret is None:
        raise ValueError("AVM_AUTH_SECRET is not set (at least 32 random bytes, e.g. `openssl rand -hex 32`)")
    previous = settings.auth_secret_previous
    return ServerSecrets(
        settings.auth_secret.get_secret_value().encode(),
        None if previous is None else previous.get_secret_value().encode(),
    )


def local_server_secrets(settings: Settings) -> ServerSecrets:
    """``AVM_AUTH_SECRET`` if set, else ``<data_dir>/auth_secret``, generated (mode 0600) if missing."""
    if settings.auth_secret is not None:
        return server_secrets(settings)
    current = _read_or_create_secret(settings.data_dir / SECRET_FILE)
    previous = settings.auth_secret_previous
    return ServerSecrets(current, None if previous is None else previous.get_secret_value().encode())


def _read_or_create_secret(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning("the auth secret file is readable by others; chmod 600 it", extra={"path": str(path)})
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as f:  # O_EXCL: of two processes starting at once, one writes
        f.write(secrets.token_urlsafe(48).encode())
    log.info("generated a new auth secret", extra={"path": str(path)})
    return path.read_bytes().strip()


def _security(
    settings: Settings,
    clock: Clock,
    *,
    keys: KeyStore,
    budgets: BudgetStore,
    counters: Counters,
    secrets_: ServerSecrets | None,
) -> Security:
    auth = None
    if secrets_ is not None:
        auth = Authenticator(ApiKeys(keys, secrets_, clock), clock, cache_s=settings.key_cache_s)
    return Security(
        auth=auth,
        budgets=Budgets(budgets, counters, clock),
        rate_limiter=RateLimiter(counters, clock, per_minute=settings.rate_limit_per_minute),
    )


def local_security(settings: Settings, clock: Clock) -> Security:
    """SQLite key store, budgets and counters in ``<data_dir>/agentvm.db``; no authenticator when open."""
    from agentvm.adapters.sqlite_budgets import SqliteBudgetStore
    from agentvm.adapters.sqlite_counters import SqliteCounters
    from agentvm.adapters.sqlite_keys import SqliteKeyStore

    db = settings.data_dir / "agentvm.db"
    return _security(
        settings,
        clock,
        keys=SqliteKeyStore(db),
        budgets=SqliteBudgetStore(db),
        counters=SqliteCounters(db),
        secrets_=None if settings.open else local_server_secrets(settings),
    )


def aws_security(settings: Settings, clock: Clock) -> Security:
    """Key store, budgets and counters on the single table ``AVM_TABLE_NAME``; fails without a secret."""
    from agentvm.adapters.dynamodb_budgets import DynamoDbBudgetStore
    from agentvm.adapters.dynamodb_counters import DynamoDbCounters
    from agentvm.adapters.dynamodb_keys import DynamoDbKeyStore

    if not settings.table_name:
        raise ValueError("AVM_TABLE_NAME is not set")
    table = settings.table_name
    return _security(
        settings,
        clock,
        keys=DynamoDbKeyStore(table),
        budgets=DynamoDbBudgetStore(table),
        counters=DynamoDbCounters(table),
        secrets_=server_secrets(settings),
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
    "Security",
    "aws_security",
    "ensure_admin_key",
    "local_security",
    "local_server_secrets",
    "server_secrets",
]
