"""The ``Webhooks`` port on DynamoDB (the AWS host): endpoints, their sealed secrets and the outbox of
deliveries on AgentVM's single table (docs/webhooks.md, "Hosts").

===========  ============================  ==============  ==========================================
item         pk                            sk              index keys
===========  ============================  ==============  ==========================================
endpoint     ``WEBHOOKS#<tenant>``         ``EP#<e>``
event claim  ``HOOK#<e>``                  ``EVT#<event>``
delivery     ``WHDLV#<delivery>``          ``META``        gsi1 ``WHDUE`` / ``<nextAttemptAt:013d>#<d>``
                                                           (pending only: sparse); gsi2 ``HOOKDLV#<e>``
                                                           / ``<createdAt:013d>#<d>``
===========  ============================  ==============  ==========================================

**Once per event.** ``enqueue`` is one ``TransactWriteItems`` of the event's claim and the delivery,
both ``attribute_not_exists(pk)``: a redelivered turn job recording the same event again is cancelled
by the claim and stores nothing (one delivery per (endpoint, event), as the SQLite adapter's unique
key). **Due.** A pending delivery carries ``gsi1`` keys sorted by its next attempt, in one partition
for every tenant: "what is due now" is one Query with a key condition; a delivered or failed one
drops them (a sparse index). The index is eventually consistent, so what it answers may be a moment
old: ``lease`` is a conditional put (``status = pending`` and ``nextAttemptAt`` as read), so of
several senders, or a stale read, one sends a given attempt. One partition takes ~1,000 writes a
second (three per attempt): shard ``WHDUE`` by hour if webhooks ever get near that.
**By id.** A delivery is its own partition, so a replay (``get_delivery``) is a strongly consistent
GetItem; the stored ``tenantId`` is compared, so another tenant's id reads as missing. An
endpoint's deliveries are listed newest first from ``gsi2`` (eventually consistent: a delivery
written a moment ago may be missing from the list, never from a replay or the sender).
**Deleting** an endpoint deletes its item, then each claim of its partition and the delivery it
names (a delivery whose endpoint is gone is never sent: the sender reads the endpoint first and
closes one left behind, ``turns.webhooks``).

Units (``benchmarks/webhook_costs.py``, billed by ``benchmarks/billing.py``'s rules): a recorded event
8 WRU per endpoint (a transaction, so twice the two items and the delivery's two index copies), an
attempt 7 to 8 WRU (the lease moves the ``gsi1`` key: 4; the result 3, or 4 when it is retried) and
2.5 RRU (the due Query, the endpoint, its secret); a delivered event 15 WRU and 3.5 RRU, about $10
per million. Every turn's end reads the tenant's endpoints: 1 RRU, with or without any.

Secrets are sealed with ``SecretSealer`` (AES-256-GCM under a key derived from the server secret in
SSM, the endpoint id as associated data), as on the other hosts.

``on_due`` (the AWS host: an asynchronous invoke of the sender function) is called after a delivery
is written pending with no attempt made yet, i.e. stored by ``enqueue`` or reset by a replay, so it
goes out in seconds rather than at the sender's next minute; a failure there is logged, never
raised (the schedule sends it anyway).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import TYPE_CHECKING, Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from agentvm.adapters.aws.dynamodb.models import GSI1, GSI2, META, TableItem, bind_model
from agentvm.adapters.aws.dynamodb.store import conditional_write
from agentvm.records import WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.configcentre.sealing import SecretSealer

log = logging.getLogger("agentvm.adapters.aws.webhooks")

ENDPOINT_PREFIX = "EP#"
EVENT_PREFIX = "EVT#"
DUE_PK = "WHDUE"
_MAX_EVENT_CHARS = 200  # longer event ids are keyed by their digest (sort keys: 1,024 bytes)
_DELETE_CHUNK = 25  # BatchWriteItem's limit


def endpoints_pk(tenant_id: str) -> str:
    return f"WEBHOOKS#{tenant_id}"


def claims_pk(endpoint_id: str) -> str:
    return f"HOOK#{endpoint_id}"


def delivery_pk(delivery_id: str) -> str:
    return f"WHDLV#{delivery_id}"


def by_endpoint_gsi2pk(endpoint_id: str) -> str:
    return f"HOOKDLV#{endpoint_id}"


def event_sk(event_id: str) -> str:
    if len(event_id) > _MAX_EVENT_CHARS:
        event_id = "sha256:" + hashlib.sha256(event_id.encode()).hexdigest()
    return EVENT_PREFIX + event_id


def _secret_name(endpoint_id: str) -> str:
    return f"webhook:{endpoint_id}"  # the sealing's associated data, as the SQLite adapter's


class EndpointItem(TableItem):
    data = UnicodeAttribute()
    secret = UnicodeAttribute()  # sealed (``avm-sealed:v1:...``), never the secret itself


class ClaimItem(TableItem):
    deliveryId = UnicodeAttribute()


class DeliveryItem(TableItem):
    tenantId = UnicodeAttribute()
    endpointId = UnicodeAttribute()
    status = UnicodeAttribute()
    nextAttemptAt = NumberAttribute()
    data = UnicodeAttribute()


class DynamoDbWebhooks:
    """``agentvm.ports.Webhooks`` on the single DynamoDB table. Blocking calls run in a thread."""

    def __init__(
        self,
        table_name: str,
        sealer: SecretSealer,
        *,
        on_due: Callable[[], Awaitable[None]] | None = None,
        region: str | None = None,
        host: str | None = None,
    ) -> None:
        self._endpoint = bind_model(EndpointItem, table_name, region, host)
        self._claim = bind_model(ClaimItem, table_name, region, host)
        self._delivery = bind_model(DeliveryItem, table_name, region, host)
        self._sealer = sealer
        self._on_due = on_due

    # -- endpoints -------------------------------------------------------------------------------

    async def put_endpoint(self, endpoint: WebhookEndpoint, secret: str) -> None:
        item = self._endpoint(
            endpoints_pk(endpoint.tenantId),
            ENDPOINT_PREFIX + endpoint.endpointId,
            data=endpoint.model_dump_json(),
            secret=self._sealer.seal(_secret_name(endpoint.endpointId), secret),
        )
        if not await conditional_write(lambda: item.save(condition=self._endpoint.pk.does_not_exist())):
            raise ValueError(f"webhook endpoint {endpoint.endpointId} exists")

    def _endpoint_item(self, tenant_id: str, endpoint_id: str) -> EndpointItem | None:
        try:
            return self._endpoint.get(
                endpoints_pk(tenant_id), ENDPOINT_PREFIX + endpoint_id, consistent_read=True
            )
        except self._endpoint.DoesNotExist:
            return None

    async def get_endpoint(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None:
        item = await asyncio.to_thread(self._endpoint_item, tenant_id, endpoint_id)
        return None if item is None else WebhookEndpoint.model_validate_json(item.data)

    async def endpoint_secret(self, endpoint: WebhookEndpoint) -> str:
        item = await asyncio.to_thread(self._endpoint_item, endpoint.tenantId, endpoint.endpointId)
        if item is None:
            raise LookupError("the endpoint was deleted")
        return self._sealer.open(_secret_name(endpoint.endpointId), item.secret)

    async def list_endpoints(self, tenant_id: str) -> list[WebhookEndpoint]:
        def query() -> list[WebhookEndpoint]:
            items = self._endpoint.query(
                endpoints_pk(tenant_id),
                self._endpoint.sk.startswith(ENDPOINT_PREFIX),
                consistent_read=True,
            )
            return [WebhookEndpoint.model_validate_json(i.data) for i in items]

        return await asyncio.to_thread(query)

    async def delete_endpoint(self, tenant_id: str, endpoint_id: str) -> bool:
        item = self._endpoint(endpoints_pk(tenant_id), ENDPOINT_PREFIX + endpoint_id)
        if not await conditional_write(lambda: item.delete(condition=self._endpoint.pk.exists())):
            return False

        def delete_deliveries() -> None:
            claims = list(self._claim.query(claims_pk(endpoint_id), consistent_read=True))
            for start in range(0, len(claims), _DELETE_CHUNK):
                chunk = claims[start : start + _DELETE_CHUNK]
                with self._claim.batch_write() as batch:
                    for claim in chunk:
                        batch.delete(self._delivery(delivery_pk(claim.deliveryId), META))
                    for claim in chunk:
                        batch.delete(claim)

        await asyncio.to_thread(delete_deliveries)
        return True

    # -- deliveries ------------------------------------------------------------------------------

    def _item(self, delivery: WebhookDelivery) -> DeliveryItem:
        pending = delivery.status == "pending"
        return self._delivery(
            delivery_pk(delivery.deliveryId),
            META,
            tenantId=delivery.tenantId,
            endpointId=delivery.endpointId,
            status=delivery.status,
            nextAttemptAt=delivery.nextAttemptAt,
            data=delivery.model_dump_json(),
            gsi1pk=DUE_PK if pending else None,
            gsi1sk=f"{delivery.nextAttemptAt:013d}#{delivery.deliveryId}" if pending else None,
            gsi2pk=by_endpoint_gsi2pk(delivery.endpointId),
            gsi2sk=f"{delivery.createdAt:013d}#{delivery.deliveryId}",
        )

    async def enqueue(self, delivery: WebhookDelivery) -> bool:
        claim = self._claim(
            claims_pk(delivery.endpointId), event_sk(delivery.eventId), deliveryId=delivery.deliveryId
        )
        item = self._item(delivery)
        connection = self._delivery._get_connection().connection

        def write() -> bool:
            try:
                with TransactWrite(connection=connection) as tx:
                    tx.save(claim, condition=self._claim.pk.does_not_exist())
                    tx.save(item, condition=self._delivery.pk.does_not_exist())
            except TransactWriteError as exc:
                if exc.cause_response_code == "TransactionCanceledException":
                    return False  # the event has its delivery for this endpoint already
                raise
            return True

        stored = await asyncio.to_thread(write)
        if stored:
            await self._due_now()
        return stored

    async def due_deliveries(self, now_ms: int, limit: int) -> list[WebhookDelivery]:
        def query() -> list[WebhookDelivery]:
            items = self._delivery.query(
                DUE_PK, self._delivery.gsi1sk <= f"{now_ms:013d}~", index_name=GSI1, limit=limit
            )
            out = [WebhookDelivery.model_validate_json(i.data) for i in items]
            return [d for d in out if d.status == "pending" and d.nextAttemptAt <= now_ms]

        return await asyncio.to_thread(query)

    async def lease(self, delivery: WebhookDelivery, until_ms: int) -> bool:
        item = self._item(delivery.model_copy(update={"nextAttemptAt": until_ms}))
        model = self._delivery
        held = (model.status == "pending") & (model.nextAttemptAt == delivery.nextAttemptAt)
        return await conditional_write(lambda: item.save(condition=held))

    async def save_delivery(self, delivery: WebhookDelivery) -> None:
        item = self._item(delivery)
        # an update of a stored delivery: one deleted with its endpoint meanwhile stays deleted
        if not await conditional_write(lambda: item.save(condition=self._delivery.pk.exists())):
            return
        if delivery.status == "pending" and delivery.attempts == 0:
            await self._due_now()  # a replay

    async def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery | None:
        def get() -> WebhookDelivery | None:
            try:
                item = self._delivery.get(delivery_pk(delivery_id), META, consistent_read=True)
            except self._delivery.DoesNotExist:
                return None
            return WebhookDelivery.model_validate_json(item.data) if item.tenantId == tenant_id else None

        return await asyncio.to_thread(get)

    async def list_deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> list[WebhookDelivery]:
        def query() -> list[WebhookDelivery]:
            # gsi2 through the client: the models' shared connection knows the schema of gsi1 only
            client = self._delivery._get_connection().connection.client
            request: dict[str, Any] = {
                "TableName": self._delivery.Meta.table_name,
                "IndexName": GSI2,
                "KeyConditionExpression": "gsi2pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": by_endpoint_gsi2pk(endpoint_id)}},
                "ScanIndexForward": False,
            }
            items: list[dict[str, Any]] = []
            while len(items) < limit:  # a page holds 1 MB at most
                page = client.query(**request, Limit=limit - len(items))
                items += page.get("Items", [])
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            found = (WebhookDelivery.model_validate_json(i["data"]["S"]) for i in items)
            return [d for d in found if d.tenantId == tenant_id]

        return await asyncio.to_thread(query)

    async def _due_now(self) -> None:
        if self._on_due is None:
            return
        try:
            await self._on_due()
        except Exception as exc:  # the sender's schedule sends it within the minute anyway
            log.warning("waking the webhook sender failed", extra={"error": type(exc).__name__})


__all__ = ["ClaimItem", "DeliveryItem", "DynamoDbWebhooks", "EndpointItem"]
