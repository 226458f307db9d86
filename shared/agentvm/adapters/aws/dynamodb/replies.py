"""The ``ReplyCache`` port on DynamoDB: two-way set-associative slots in the tenant's own partition
(``ports/replies.py``).

=============  ========================  ================  ===========================================
item           pk                        sk                attributes
=============  ========================  ================  ===========================================
cached reply   ``REPLY#<tenant>``        ``<set>#<way>``   cacheKey, text, model, inputTokens,
                                                           outputTokens, createdAt, expiresAtMs,
                                                           expiresAt (TTL)
=============  ========================  ================  ===========================================

A get is one strongly consistent Query of the key's set (``begins_with(<set>#)``: two items at most,
0.5 RCU for replies under 4 KB; the stored key and expiry re-checked, as DynamoDB deletes expired
items lazily, up to two days late). A put is that Query, then one PutItem on the way ``way_for``
picks. A tenant holds ``slots`` items at most, whatever it asks: no count to keep, no scan to evict.
The item's TTL is the entry's own expiry, so DynamoDB clears what nobody reads.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.ports import DEFAULT_REPLY_SLOTS, CachedReply, reply_set, way_for

PREFIX = "REPLY#"


class ReplyItem(TableItem):
    cacheKey = UnicodeAttribute()
    text = UnicodeAttribute()
    model = UnicodeAttribute()
    inputTokens = NumberAttribute()
    outputTokens = NumberAttribute()
    createdAt = NumberAttribute()
    expiresAtMs = NumberAttribute()


def reply_pk(tenant_id: str) -> str:
    return f"{PREFIX}{tenant_id}"


def _reply(item: ReplyItem) -> CachedReply:
    return CachedReply(
        key=item.cacheKey,
        text=item.text,
        model=item.model,
        input_tokens=int(item.inputTokens),
        output_tokens=int(item.outputTokens),
        created_at=int(item.createdAt),
        expires_at=int(item.expiresAtMs),
    )


class DynamoDbReplyCache:
    """``agentvm.ports.ReplyCache`` on the single table. Blocking calls run in a thread."""

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        host: str | None = None,
        slots: int = DEFAULT_REPLY_SLOTS,
    ) -> None:
        self._item = bind_model(ReplyItem, table_name, region, host)
        self._slots = slots

    async def _held(self, tenant_id: str, key: str) -> tuple[str, dict[int, CachedReply]]:
        """The key's set (as the sort key's prefix), and what its ways hold (by way)."""
        prefix = f"{reply_set(key, self._slots)}#"

        def query() -> list[ReplyItem]:
            condition = self._item.sk.startswith(prefix)
            return list(self._item.query(reply_pk(tenant_id), condition, consistent_read=True))

        items = await asyncio.to_thread(query)
        return prefix, {int(item.sk.removeprefix(prefix)): _reply(item) for item in items}

    async def get(self, tenant_id: str, key: str, *, now_ms: int) -> CachedReply | None:
        _, held = await self._held(tenant_id, key)
        return next((r for r in held.values() if r.key == key and r.expires_at > now_ms), None)

    async def put(self, tenant_id: str, reply: CachedReply) -> None:
        prefix, held = await self._held(tenant_id, reply.key)
        item = self._item(
            reply_pk(tenant_id),
            f"{prefix}{way_for(held, reply.key, now_ms=reply.created_at)}",
            cacheKey=reply.key,
            text=reply.text,
            model=reply.model,
            inputTokens=reply.input_tokens,
            outputTokens=reply.output_tokens,
            createdAt=reply.created_at,
            expiresAtMs=reply.expires_at,
            expiresAt=datetime.fromtimestamp(reply.expires_at / 1000, tz=UTC),
        )
        await asyncio.to_thread(item.save)

    def count(self, tenant_id: str) -> int:
        """The entries the tenant holds (for tests and operators): one Query of its partition."""
        return sum(1 for _ in self._item.query(reply_pk(tenant_id), attributes_to_get=["pk"]))


__all__ = ["DynamoDbReplyCache", "ReplyItem", "reply_pk"]
