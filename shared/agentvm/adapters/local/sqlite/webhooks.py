"""The ``Webhooks`` port on SQLite (the local host): endpoints, their sealed secrets, and the
outbox of deliveries in the server's database file, so a delivery recorded before the process died
is sent after it restarts. A delivery's (endpoint, event) is unique: ``enqueue`` stores it once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect, transaction
from agentvm.records import WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.configcentre.sealing import SecretSealer

_SCHEMA = """
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    tenant_id   TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    secret      TEXT NOT NULL,
    record      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, endpoint_id)
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    delivery_id     TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    endpoint_id     TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    status          TEXT NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    record          TEXT NOT NULL,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_by_endpoint
    ON webhook_deliveries (tenant_id, endpoint_id, created_at);
"""


def _secret_name(endpoint_id: str) -> str:
    return f"webhook:{endpoint_id}"  # the sealing's associated data: a secret opens for its endpoint only


class SqliteWebhooks:
    """``agentvm.ports.Webhooks`` on one SQLite file (or ``":memory:"``); secrets sealed by ``sealer``."""

    def __init__(self, path: str | Path, sealer: SecretSealer) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        self._sealer = sealer

    def close(self) -> None:
        self._conn.close()

    async def put_endpoint(self, endpoint: WebhookEndpoint, secret: str) -> None:
        sealed = self._sealer.seal(_secret_name(endpoint.endpointId), secret)
        self._conn.execute(
            "INSERT INTO webhook_endpoints (tenant_id, endpoint_id, secret, record) VALUES (?, ?, ?, ?)",
            (endpoint.tenantId, endpoint.endpointId, sealed, endpoint.model_dump_json()),
        )

    async def get_endpoint(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None:
        row = self._conn.execute(
            "SELECT record FROM webhook_endpoints WHERE tenant_id = ? AND endpoint_id = ?",
            (tenant_id, endpoint_id),
        ).fetchone()
        return None if row is None else WebhookEndpoint.model_validate_json(row[0])

    async def endpoint_secret(self, endpoint: WebhookEndpoint) -> str:
        row = self._conn.execute(
            "SELECT secret FROM webhook_endpoints WHERE tenant_id = ? AND endpoint_id = ?",
            (endpoint.tenantId, endpoint.endpointId),
        ).fetchone()
        if row is None:
            raise LookupError("the endpoint was deleted")
        return self._sealer.open(_secret_name(endpoint.endpointId), row[0])

    async def list_endpoints(self, tenant_id: str) -> list[WebhookEndpoint]:
        rows = self._conn.execute(
            "SELECT record FROM webhook_endpoints WHERE tenant_id = ? ORDER BY endpoint_id", (tenant_id,)
        ).fetchall()
        return [WebhookEndpoint.model_validate_json(r[0]) for r in rows]

    async def delete_endpoint(self, tenant_id: str, endpoint_id: str) -> bool:
        with transaction(self._conn):
            cur = self._conn.execute(
                "DELETE FROM webhook_endpoints WHERE tenant_id = ? AND endpoint_id = ?",
                (tenant_id, endpoint_id),
            )
            if cur.rowcount != 1:
                return False
            self._conn.execute(
                "DELETE FROM webhook_deliveries WHERE tenant_id = ? AND endpoint_id = ?",
                (tenant_id, endpoint_id),
            )
        return True

    async def enqueue(self, delivery: WebhookDelivery) -> bool:
        cur = self._conn.execute(
            "INSERT INTO webhook_deliveries (delivery_id, tenant_id, endpoint_id, event_id, status,"
            " next_attempt_at, created_at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
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
        rows = self._conn.execute(
            "SELECT record FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?"
            " ORDER BY next_attempt_at LIMIT ?",
            (now_ms, limit),
        ).fetchall()
        return [WebhookDelivery.model_validate_json(r[0]) for r in rows]

    async def lease(self, delivery: WebhookDelivery, until_ms: int) -> bool:
        leased = delivery.model_copy(update={"nextAttemptAt": until_ms})
        cur = self._conn.execute(
            "UPDATE webhook_deliveries SET next_attempt_at = ?, record = ?"
            " WHERE delivery_id = ? AND status = 'pending' AND next_attempt_at = ?",
            (until_ms, leased.model_dump_json(), delivery.deliveryId, delivery.nextAttemptAt),
        )
        return cur.rowcount == 1

    async def save_delivery(self, delivery: WebhookDelivery) -> None:
        self._conn.execute(
            "UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, record = ? WHERE delivery_id = ?",
            (delivery.status, delivery.nextAttemptAt, delivery.model_dump_json(), delivery.deliveryId),
        )

    async def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery | None:
        row = self._conn.execute(
            "SELECT record FROM webhook_deliveries WHERE tenant_id = ? AND delivery_id = ?",
            (tenant_id, delivery_id),
        ).fetchone()
        return None if row is None else WebhookDelivery.model_validate_json(row[0])

    async def list_deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> list[WebhookDelivery]:
        rows = self._conn.execute(
            "SELECT record FROM webhook_deliveries WHERE tenant_id = ? AND endpoint_id = ?"
            " ORDER BY created_at DESC, delivery_id DESC LIMIT ?",
            (tenant_id, endpoint_id, limit),
        ).fetchall()
        return [WebhookDelivery.model_validate_json(r[0]) for r in rows]


__all__ = ["SqliteWebhooks"]
