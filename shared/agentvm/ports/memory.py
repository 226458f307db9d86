"""The memory port: what an agent keeps about its end user (or about all its users) across sessions.

An item belongs to one tenant and one **scope**: ``container:<containerId>`` (one end user's memory,
shared by every image and session of their container) or ``image:<name>`` (what an agent keeps
for all the tenant's end users of images of that name). Items are written by the memory tools
(``agent/tools/memory.py``: ``remember``, ``forget``), by the tenant's API or by the end user
(``api/memory.py``); nothing else writes them. docs/memory.md says what is stored and why.

A scope holds at most ``MemoryLimits.max_items`` items and ``max_bytes`` bytes (text and topic,
UTF-8). The adapters enforce both in the write itself (SQLite: one writer; PostgreSQL: a
transaction holding the scope's advisory lock; DynamoDB: a transaction with the scope's usage
item), so racing writers cannot pass them together: a write past either is ``MemoryFull``.

``add`` is idempotent by the item's id: the memory tools derive it from the turn's tool call
(``memory_id_for``), so a retried ``remember`` finds its item stored and stores nothing twice.

Recall is by words: an item matches a query when it holds any of the query's words (its text or
its topic, case-insensitive, whole words: ``memory_words``), best matches first; a query with no
words recalls the most recently updated items.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentvm.errors import MemoryFull

MemorySource = Literal["tool", "api", "user"]  # the memory tools, the tenant's API, the end user
MEMORY_SOURCES: tuple[str, ...] = ("tool", "api", "user")
DEFAULT_MAX_ITEMS = 500  # items per scope
DEFAULT_MAX_BYTES = 256 * 1024  # text and topic bytes per scope
MAX_TEXT_CHARS = 4000  # one item's text
MAX_TOPIC_CHARS = 200
DEFAULT_RECALL_LIMIT = 5
MAX_RECALL_LIMIT = 50
MAX_QUERY_WORDS = 16
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """How much one scope may hold."""

    max_items: int = DEFAULT_MAX_ITEMS
    max_bytes: int = DEFAULT_MAX_BYTES


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One remembered thing. ``topic``: an optional key to group or find it by."""

    id: str
    tenant_id: str
    scope: str  # "container:<id>" | "image:<name>"
    text: str
    topic: str | None
    source: str  # MemorySource
    created_at: int  # epoch ms
    updated_at: int

    @property
    def size(self) -> int:
        """The bytes the item counts against its scope and its tenant's storage."""
        return item_size(self.text, self.topic)

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope,
            "topic": self.topic,
            "text": self.text,
            "source": self.source,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


class MemoryStore(Protocol):
    """Memory items by ``(tenant, scope, id)``: a tenant reads and writes only its own."""

    async def add(self, item: MemoryItem, limits: MemoryLimits) -> tuple[MemoryItem, bool]:
        """Store ``item`` unless its id is stored already: ``(the stored item, True if it was
        added now)``. ``MemoryFull`` when the scope would pass ``limits`` (nothing stored)."""
        ...

    async def get(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None: ...

    async def edit(
        self,
        tenant_id: str,
        scope: str,
        memory_id: str,
        *,
        text: str,
        topic: str | None,
        now_ms: int,
        limits: MemoryLimits,
    ) -> tuple[MemoryItem, MemoryItem] | None:
        """Replace an item's text and topic: ``(before, after)``, None if there is no such item.
        ``MemoryFull`` when the scope would pass ``limits.max_bytes``."""
        ...

    async def delete(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem | None:
        """Delete an item: the item deleted, None if there was none."""
        ...

    async def items(self, tenant_id: str, scope: str) -> list[MemoryItem]:
        """The scope's items, oldest first (at most its ``max_items``: no paging needed)."""
        ...

    async def recall(self, tenant_id: str, scope: str, query: str, *, limit: int) -> list[MemoryItem]:
        """At most ``limit`` items matching ``query`` (see the module), best first."""
        ...

    async def usage(self, tenant_id: str, scope: str) -> tuple[int, int]:
        """``(items, bytes)`` the scope holds."""
        ...

    async def clear(self, tenant_id: str, scope: str) -> tuple[int, int]:
        """Delete every item of the scope: ``(items, bytes)`` deleted."""
        ...


def item_size(text: str, topic: str | None) -> int:
    return len(text.encode()) + len((topic or "").encode())


def check_memory_room(items: int, size: int, limits: MemoryLimits, *, held: int, used: int) -> None:
    """``MemoryFull`` unless a scope that would hold ``items`` items of ``size`` bytes is within
    ``limits`` (``held``, ``used``: what it holds now, for the error)."""
    if items > limits.max_items:
        raise MemoryFull(
            f"this memory holds {held} items, its limit: forget one first",
            limit=limits.max_items,
            used=held,
            what="items",
        )
    if size > limits.max_bytes:
        raise MemoryFull(
            f"this memory would hold {size} bytes, over its limit of {limits.max_bytes}:"
            " forget something first",
            limit=limits.max_bytes,
            used=used,
            what="bytes",
        )


def memory_words(query: str) -> list[str]:
    """The words a query recalls by: lower-cased, distinct, in order, at most ``MAX_QUERY_WORDS``."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(query))
    return list(words)[:MAX_QUERY_WORDS]


def ranked_by_words(items: list[MemoryItem], query: str, *, limit: int) -> list[MemoryItem]:
    """Recall in process (DynamoDB, and the reference for the others): items holding any of the
    query's words, those holding more of them first, then the most recently updated; no words:
    the most recently updated."""
    words = memory_words(query)
    newest = sorted(items, key=lambda i: (i.updated_at, i.id), reverse=True)
    if not words:
        return newest[:limit]
    scored = []
    for item in newest:
        held = set(memory_words(f"{item.topic or ''} {item.text}"))
        hits = sum(1 for w in words if w in held)
        if hits:
            scored.append((hits, item))
    scored.sort(key=lambda pair: pair[0], reverse=True)  # stable: newest first among equals
    return [item for _, item in scored[:limit]]


def memory_id_for(tenant_id: str, scope: str, origin: str) -> str:
    """A stable item id for a write that may be retried (``origin``: the tool call that made it)."""
    digest = hashlib.sha256(f"{tenant_id}\0{scope}\0{origin}".encode()).hexdigest()
    return f"mem_{digest[:24]}"


def container_scope(container_id: str) -> str:
    return f"container:{container_id}"


def image_scope(image_name: str) -> str:
    return f"image:{image_name}"


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_RECALL_LIMIT",
    "MAX_QUERY_WORDS",
    "MAX_RECALL_LIMIT",
    "MAX_TEXT_CHARS",
    "MAX_TOPIC_CHARS",
    "MEMORY_SOURCES",
    "MemoryItem",
    "MemoryLimits",
    "MemorySource",
    "MemoryStore",
    "check_memory_room",
    "container_scope",
    "image_scope",
    "item_size",
    "memory_id_for",
    "memory_words",
    "ranked_by_words",
]
