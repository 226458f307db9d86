"""Composition of authentication, budgets and rate limits: which adapters each host uses for them.

``bootstrap`` wires the runtime; this module adds the security pieces to it. Local host:
``local_security(settings, clock)`` (SQLite in the data dir, the server secret from
``AVM_AUTH_SECRET`` or ``<data_dir>/auth_secret``). AWS host: ``aws_security(settings, clock)``
(the single DynamoDB table; the server secret from the SSM SecureString named by
``AVM_AUTH_SECRET_PARAMETER``, read when a token is first hashed or checked). Either result is
attached to a ``Runtime`` with ``Security.attach``. Like bootstrap, nothing here does network I/O.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.core.apikeys import ApiKeys, ServerSecrets
from agentvm.core.auth import Authenticator
from agentvm.core.budgets import Budgets
from agentvm.core.ratelimit import RateLimiter

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agentvm.config import Settings
    from agentvm.core.runtime import Runtime
    from agentvm.ports import BudgetStore, Clock, Counters, KeyStore

log = logging.getLogger("agentvm.security")

DEFAULT_TENANT = "default"  # the tenant of the admin key `avm serve` creates on first start
SECRET_FILE = "auth_secret"
# The names the AWS host's secret parameter may hold (those of the local environment variables).
SECRET_NAMES = ("AVM_AUTH_SECRET", "AVM_AUTH_SECRET_PREVIOUS")


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


def ssm_server_secrets(name: str, *, ssm_client: Any = None) -> ServerSecrets:
    """The server secrets in the SecureString ``name``: ``{"AVM_AUTH_SECRET": "...", ...}``.

    ``AVM_AUTH_SECRET_PREVIOUS`` is optional (while rotating). Errors and logs name the
    parameter and the names it holds, never a value.
    """
    from agentvm.bootstrap import read_ssm_json

    values = read_ssm_json(name, ssm_client=ssm_client, holding='{"AVM_AUTH_SECRET": "<at least 32 bytes>"}')
    unknown = sorted(set(values) - set(SECRET_NAMES))
    if unknown:
        log.warning("ignoring unknown names in the auth secret parameter", extra={"names": unknown})
    current, previous = (values.get(n) for n in SECRET_NAMES)
    if not isinstance(current, str) or not isinstance(previous, str | None):
        raise RuntimeError(
            f"SSM parameter {name} must hold AVM_AUTH_SECRET (and AVM_AUTH_SECRET_PREVIOUS): strings"
        )
    secrets_ = ServerSecrets(current.encode(), previous.encode() if previous else None)
    log.info("auth secret loaded", extra={"parameter": name, "names": sorted(set(values) - set(unknown))})
    return secrets_


def _not_configured() -> ServerSecrets:
    raise RuntimeError("this function has no AVM_AUTH_SECRET_PARAMETER: add it in template.yaml")


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
    secrets_: ServerSecrets | LazyServerSecrets | None,
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


def aws_security(settings: Settings, clock: Clock, *, ssm_client: Any = None) -> Security:
    """Key store, budgets and counters on the single table ``AVM_TABLE_NAME``; always authenticates.

    The server secret: ``AVM_AUTH_SECRET`` when set (tests, tooling), else the SecureString named by
    ``AVM_AUTH_SECRET_PARAMETER``, read on first use (``LazyServerSecrets``; no network I/O here).
    A function given neither still gets an authenticator, whose first token check fails: there is
    no unauthenticated mode on AWS. Counter windows expire by ``clock``, like budgets and limits.
    """
    from agentvm.adapters.dynamodb_budgets import DynamoDbBudgetStore
    from agentvm.adapters.dynamodb_counters import DynamoDbCounters
    from agentvm.adapters.dynamodb_keys import DynamoDbKeyStore

    if not settings.table_name:
        raise ValueError("AVM_TABLE_NAME is not set")
    table = settings.table_name
    secrets_: ServerSecrets | LazyServerSecrets
    if settings.auth_secret is not None:
        secrets_ = server_secrets(settings)
    elif settings.auth_secret_parameter:
        name = settings.auth_secret_parameter
        secrets_ = LazyServerSecrets(lambda: ssm_server_secrets(name, ssm_client=ssm_client))
    else:
        secrets_ = LazyServerSecrets(_not_configured)
    return _security(
        settings,
        clock,
        keys=DynamoDbKeyStore(table),
        budgets=DynamoDbBudgetStore(table),
        counters=DynamoDbCounters(table, now=lambda: clock.now_ms() / 1000),
        secrets_=secrets_,
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
    "Security",
    "aws_security",
    "ensure_admin_key",
    "local_security",
    "local_server_secrets",
    "server_secrets",
    "ssm_server_secrets",
]
