"""The ``Webhooks`` port on PostgreSQL (the cluster host; migration ``0151_webhooks``): the SQLite
adapter's queries on the node's pool. Every node runs the sender; ``lease`` (a conditional
``UPDATE``) gives each attempt to one node, and (endpoint, event) is unique across nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from agentvm.adapters.postgres.database import Database
    from agentvm.configcentre.sealing import SecretSealer


def _secret_name(endpoint_id: str) -> str:
    return f"webhook:{endpoint_id}"


class PostgresWebhooks:
    """``agentvm.ports.Webhooks`` on the node's ``Database``; secrets sealed by ``sealer``."""

    def __init__(self, database: Database, sealer: SecretSealer) -> None:
        self._db = database
        self._sealer = sealer

    async def put_endpoint(self, endpoint: WebhookEndpoint, secret: str) -> None:
        sealed = self._sealer.seal(_secret_name(endpoint.endpointId), secret)
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO webhook_endpoints (tenant_id, endpoint_id, secret, record)"
                " VALUES (%s, %s, %s, %s::jsonb)",
                (endpoint.tenantId, endpoint.endpointId, sealed, endpoint.model_dump_json()),
            )

    async def get_endpoint(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM webhook_endpoints WHERE tenant_id = %s AND endpoint_id = %s",
                (tenant_id, endpoint_id),
            )
            row = await cur.fetchone()
        return None if row is None else WebhookEndpoint.model_validate_json(row[0])

    async def endpoint_secret(self, endpoint: WebhookEndpoint) -> str:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT secret FROM webhook_endpoints WHERE tenant_id = %s AND endpoint_id = %s",
                (endpoint.tenantId, endpoint.endpointId),
            )
            row = await cur.fetchone()
        if row is None:
            raise LookupError("the endpoint was deleted")
        return self._sealer.open(_secret_name(endpoint.endpointId), row[0])

    async def list_endpoints(self, tenant_id: str) -> list[WebhookEndpoint]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM webhook_endpoints WHERE tenant_id = %s ORDER BY endpoint_id",
                (tenant_id,),
            )
            rows = await cur.fetchall()
        return [WebhookEndpoint.model_validate_json(r[0]) for r in rows]

    async def delete_endpoint(self, tenant_id: str, endpoint_id: str) -> bool:
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM webhook_endpoints WHERE tenant_id = %s AND endpoint_id = %s",
                (tenant_id, endpoint_id),
            )
            if cur.rowcount != 1:
                return False
            await conn.execute(
                "DELETE FROM webhook_deliveries WHERE tenant_id = %s AND endpoint_id = %s",
                (tenant_id, endpoint_id),
            )
        return True

    async def enqueue(self, delivery: WebhookDelivery) -> bool:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO webhook_deliveries (delivery_id, tenant_id, endpoint_id, event_id, status,"
                " next_attempt_at, created_at, record) VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb)"
                " ON CONFLICT DO NOTHING",
                (
                    delivery.deliveryId,
                    delivery.tenantId,
                    delivery.endpointId,
                    delivery.eventId,
                    delivery.status,
                    delivery.nextAttemptAt,
                    delivery.createdAt,
                    delivery.model_dump_json(),
                ),
            )
            return cur.rowcount == 1

    async def due_deliveries(self, now_ms: int, limit: int) -> list[WebhookDelivery]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM webhook_deliveries"
                " WHERE status = 'pending' AND next_attempt_at <= %s"
                " ORDER BY next_attempt_at LIMIT %s",
                (now_ms, limit),
            )
            rows = await cur.fetchall()
        return [WebhookDelivery.model_validate_json(r[0]) for r in rows]

    async def lease(self, delivery: WebhookDelivery, until_ms: int) -> bool:
        leased = delivery.model_copy(update={"nextAttemptAt": until_ms})
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "UPDATE webhook_deliveries SET next_attempt_at = %s, record = %s::jsonb"
                " WHERE delivery_id = %s AND status = 'pending' AND next_attempt_at = %s",
                (until_ms, leased.model_dump_json(), delivery.deliveryId, delivery.nextAttemptAt),
            )
            return cur.rowcount == 1

    async def save_delivery(self, delivery: WebhookDelivery) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "UPDATE webhook_deliveries SET status = %s, next_attempt_at = %s, record = %s::jsonb"
                " WHERE delivery_id = %s",
                (delivery.status, delivery.nextAttemptAt, delivery.model_dump_json(), delivery.deliveryId),
            )

    async def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM webhook_deliveries WHERE tenant_id = %s AND delivery_id = %s",
                (tenant_id, delivery_id),
            )
            row = await cur.fetchone()
        return None if row is None else WebhookDelivery.model_validate_json(row[0])

    async def list_deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> list[WebhookDelivery]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM webhook_deliveries WHERE tenant_id = %s AND endpoint_id = %s"
                " ORDER BY created_at DESC, delivery_id DESC LIMIT %s",
                (tenant_id, endpoint_id, limit),
            )
            rows = await cur.fetchall()
        return [WebhookDelivery.model_validate_json(r[0]) for r in rows]


__all__ = ["PostgresWebhooks"]
