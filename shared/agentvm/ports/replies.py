"""The reply-cache port: replies to images' common first questions, kept per tenant
(``turns/reply_cache.py`` decides what may be cached and under which key).

A store is **direct-mapped**: a key hashes to one of ``slots`` slots of its tenant, and a put
overwrites whatever that slot held. So a tenant never holds more than ``slots`` entries (its bound,
with no count to keep), a get or a put is one read or one write, and a collision only costs a miss.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

DEFAULT_REPLY_SLOTS = 1024  # entries a tenant may hold, at most
DEFAULT_REPLY_TTL_S = 86_400  # how long a cached reply is served, unless the image says
MAX_REPLY_TTL_S = 30 * 86_400


@dataclass(frozen=True)
class CachedReply:
    """One cached reply: its text, and the tokens the model call that wrote it cost (what a hit
    saves). ``expires_at`` in epoch ms: a get after it finds nothing."""

    key: str  # the cache key (a digest: turns/reply_cache.py), unique within the tenant
    text: str
    model: str  # "provider/model" that wrote it
    input_tokens: int
    output_tokens: int
    created_at: int
    expires_at: int


class ReplyCache(Protocol):
    """Cached replies by ``(tenant, key)``: a tenant reads only its own."""

    async def get(self, tenant_id: str, key: str, *, now_ms: int) -> CachedReply | None:
        """The tenant's reply under ``key``, if one is stored and not expired at ``now_ms``."""
        ...

    async def put(self, tenant_id: str, reply: CachedReply) -> None:
        """Store ``reply`` under ``reply.key`` (evicting what held its slot)."""
        ...


def reply_slot(key: str, slots: int) -> int:
    """The slot of ``key`` among a tenant's ``slots`` (stable across processes and hosts)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % slots


__all__ = [
    "DEFAULT_REPLY_SLOTS",
    "DEFAULT_REPLY_TTL_S",
    "MAX_REPLY_TTL_S",
    "CachedReply",
    "ReplyCache",
    "reply_slot",
]
