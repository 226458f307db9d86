"""Who is calling: ``Principal`` and the ``Authenticator`` every host and route uses.

Credentials are an API key (see ``agentvm.security.apikeys``) presented as ``Authorization: Bearer
<token>`` (HTTP, WebSocket upgrade, or the ``auth`` frame's ``headers``) or ``?token=<token>`` on
the WebSocket URL. Every failure reads the same (``unauthorized``, "invalid API key"), whether the
key is malformed, unknown, revoked, another tenant's id with a wrong secret, or simply wrong.

Revocation bound: a verified key is cached in-process for at most ``cache_s`` seconds (default
30, never more than 60), so a key revoked elsewhere (another process, the CLI) stops working
within ``cache_s``; revoking through this process's ``revoke`` takes effect at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.errors import Unauthorized
from agentvm.security.apikeys import key_id_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.ports import Clock
    from agentvm.records import ApiKeyRecord
    from agentvm.security.apikeys import ApiKeys

log = logging.getLogger("agentvm.auth")

MAX_CACHE_S = 60.0
_MAX_CACHED_KEYS = 10_000
INVALID_KEY = "invalid API key"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. ``key_id`` is None only in the open dev mode."""

    tenant_id: str
    key_id: str | None
    scopes: frozenset[str]
    rate_limit_per_minute: int | None = None  # the key's own limit; None = the server default

    def allows(self, scope: str) -> bool:
        """``admin`` includes everything ``client`` may do."""
        return "admin" in self.scopes or scope in self.scopes

    @classmethod
    def of(cls, record: ApiKeyRecord) -> Principal:
        return cls(
            tenant_id=record.tenantId,
            key_id=record.keyId,
            scopes=frozenset(record.scopes),
            rate_limit_per_minute=record.rateLimitPerMinute,
        )


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer`` header (any case), None if there is no such header."""
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <API key>'")
    return token.strip()


class Authenticator:
    def __init__(self, keys: ApiKeys, clock: Clock, *, cache_s: float = 30.0) -> None:
        if not 0 <= cache_s <= MAX_CACHE_S:
            raise ValueError(f"cache_s must be between 0 and {MAX_CACHE_S} (the revocation bound)")
        self.keys = keys
        self._clock = clock
        self.cache_s = cache_s
        self._cache: dict[str, tuple[float, ApiKeyRecord]] = {}  # keyId -> (fetched at, record)

    async def authenticate(self, token: str) -> Principal:
        """The principal of ``token``; raises ``Unauthorized`` for any bad token."""
        cached = self._cached(token)
        if cached is not None:
            return Principal.of(cached)
        record = await self.keys.verify(token)
        if record is None:
            raise Unauthorized(INVALID_KEY)
        record = await self.keys.rehash_if_stale(token, record)
        self._remember(record)
        return Principal.of(record)

    async def from_headers(self, headers: Mapping[str, str]) -> Principal | None:
        """None without an ``Authorization`` header; raises ``Unauthorized`` for a bad one."""
        token = bearer_token(headers)
        return None if token is None else await self.authenticate(token)

    async def from_query(self, query: Mapping[str, str]) -> Principal | None:
        """None without a ``token`` parameter; raises ``Unauthorized`` for a bad one."""
        token = query.get("token")
        if token is None:
            return None
        return await self.authenticate(token)

    async def from_request(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Principal | None:
        """A WebSocket upgrade (local ``/ws``, AWS ``$connect``): the header, else ``?token=``.

        None without credentials (the connection may still send an ``auth`` frame); raises
        ``Unauthorized`` for bad ones, or for a key whose scopes do not include ``client``.
        """
        principal = await self.from_headers(headers)
        if principal is None:
            principal = await self.from_query(query)
        if principal is not None and not principal.allows("client"):
            raise Unauthorized("this API key may not use the WebSocket protocol")
        return principal

    async def principal(self, key_id: str) -> Principal:
        """Re-check the key of a live connection (cached like ``authenticate``): raises once revoked."""
        now = self._clock.monotonic()
        entry = self._cache.get(key_id)
        if entry is not None and now - entry[0] < self.cache_s:
            return Principal.of(entry[1])
        record = await self.keys.store.get_key(key_id)
        if record is None or record.revokedAt is not None:
            self._cache.pop(key_id, None)
            raise Unauthorized(INVALID_KEY)
        self._remember(record)
        return Principal.of(record)

    async def revoke(self, key_id: str, *, tenant_id: str | None = None) -> ApiKeyRecord | None:
        """Revoke a key (only a key of ``tenant_id`` when given); effective at once in this process."""
        record = await self.keys.revoke(key_id, tenant_id=tenant_id)
        if record is not None:
            self.forget(key_id)
        return record

    def recently_verified(self, headers: Mapping[str, str]) -> bool:
        """Whether the request's bearer key is one this process verified within ``cache_s`` (no I/O:
        a dictionary look-up, and one HMAC for a known key id). Lets a good key through while its
        address is refused for a flood of bad ones."""
        try:
            token = bearer_token(headers)
            return token is not None and self._cached(token) is not None
        except Unauthorized:
            return False

    def forget(self, key_id: str) -> None:
        self._cache.pop(key_id, None)

    def _cached(self, token: str) -> ApiKeyRecord | None:
        key_id = key_id_of(token)
        entry = None if key_id is None else self._cache.get(key_id)
        if entry is None or self._clock.monotonic() - entry[0] >= self.cache_s:
            return None
        if not self.keys.check(token, entry[1]):
            raise Unauthorized(INVALID_KEY)  # a known key id with a wrong secret
        return entry[1]

    def _remember(self, record: ApiKeyRecord) -> None:
        if self.cache_s <= 0:
            return
        if len(self._cache) >= _MAX_CACHED_KEYS:
            self._cache.pop(next(iter(self._cache)))  # oldest first: dicts keep insertion order
        self._cache.pop(record.keyId, None)
        self._cache[record.keyId] = (self._clock.monotonic(), record)


__all__ = ["INVALID_KEY", "MAX_CACHE_S", "Authenticator", "Principal", "bearer_token"]
