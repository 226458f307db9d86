"""The ``Webhooks`` port: tenants' endpoints and the durable outbox of deliveries (``turns/webhooks.py``).

``enqueue`` stores a delivery only if its (endpoint, event) has none (``ON CONFLICT DO NOTHING``):
one delivery per event per endpoint, however often the event is recorded. ``lease`` is a
conditional move of ``nextAttemptAt``: of several senders, one sends a given attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agentvm.records import WebhookDelivery, WebhookEndpoint


class Webhooks(Protocol):
    async def put_endpoint(self, endpoint: WebhookEndpoint, secret: str) -> None:
        """Store the endpoint and its signing secret (sealed at rest)."""
        ...

    async def get_endpoint(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None: ...
    async def endpoint_secret(self, endpoint: WebhookEndpoint) -> str:
        """The endpoint's signing secret, opened (for signing only)."""
        ...

    async def list_endpoints(self, tenant_id: str) -> list[WebhookEndpoint]: ...
    async def delete_endpoint(self, tenant_id: str, endpoint_id: str) -> bool: ...
    async def enqueue(self, delivery: WebhookDelivery) -> bool:
        """Store the delivery unless its (endpoint, event) has one; True if this call stored it."""
        ...

    async def due_deliveries(self, now_ms: int, limit: int) -> list[WebhookDelivery]: ...
    async def lease(self, delivery: WebhookDelivery, until_ms: int) -> bool:
        """Move a pending delivery's ``nextAttemptAt`` to ``until_ms`` if it still is the value read."""
        ...

    async def save_delivery(self, delivery: WebhookDelivery) -> None: ...
    async def get_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery | None: ...
    async def list_deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> list[WebhookDelivery]:
        """The endpoint's deliveries, newest first."""
        ...


__all__ = ["Webhooks"]
