"""The reply-cache port: replies to images' common first questions, kept per tenant
(``turns/reply_cache.py`` decides what may be cached and under which key).

A store is **two-way set-associative**: a key hashes to one set of its tenant's ``slots // 2``
sets, each of two ways; a put takes the way that holds the same key, else an empty or expired one,
else the older one (``way_for``). So a tenant never holds more than ``slots`` entries (its bound,
with no count to keep), a get is one read of a set (two small rows or items), a put one read and
one write, and two popular questions that hash to one set do not evict each other (a direct-mapped
store lost ~1 in 100 hits to that in ``benchmarks/reply_cache.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_REPLY_SLOTS = 1024  # entries a tenant may hold, at most
DEFAULT_REPLY_TTL_S = 86_400  # how long a cached reply is served, unless the image says
MAX_REPLY_TTL_S = 30 * 86_400
REPLY_WAYS = 2


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
        """Store ``reply`` under ``reply.key`` (replacing the key's reply, or evicting the older
        reply of its set when both ways are taken)."""
        ...


def reply_set(key: str, slots: int) -> int:
    """The set of ``key`` among a tenant's ``slots // REPLY_WAYS`` sets (stable across processes
    and hosts)."""
    sets = max(slots // REPLY_WAYS, 1)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % sets


def way_for(held: Mapping[int, CachedReply], key: str, *, now_ms: int) -> int:
    """The way a put of ``key`` takes, given what the set's ways hold now (by way): the key's own,
    else an empty one, else an expired one, else the older reply's."""
    for way, reply in held.items():
        if reply.key == key:
            return way
    for way in range(REPLY_WAYS):
        if way not in held:
            return way
    return min(held, key=lambda way: (held[way].expires_at > now_ms, held[way].created_at))


__all__ = [
    "CachedReply",
    "DEFAULT_REPLY_SLOTS",
    "DEFAULT_REPLY_TTL_S",
    "MAX_REPLY_TTL_S",
    "REPLY_WAYS",
    "ReplyCache",
    "reply_set",
    "way_for",
]
