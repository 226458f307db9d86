"""Agent memory, the use cases: remember, recall, edit, forget, list, export and clear the items of
one scope (``ports/memory.py``), for the memory tools (``agent/tools/memory.py``) and the HTTP
routes (``api/memory.py``) alike.

It checks what is written (text 1 to ``MAX_TEXT_CHARS`` characters, topic at most
``MAX_TOPIC_CHARS``), derives a retried tool call's item id from the call (so it is stored once),
and keeps the tenant's storage account (``security/storage_quota.py``) in step: a write first
reserves its bytes (``storage_quota_exceeded`` when the tenant is full), and gives them back when it
stores nothing (a retry, a full scope); an edit reserves its growth and gives back its shrink; a
forget or clear gives back what it deleted. The scope's own limits are the store's to enforce
(``memory_full``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.errors import BadRequest, NotFound
from agentvm.ports import (
    DEFAULT_RECALL_LIMIT,
    MAX_RECALL_LIMIT,
    MAX_TEXT_CHARS,
    MAX_TOPIC_CHARS,
    MemoryItem,
    MemoryLimits,
    item_size,
    memory_id_for,
)

if TYPE_CHECKING:
    from agentvm.ports import Clock, Ids, MemoryStore, StorageAccount
    from agentvm.runtime import Runtime


def clean_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise BadRequest("text: must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise BadRequest(f"text: at most {MAX_TEXT_CHARS} characters")
    return text.strip()


def clean_topic(topic: Any) -> str | None:
    if topic is None:
        return None
    if not isinstance(topic, str):
        raise BadRequest("topic: must be a string")
    if len(topic) > MAX_TOPIC_CHARS:
        raise BadRequest(f"topic: at most {MAX_TOPIC_CHARS} characters")
    return topic.strip() or None


def recall_limit(limit: Any) -> int:
    if limit is None:
        return DEFAULT_RECALL_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECALL_LIMIT:
        raise BadRequest(f"limit: an integer from 1 to {MAX_RECALL_LIMIT}")
    return limit


def memory_of(rt: Runtime) -> Memory | None:
    """The runtime's memory (None: this host keeps none)."""
    if rt.memory is None:
        return None
    return Memory(rt.memory, clock=rt.clock, ids=rt.ids, limits=rt.memory_limits, storage=rt.storage_quota)


class Memory:
    """One host's memory: its store, the scope limits, and the tenants' storage account."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        clock: Clock,
        ids: Ids,
        limits: MemoryLimits | None = None,
        storage: StorageAccount | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or MemoryLimits()
        self._clock = clock
        self._ids = ids
        self._storage = storage

    async def remember(
        self,
        tenant_id: str,
        scope: str,
        text: Any,
        *,
        topic: Any = None,
        source: str,
        origin: str | None = None,
    ) -> tuple[MemoryItem, bool]:
        """Store a new item: ``(the item, True)``; ``origin`` (a tool call) makes its id stable,
        and a second write of one origin returns the first's item with False."""
        text, topic = clean_text(text), clean_topic(topic)
        now = self._clock.now_ms()
        memory_id = memory_id_for(tenant_id, scope, origin) if origin else self._ids.new("mem")
        if origin:  # a retry finds its item before it reserves (a full tenant's retry still answers)
            held = await self.store.get(tenant_id, scope, memory_id)
            if held is not None:
                return held, False
        item = MemoryItem(memory_id, tenant_id, scope, text, topic, source, now, now)
        taken = await self._reserve(tenant_id, item.size)
        try:
            stored, added = await self.store.add(item, self.limits)
        except Exception:  # refused or failed: nothing stored (a cancelled write may have been)
            await self._give_back(tenant_id, taken)
            raise
        if not added:
            await self._give_back(tenant_id, taken)
        return stored, added

    async def get(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem:
        item = await self.store.get(tenant_id, scope, memory_id)
        if item is None:
            raise NotFound(f"Memory not found: {memory_id}")
        return item

    async def edit(
        self, tenant_id: str, scope: str, memory_id: str, *, text: Any = None, topic: Any = ...
    ) -> MemoryItem:
        """Change an item's text and/or topic (``topic`` left out: kept; None: removed)."""
        current = await self.get(tenant_id, scope, memory_id)
        new_text = current.text if text is None else clean_text(text)
        new_topic = current.topic if topic is ... else clean_topic(topic)
        grow = item_size(new_text, new_topic) - current.size
        taken = await self._reserve(tenant_id, grow) if grow > 0 else 0
        try:
            changed = await self.store.edit(
                tenant_id,
                scope,
                memory_id,
                text=new_text,
                topic=new_topic,
                now_ms=self._clock.now_ms(),
                limits=self.limits,
            )
        except Exception:  # refused or failed: nothing stored (a cancelled write may have been)
            await self._give_back(tenant_id, taken)
            raise
        if changed is None:
            await self._give_back(tenant_id, taken)
            raise NotFound(f"Memory not found: {memory_id}")
        before, after = changed
        # what the item grew by as the store read it (a racing edit may have differed): the rest of
        # the reservation goes back, and a shrink gives back what it freed
        await self._give_back(tenant_id, taken - (after.size - before.size))
        return after

    async def forget(self, tenant_id: str, scope: str, memory_id: str) -> MemoryItem:
        item = await self.store.delete(tenant_id, scope, memory_id)
        if item is None:
            raise NotFound(f"Memory not found: {memory_id}")
        await self._give_back(tenant_id, item.size)
        return item

    async def recall(self, tenant_id: str, scope: str, query: Any, *, limit: Any = None) -> list[MemoryItem]:
        if not isinstance(query, str):
            raise BadRequest("query: must be a string")
        return await self.store.recall(tenant_id, scope, query[:1000], limit=recall_limit(limit))

    async def items(self, tenant_id: str, scope: str) -> list[MemoryItem]:
        return await self.store.items(tenant_id, scope)

    async def export(self, tenant_id: str, scope: str) -> dict[str, Any]:
        """Everything the scope holds, as JSON (``GET .../memory/export``, session exports)."""
        items = await self.store.items(tenant_id, scope)
        return {
            "scope": scope,
            "exportedAt": self._clock.now_ms(),
            "items": [i.to_wire() for i in items],
        }

    async def usage(self, tenant_id: str, scope: str) -> dict[str, int]:
        count, used = await self.store.usage(tenant_id, scope)
        return {
            "items": count,
            "bytes": used,
            "maxItems": self.limits.max_items,
            "maxBytes": self.limits.max_bytes,
        }

    async def clear(self, tenant_id: str, scope: str) -> int:
        """Forget everything the scope holds; how many items that was."""
        count, freed = await self.store.clear(tenant_id, scope)
        await self._give_back(tenant_id, freed)
        return count

    async def _reserve(self, tenant_id: str, size: int) -> int:
        return 0 if self._storage is None else await self._storage.reserve(tenant_id, size)

    async def _give_back(self, tenant_id: str, size: int) -> None:
        if self._storage is not None and size > 0:
            await self._storage.give_back(tenant_id, size)


__all__ = ["Memory", "clean_text", "clean_topic", "memory_of", "recall_limit"]
