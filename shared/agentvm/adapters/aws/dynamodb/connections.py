"""The ``Connections`` port on DynamoDB: live WebSocket connections of the AWS host and their subscriptions.

Items (layout in ``dynamodb.models``): ``CONN#<id>``/``META`` per connection and ``CONN#<id>``/``SUB#<s>``
per subscription, indexed on ``gsi1`` as ``SUBS#<s>``/``CONN#<id>`` so a worker finds a session's
subscribers with one Query.

API Gateway closes every connection after 2 hours and delivers ``$disconnect`` only on a best-effort
basis, so every item carries ``expiresAt`` (connect time + ``ttl_s``, 2 h 5 min by default) and
DynamoDB's TTL removes what ``$disconnect`` missed. TTL deletion lags (typically up to two days),
so readers also drop expired items themselves. A post that returns 410 prunes the connection too
(``core.fanout``).

A connection's protocol: the first JSON-RPC (AgentX v2) frame records ``protocol: "v2"`` on its
``META`` item (one conditional ``UpdateItem``, once per connection), and every subscription it makes
copies it (``subscribe`` reads ``META`` anyway), so a turn's worker learns each subscriber's protocol
from the one index Query it already makes. AgentX v1 is never recorded: v1 connections cost what they
did. A v2 frame on a connection without a record is its first one unless the connection subscribed
to a session already (a v1 client did): one consistent Query of its partition, on that frame only.

A tenant holds at most ``tenant_cap`` live connections (``security/tenant_limits.py``): counted in
two-hour windows on the table, so a lost ``$disconnect`` heals within four hours
(``adapters/aws/dynamodb/tenant_connection_count.py``). ``register`` takes the slot before it writes the
connection (a connection re-registered by an ``auth`` frame of its own tenant keeps its slot: one
consistent GetItem tells), ``remove`` gives it back.

Batched frames (``?frames=batch``, ``streaming.batching``) are recorded the same way, for free:
``frames: "batch"`` on ``META`` by the ``$connect`` write, copied into each subscription, and so is
the text cadence asked for (``?cadence=live|economy``: ``cadence``, ``streaming.batch_cadence``).

**Repeated subscribes write nothing.** Every frame reads its connection (``get``) with one strongly
consistent Query of the connection's partition, ``META`` and its first ``READ_WITH_SUBSCRIPTIONS - 1``
subscriptions, which costs what the GetItem of ``META`` alone did (1 RRU: they fit in 4 KB). A
``subscribe`` given that reading (``known=``) skips its write when the reading shows the
subscription with the cursor asked for (or none asked for): each ``message_send_request`` makes
one, and its conditional write used to fail at 1 WRU. A subscription not in the reading (a new
one, or one past the first few) is written as before: an ``UpdateItem`` conditional on changing
something. Concurrency: a subscription can change between the frame's read and its skipped write
only through another frame of the same connection (``subscribe`` with another cursor) or its
``$disconnect`` (``remove``); AgentVM has no ``unsubscribe`` (AgentX v2's is refused as
unserved). The outcome is the one of the serial order "this frame, then the other": another
frame's cursor stays (as if it came second, which concurrent frames of one connection may), and
a connection removed meanwhile stays removed (the conditional write used to recreate its
subscription, left for TTL). An ``unsubscribe``, if one is ever served, would likewise win over
a concurrent repeat subscribe, and lose to a subscribe sent after its answer (that frame reads
the partition after the delete). A skipped write has nothing to half-do if the Lambda dies.

**``message_send``'s cursor 0 is not written over a subscription that records when it was made.**
Each subscription's first write records ``subscribedAt`` (epoch ms; kept by later writes, in the
same request: no extra unit), and the worker reads it with the subscribers (the index projects
every attribute). A turn's worker that finds such a subscriber late (the index lagged at its first
lookup) sends it the turn from its first frame when the subscription was made no later than the
turn's user message was saved (``streaming.sink``): what cursor 0 does, for every turn whose
message comes after the subscription. So ``get`` reports such a subscription without a cursor as
cursor 0, and the cursor 0 each ``message_send`` asks for (its sender sees its turn from the first
frame) writes nothing: it used to rewrite the subscription with ``afterSeq`` 0 once per session,
the item and its index entry (2 WRU), right after the client's ``subscribe`` made it. The sender's
own subscription is made before its message is saved (in the same invocation, or in an earlier
frame whose write the ``get`` of this one saw), so its ``subscribedAt`` is not later than the
message's time but for clock skew between two Lambda hosts, which is far below the write and read
in between. What changes: a connection that subscribed *during* another turn without a cursor
and then sends a message, before that running turn's worker looked its subscribers up again, gets
that other turn from when the worker finds it (a plain subscriber's due), not from its first frame.
Its own turn, and every later one, it gets whole.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from agentvm.adapters.aws.dynamodb.counters import DynamoDbCounters
from agentvm.adapters.aws.dynamodb.models import (
    GSI1,
    META,
    SUB_PREFIX,
    bind_models,
    connection_id_of,
    connection_pk,
    create_table,
    subscribers_gsi1pk,
    subscription_sk,
)
from agentvm.adapters.aws.dynamodb.tenant_connection_count import TenantConnectionCount
from agentvm.events import BATCH
from agentvm.ports import PROTOCOL_V1, PROTOCOL_V2, ConnectionInfo, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pynamodb.expressions.update import Action

    from agentvm.adapters.aws.dynamodb.models import ConnectionItem, SubscriptionItem, TableItem

# API Gateway's hard cap on a WebSocket connection is 2 h; 5 minutes of slack on top.
DEFAULT_TTL_S = 7500
# Items ``get`` reads: META and up to 15 subscriptions (~200 B each), within the 4 KB one strongly
# consistent read unit covers, so the Query costs what a GetItem of META did (1 RRU).
READ_WITH_SUBSCRIPTIONS = 16


class DynamoDbConnections:
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
        self._per_tenant = TenantConnectionCount(
            DynamoDbCounters(table_name, region=region, host=host, now=clock)
        )

    def create_table(self, wait: bool = True) -> None:
        """Create the shared table unless it exists (see ``dynamodb.models.create_table``)."""
        create_table(self._m, wait=wait)

    def _alive(self, item: TableItem) -> bool:
        expires = item.expiresAt
        return expires is None or expires.timestamp() > self._clock()

    async def register(self, info: ConnectionInfo, *, tenant_cap: int = 0) -> None:
        expires = datetime.fromtimestamp(int(self._clock()) + self._ttl_s, tz=UTC)
        counted_in = None
        if info.tenant_id is not None and tenant_cap > 0:
            counted_in = await self._counted_slot(info.connection_id, info.tenant_id, tenant_cap)
        item = self._m.connection(
            connection_pk(info.connection_id),
            META,
            tenantId=info.tenant_id,
            keyId=info.key_id,
            connectedAt=info.connected_at,
            expiresAt=expires,
            protocol=info.protocol if info.protocol == PROTOCOL_V2 else None,
            frames=BATCH if info.batch else None,
            cadence=info.cadence if info.batch else None,
            countedIn=counted_in,
        )
        await asyncio.to_thread(item.save)

    async def _counted_slot(self, connection_id: str, tenant_id: str, cap: int) -> int:
        """The window the connection's slot is counted in: its own already (re-registered by an
        ``auth`` frame of its tenant), else a new one (raises ``RateLimited`` at the cap)."""

        def read() -> ConnectionItem | None:
            try:
                return self._m.connection.get(connection_pk(connection_id), META, consistent_read=True)
            except DoesNotExist:
                return None

        old = await asyncio.to_thread(read)
        if old is not None and old.tenantId == tenant_id and old.countedIn is not None:
            return int(old.countedIn)
        return await self._per_tenant.take(tenant_id, cap, int(self._clock() * 1000))

    def _client(self) -> Any:
        return self._m.base._get_connection().connection.client

    async def get(self, connection_id: str) -> ConnectionInfo | None:
        pk = connection_pk(connection_id)

        def read() -> list[dict[str, Any]]:
            # Strongly consistent: ``$connect`` registers and the next frame reads it at once. META
            # sorts before SUB#...: one Query reads the connection and its first subscriptions.
            page = self._client().query(
                TableName=self._m.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": pk}},
                ConsistentRead=True,
                Limit=READ_WITH_SUBSCRIPTIONS,
            )
            return page.get("Items", [])

        items = await asyncio.to_thread(read)
        if not items or items[0]["sk"]["S"] != META:
            return None
        meta, now = items[0], self._clock()
        expires = int(meta["expiresAt"]["N"]) if "expiresAt" in meta else None
        if expires is not None and expires <= now:
            return None
        subscribed: dict[str, int | None] = {}
        for item in items[1:]:
            if item["sk"]["S"].startswith(SUB_PREFIX) and "sessionId" in item:
                cursor = item.get("afterSeq")
                if cursor is None and "subscribedAt" in item:
                    # every turn whose message comes after it is sent whole, as with cursor 0 (which
                    # each message_send asks for): so stored, 0 would change nothing (module docstring)
                    subscribed[item["sessionId"]["S"]] = 0
                else:
                    subscribed[item["sessionId"]["S"]] = None if cursor is None else int(cursor["N"])

        def text(name: str) -> str | None:
            return meta[name]["S"] if name in meta else None

        return ConnectionInfo(
            connection_id=connection_id,
            tenant_id=text("tenantId"),
            connected_at=int(meta["connectedAt"]["N"]),
            key_id=text("keyId"),
            protocol=text("protocol"),
            batch=text("frames") == BATCH,
            cadence=text("cadence"),
            expires_at=expires,
            subscribed=subscribed,
        )

    async def remove(self, connection_id: str) -> None:
        base = self._m.base

        def remove_partition() -> tuple[str, int] | None:
            # The connection and all its subscriptions: one Query (META's tenant and counted window
            # with the keys), then BatchWriteItem deletes.
            pk = connection_pk(connection_id)
            pages = (
                self._client()
                .get_paginator("query")
                .paginate(
                    TableName=self._m.table_name,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": {"S": pk}},
                    ProjectionExpression="pk, sk, tenantId, countedIn",
                    ConsistentRead=True,
                )
            )
            items = [item for page in pages for item in page.get("Items", [])]
            with base.batch_write() as batch:
                for item in items:
                    batch.delete(base(pk, item["sk"]["S"]))
            meta = next((i for i in items if i["sk"]["S"] == META), None)
            if meta is None or "tenantId" not in meta or "countedIn" not in meta:
                return None
            return meta["tenantId"]["S"], int(meta["countedIn"]["N"])

        slot = await asyncio.to_thread(remove_partition)
        if slot is not None:  # its tenant's slot, given back
            await self._per_tenant.give_back(slot[0], slot[1], int(self._clock() * 1000))

    async def subscribe(
        self,
        connection_id: str,
        session_id: str,
        after_seq: int | None = None,
        *,
        known: ConnectionInfo | None = None,
    ) -> None:
        if known is None or known.connection_id != connection_id:
            known = await self.get(connection_id)
        if known is None:  # unknown or expired connection: nothing would ever be delivered to it
            return
        if session_id in known.subscribed and after_seq in (None, known.subscribed[session_id]):
            return  # subscribed already, with this cursor: the write would change nothing
        sub = self._m.subscription
        item = sub(connection_pk(connection_id), subscription_sk(session_id))
        actions: list[Action] = [
            sub.sessionId.set(session_id),
            sub.gsi1pk.set(subscribers_gsi1pk(session_id)),
            sub.gsi1sk.set(connection_pk(connection_id)),
        ]
        if known.expires_at is not None:  # a subscription never outlives its connection
            actions.append(sub.expiresAt.set(datetime.fromtimestamp(known.expires_at, tz=UTC)))
        # when it was first made (kept by later writes): what the worker compares a turn's start with
        actions.append(sub.subscribedAt.set(sub.subscribedAt | int(self._clock() * 1000)))
        # Written only if it changes something: a subscription is fixed but for its cursor, so a
        # repeat the reading did not show (past its first few) fails its condition, which bills
        # the item alone (1 WRU), not its index entry too.
        changes = sub.pk.does_not_exist()
        if after_seq is not None:  # without one, a cursor stored before stays
            actions.append(sub.afterSeq.set(after_seq))
            changes = changes | sub.afterSeq.does_not_exist() | (sub.afterSeq != after_seq)
        if known.protocol == PROTOCOL_V2:  # the worker reads it with the subscribers: no extra read
            actions.append(sub.protocol.set(PROTOCOL_V2))
        if known.batch:  # likewise
            actions.append(sub.frames.set(BATCH))
            if known.cadence is not None:
                actions.append(sub.cadence.set(known.cadence))
        # UpdateItem creates or updates: one write, as a PutItem would be.
        try:
            await asyncio.to_thread(item.update, actions=actions, condition=changes)
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

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
        return [(s.connection_id, s.after_seq) for s in await self.subscriptions(session_id)]

    async def subscriptions(self, session_id: str) -> Sequence[Subscription]:
        return [
            Subscription(
                connection_id_of(item.pk),
                None if item.afterSeq is None else int(item.afterSeq),
                item.protocol or PROTOCOL_V1,
                item.frames == BATCH,
                item.cadence,
                None if item.subscribedAt is None else int(item.subscribedAt),
            )
            for item in await self._subscriptions(session_id)
        ]

    async def claim_protocol(self, connection_id: str, protocol: str) -> str:
        """v1: nothing is written (its connections' cost is unchanged). v2: recorded unless the
        connection already subscribed to a session (as v1 clients do), in one conditional write."""
        if protocol != PROTOCOL_V2:
            return PROTOCOL_V1
        base, conn = self._m.base, self._m.connection

        def claim() -> str:
            # META sorts before SUB#...: two keys say whether the connection exists and subscribed.
            keys = list(
                base.query(
                    connection_pk(connection_id),
                    consistent_read=True,
                    limit=2,
                    attributes_to_get=["pk", "sk"],
                )
            )
            if not any(k.sk == META for k in keys):
                return protocol  # gone: nothing will be delivered to it anyway
            if any(k.sk != META for k in keys):
                return PROTOCOL_V1  # it subscribed before this frame: a v1 client
            try:
                conn(connection_pk(connection_id), META).update(
                    actions=[conn.protocol.set(PROTOCOL_V2)],
                    condition=conn.pk.exists() & conn.protocol.does_not_exist(),
                )
            except UpdateError:  # another frame claimed it (or the connection left) meanwhile
                again = self._m.connection.get(connection_pk(connection_id), META, consistent_read=True)
                return again.protocol or PROTOCOL_V1
            return PROTOCOL_V2

        try:
            return await asyncio.to_thread(claim)
        except DoesNotExist:
            return protocol


__all__ = ["DEFAULT_TTL_S", "DynamoDbConnections"]
