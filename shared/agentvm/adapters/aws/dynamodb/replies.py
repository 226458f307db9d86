"""The ``ReplyCache`` port on DynamoDB: direct-mapped slots in the tenant's own partition
(``ports/replies.py``).

=============  ========================  =============  ==============================================
item           pk                        sk             attributes
=============  ========================  =============  ==============================================
cached reply   ``REPLY#<tenant>``        ``<slot>``     cacheKey, text, model, inputTokens,
                                                        outputTokens, createdAt, expiresAt (TTL)
=============  ========================  =============  ==============================================

A get is one strongly consistent GetItem (0.5 RCU for a reply under 4 KB; the stored key and expiry
re-checked: DynamoDB deletes expired items lazily, up to two days late), a put one PutItem. A tenant
holds ``slots`` items at most, whatever it asks: no count to keep, no scan to evict. The item's TTL
is the entry's own expiry, so DynamoDB clears what nobody reads.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.ports import DEFAULT_REPLY_SLOTS, CachedReply, reply_slot

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

    async def get(self, tenant_id: str, key: str, *, now_ms: int) -> CachedReply | None:
        sk = str(reply_slot(key, self._slots))

        def read() -> ReplyItem | None:
            try:
                return self._item.get(reply_pk(tenant_id), sk, consistent_read=True)
            except self._item.DoesNotExist:
                return None

        item = await asyncio.to_thread(read)
        if item is None or item.cacheKey != key or int(item.expiresAtMs) <= now_ms:
            return None
        return CachedReply(
            key=item.cacheKey,
            text=item.text,
            model=item.model,
            input_tokens=int(item.inputTokens),
            output_tokens=int(item.outputTokens),
            created_at=int(item.createdAt),
            expires_at=int(item.expiresAtMs),
        )

    async def put(self, tenant_id: str, reply: CachedReply) -> None:
        item = self._item(
            reply_pk(tenant_id),
            str(reply_slot(reply.key, self._slots)),
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
