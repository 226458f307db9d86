"""The ``Connections`` port on DynamoDB: live WebSocket connections of the AWS host and their subscriptions.

Items (layout in ``dynamodb_models``): ``CONN#<id>``/``META`` per connection and ``CONN#<id>``/``SUB#<s>``
per subscription, indexed on ``gsi1`` as ``SUBS#<s>``/``CONN#<id>`` so a worker finds a session's
subscribers with one Query.

API Gateway closes every connection after 2 hours and delivers ``$disconnect`` only on a best-effort
basis, so every item carries ``expiresAt`` (connect time + ``ttl_s``, 2 h 5 min by default) and
DynamoDB's TTL removes what ``$disconnect`` missed. TTL deletion lags (typically up to two days),
so readers also drop expired items themselves. A post that returns 410 prunes the connection too
(``core.fanout``).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pynamodb.exceptions import DoesNotExist

from agentvm.adapters.aws.dynamodb_models import (
    GSI1,
    META,
    bind_models,
    connection_id_of,
    connection_pk,
    create_table,
    subscribers_gsi1pk,
    subscription_sk,
)
from agentvm.ports import ConnectionInfo

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agentvm.adapters.aws.dynamodb_models import ConnectionItem, SubscriptionItem, TableItem

# API Gateway's hard cap on a WebSocket connection is 2 h; 5 minutes of slack on top.
DEFAULT_TTL_S = 7500


class DynamoConnections:
    """``agentvm.ports.Connections`` on the AgentVM table.

    ``clock`` returns epoch seconds (``time.time`` by default); tests pass their own to expire items.
    """

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        host: str | None = None,
        ttl_s: int = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._m = bind_models(table_name, region, host)
        self._ttl_s = ttl_s
        self._clock = clock

    def create_table(self, wait: bool = True) -> None:
        """Create the shared table unless it exists (see ``dynamodb_models.create_table``)."""
        create_table(self._m, wait=wait)

    def _alive(self, item: TableItem) -> bool:
        expires = item.expiresAt
        return expires is None or expires.timestamp() > self._clock()

    async def register(self, info: ConnectionInfo) -> None:
        expires = datetime.fromtimestamp(int(self._clock()) + self._ttl_s, tz=UTC)
        item = self._m.connection(
            connection_pk(info.connection_id),
            META,
            tenantId=info.tenant_id,
            keyId=info.key_id,
            connectedAt=info.connected_at,
            expiresAt=expires,
        )
        await asyncio.to_thread(item.save)

    async def _meta(self, connection_id: str) -> ConnectionItem | None:
        def get() -> ConnectionItem | None:
            try:
                # Strongly consistent: ``$connect`` registers and the next frame reads it at once.
                return self._m.connection.get(connection_pk(connection_id), META, consistent_read=True)
            except DoesNotExist:
                return None

        item = await asyncio.to_thread(get)
        return item if item is not None and self._alive(item) else None

    async def get(self, connection_id: str) -> ConnectionInfo | None:
        item = await self._meta(connection_id)
        if item is None:
            return None
        return ConnectionInfo(
            connection_id=connection_id,
            tenant_id=item.tenantId,
            connected_at=int(item.connectedAt),
            key_id=item.keyId,
        )

    async def remove(self, connection_id: str) -> None:
        base = self._m.base

        def remove_partition() -> None:
            # The connection and all its subscriptions: one Query, then BatchWriteItem deletes.
            items = base.query(
                connection_pk(connection_id), consistent_read=True, attributes_to_get=["pk", "sk"]
            )
            with base.batch_write() as batch:
                for item in items:
                    batch.delete(item)

        await asyncio.to_thread(remove_partition)

    async def subscribe(self, connection_id: str, session_id: str, after_seq: int | None = None) -> None:
        meta = await self._meta(connection_id)
        if meta is None:  # unknown or expired connection: nothing would ever be delivered to it
            return
        sub = self._m.subscription
        item = sub(connection_pk(connection_id), subscription_sk(session_id))
        actions = [
            sub.sessionId.set(session_id),
            sub.gsi1pk.set(subscribers_gsi1pk(session_id)),
            sub.gsi1sk.set(connection_pk(connection_id)),
            sub.expiresAt.set(meta.expiresAt),  # a subscription never outlives its connection
        ]
        if after_seq is not None:  # without one, a cursor stored before stays
            actions.append(sub.afterSeq.set(after_seq))
        # UpdateItem creates or updates: one write, as a PutItem would be.
        await asyncio.to_thread(item.update, actions=actions)

    async def _subscriptions(self, session_id: str) -> list[SubscriptionItem]:
        sub = self._m.subscription

        def query() -> list[SubscriptionItem]:
            # GSIs are eventually consistent: a subscription made a moment ago may be missing from
            # the first lookup; the coalescing sink looks again every few seconds and before a
            # turn's terminal frames, and clients resume from the last sequence number they saw.
            return list(sub.query(subscribers_gsi1pk(session_id), index_name=GSI1))

        items = await asyncio.to_thread(query)
        return [item for item in items if self._alive(item)]

    async def subscribers(self, session_id: str) -> Sequence[str]:
        return [connection_id_of(item.pk) for item in await self._subscriptions(session_id)]

    async def subscribers_with_cursor(self, session_id: str) -> Sequence[tuple[str, int | None]]:
        return [
            (connection_id_of(item.pk), None if item.afterSeq is None else int(item.afterSeq))
            for item in await self._subscriptions(session_id)
        ]


__all__ = ["DEFAULT_TTL_S", "DynamoConnections"]
