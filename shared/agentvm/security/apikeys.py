"""API keys: the token format, how tokens are hashed, and creating, listing and revoking keys.

A token is ``avm_<keyId>_<secret>``: ``keyId`` is 12 lowercase base36 characters (so verifying a
token is one point read of its key), ``secret`` is 32 random bytes in URL-safe base64 (43
characters). The token is shown once, when the key is created; only
``HMAC-SHA256(server secret, token)`` is stored, and tokens are compared with
``hmac.compare_digest``. Someone who reads the key store (a backup, a table export) learns no
usable token and cannot test guesses offline without the server secret.

Rotation: each stored hash names the secret that made it (``secretId``, an HMAC fingerprint of the
secret, not the secret). While ``AVM_AUTH_SECRET_PREVIOUS`` holds the old secret, keys hashed with
it still verify, and each is re-hashed under the new secret the first time it is used.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from typing import TYPE_CHECKING, Protocol, get_args

from agentvm.errors import BadRequest
from agentvm.records import ApiKeyRecord, Scope

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agentvm.ports import Clock, KeyStore

log = logging.getLogger("agentvm.apikeys")

SCOPES: frozenset[str] = frozenset(get_args(Scope))
KEY_ID_CHARS = 12
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_SECRET_BYTES = 32
# The secret is token_urlsafe(32): 43 characters of [A-Za-z0-9_-], which may include "_".
TOKEN_RE = re.compile(r"avm_([0-9a-z]{12})_([A-Za-z0-9_-]{43})")
TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MIN_SERVER_SECRET_BYTES = 32


def new_token() -> tuple[str, str]:
    """A fresh ``(keyId, token)``."""
    key_id = "".join(secrets.choice(_BASE36) for _ in range(KEY_ID_CHARS))
    return key_id, f"avm_{key_id}_{secrets.token_urlsafe(_SECRET_BYTES)}"


def key_id_of(token: str) -> str | None:
    """The ``keyId`` of a well-formed token, else None."""
    match = TOKEN_RE.fullmatch(token)
    return match.group(1) if match else None


def check_tenant_id(tenant_id: str) -> str:
    """Tenant ids are chosen by operators: 1-64 of ``[A-Za-z0-9._-]``, starting alphanumeric."""
    if not TENANT_RE.fullmatch(tenant_id):
        raise BadRequest(
            "tenant id must be 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit"
        )
    return tenant_id


def check_scopes(scopes: Iterable[str]) -> list[Scope]:
    chosen = sorted(set(scopes))
    if not chosen or not set(chosen) <= SCOPES:
        raise BadRequest(f"scopes must be a non-empty subset of {sorted(SCOPES)}")
    return chosen  # type: ignore[return-value]


class ServerSecrets:
    """The HMAC key(s) API key hashes are made with: the current one, and the previous while rotating."""

    def __init__(self, current: bytes, previous: bytes | None = None) -> None:
        for secret in (current, previous):
            if secret is not None and len(secret) < MIN_SERVER_SECRET_BYTES:
                raise ValueError(f"the auth secret must be at least {MIN_SERVER_SECRET_BYTES} bytes")
        self._current = current
        self._previous = previous
        self.current_id = self._fingerprint(current)
        self.previous_id = None if previous is None else self._fingerprint(previous)

    def __repr__(self) -> str:
        return f"ServerSecrets(current_id={self.current_id!r}, previous_id={self.previous_id!r})"

    def newest_first(self) -> tuple[bytes, ...]:
        """The secrets themselves, the current one first: what other keys are derived from
        (``configcentre.sealing``). Never log or store them."""
        return (self._current,) if self._previous is None else (self._current, self._previous)

    @staticmethod
    def _fingerprint(secret: bytes) -> str:
        return hmac.new(secret, b"agentvm auth secret id", hashlib.sha256).hexdigest()[:16]

    def hash(self, token: str) -> str:
        """The hex HMAC-SHA256 of ``token`` under the current secret (stored with ``current_id``)."""
        return hmac.new(self._current, token.encode(), hashlib.sha256).hexdigest()

    def matches(self, token: str, secret_hash: str, secret_id: str) -> bool:
        """Whether ``token`` is the one ``secret_hash`` was made from, by the secret ``secret_id`` names."""
        if secret_id == self.current_id:
            secret = self._current
        elif self._previous is not None and secret_id == self.previous_id:
            secret = self._previous
        else:
            return False  # hashed under a secret that is no longer configured
        digest = hmac.new(secret, token.encode(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(digest, secret_hash)


class _TokenSecrets(Protocol):
    """What ``ApiKeys`` uses of the secrets: ``ServerSecrets``, or ``setup.LazyServerSecrets``."""

    @property
    def current_id(self) -> str: ...
    def hash(self, token: str) -> str: ...
    def matches(self, token: str, secret_hash: str, secret_id: str) -> bool: ...


class ApiKeys:
    """Creating, importing, verifying, listing and revoking keys on a ``KeyStore`` (no caching here)."""

    def __init__(self, store: KeyStore, secrets: _TokenSecrets, clock: Clock) -> None:
        self.store = store
        self.secrets = secrets
        self._clock = clock

    async def create(
        self,
        tenant_id: str,
        scopes: Iterable[str],
        *,
        name: str | None = None,
        rate_limit_per_minute: int | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key; returns its record and the token (the only time the token exists in clear)."""
        key_id, token = new_token()
        record = self._record(key_id, token, tenant_id, scopes, name, rate_limit_per_minute)
        await self.store.put_key(record)
        return record, token

    async def import_token(
        self, token: str, tenant_id: str, scopes: Iterable[str], *, name: str | None = None
    ) -> ApiKeyRecord:
        """Store a token chosen by the operator (``AVM_ADMIN_KEY``), hashed. Idempotent.

        A key already stored under that ``keyId`` is kept as it is when the token matches it (and
        stays revoked if it was revoked); a different token with the same ``keyId`` is refused.
        """
        key_id = key_id_of(token)
        if key_id is None:
            raise BadRequest("not an AgentVM API key (expected avm_<12 base36 chars>_<43 base64url chars>)")
        existing = await self.store.get_key(key_id)
        if existing is not None:
            if not self.secrets.matches(token, existing.secretHash, existing.secretId):
                raise BadRequest(f"another key with id {key_id} exists already")
            return existing
        record = self._record(key_id, token, tenant_id, scopes, name, None)
        await self.store.put_key(record)
        return record

    async def verify(self, token: str) -> ApiKeyRecord | None:
        """The active key ``token`` belongs to, or None (malformed, unknown, wrong secret, revoked)."""
        key_id = key_id_of(token)
        if key_id is None:
            return None
        record = await self.store.get_key(key_id)
        if record is None or not self.check(token, record):
            return None
        return record

    def check(self, token: str, record: ApiKeyRecord) -> bool:
        """Whether ``token`` is ``record``'s token and the key is not revoked (no I/O)."""
        return record.revokedAt is None and self.secrets.matches(token, record.secretHash, record.secretId)

    async def rehash_if_stale(self, token: str, record: ApiKeyRecord) -> ApiKeyRecord:
        """After a verified use, move a key hashed under the previous secret to the current one."""
        if record.secretId == self.secrets.current_id:
            return record
        updated = record.model_copy(
            update={"secretHash": self.secrets.hash(token), "secretId": self.secrets.current_id}
        )
        try:
            await self.store.put_key(updated)
        except Exception:  # best effort: the key keeps working under the previous secret
            log.warning(
                "could not re-hash an API key under the current secret", extra={"key_id": record.keyId}
            )
            return record
        return updated

    async def list(self, tenant_id: str) -> list[ApiKeyRecord]:
        return await self.store.list_keys(tenant_id)

    async def revoke(self, key_id: str, *, tenant_id: str | None = None) -> ApiKeyRecord | None:
        return await self.store.revoke_key(key_id, revoked_at=self._clock.now_ms(), tenant_id=tenant_id)

    async def has_active(self, tenant_id: str, scope: str) -> bool:
        return any(k.revokedAt is None and scope in k.scopes for k in await self.store.list_keys(tenant_id))

    def _record(
        self,
        key_id: str,
        token: str,
        tenant_id: str,
        scopes: Iterable[str],
        name: str | None,
        rate_limit_per_minute: int | None,
    ) -> ApiKeyRecord:
        if name is not None and len(name) > 200:
            raise BadRequest("name must be at most 200 characters")
        if rate_limit_per_minute is not None and rate_limit_per_minute < 0:
            raise BadRequest("rate_limit_per_minute must be >= 0")
        return ApiKeyRecord(
            keyId=key_id,
            tenantId=check_tenant_id(tenant_id),
            scopes=check_scopes(scopes),
            name=name,
            secretHash=self.secrets.hash(token),
            secretId=self.secrets.current_id,
            createdAt=self._clock.now_ms(),
            rateLimitPerMinute=rate_limit_per_minute,
        )


__all__ = [
    "KEY_ID_CHARS",
    "SCOPES",
    "TOKEN_RE",
    "ApiKeys",
    "ServerSecrets",
    "check_scopes",
    "check_tenant_id",
    "key_id_of",
    "new_token",
]
