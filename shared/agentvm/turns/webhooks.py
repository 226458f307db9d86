"""Webhooks on session events (docs/webhooks.md): a tenant's endpoints, the events recorded into a
durable outbox, and the sender that delivers them signed per the Standard Webhooks spec.

Events: ``turn.ended`` (completed or interrupted), ``turn.failed`` (an error), ``budget.reached``
(a turn stopped by a token budget) and ``approval.needed`` (a turn suspended on a tool call waiting
for a person or the client). ``record_turn_event`` is called by ``turns.finish`` once the turn's
status is stored; it writes one delivery per subscribed endpoint, keyed by (endpoint, event id), so a
recorded event is delivered once per endpoint however often it is recorded.

The sender (``deliver_due``, the host's loop every ``AVM_WEBHOOK_SEND_S``) leases each due delivery
(a conditional write: one sender per attempt), POSTs it, and records the answer: a 2xx delivers it;
anything else, a timeout or a refused address is retried after ``min(CAP, BASE * 2**(n-1))``
seconds, ``MAX_ATTEMPTS`` attempts in all, then ``failed``. A process that dies mid-send leaves the
delivery pending: it is sent again after its lease (the same ``webhook-id``: receivers dedupe by it,
as the spec asks).

Signing (https://www.standardwebhooks.com): headers ``webhook-id``, ``webhook-timestamp`` (epoch
seconds) and ``webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>``, the key
being the base64 after ``whsec_`` in the endpoint's secret. Implemented here with the standard library
(``hmac``); the tests verify with the ``standardwebhooks`` package, independently.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args
from urllib.parse import urlsplit

from agentvm.errors import BadRequest
from agentvm.records import WebhookDelivery, WebhookEventType

if TYPE_CHECKING:
    import httpx

    from agentvm.events import Json
    from agentvm.ports import Webhooks
    from agentvm.records import TurnJob, TurnStatus
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.turns.webhooks")

EVENT_TYPES: tuple[str, ...] = get_args(WebhookEventType)
SECRET_PREFIX = "whsec_"
MAX_ATTEMPTS = 8
BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 3600.0
LEASE_MS = 60_000  # a sender that dies mid-send: the delivery is sent again after this
SEND_TIMEOUT_S = 10.0
DUE_BATCH = 50
MAX_ERROR_CHARS = 300


def webhooks_of(rt: Runtime) -> Webhooks:
    if rt.webhooks is None:
        raise BadRequest("webhooks are not enabled on this server")
    return rt.webhooks


def new_secret() -> str:
    """A fresh signing secret in the spec's form: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` header's value for one message."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


async def check_url(url: str, *, allow_private: bool) -> None:
    """Refuse a URL that is not http(s), or (unless ``allow_private``) that reaches a loopback,
    private or link-local address (server-side request forgery)."""
    from agentvm.agent.tools.egress import EgressRefused, check_public

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadRequest("url: an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise BadRequest("url: no credentials in the URL (check the signature instead)")
    if not allow_private:
        try:
            await check_public(url)
        except EgressRefused as exc:
            raise BadRequest(f"url: {exc}".replace("tools may", "webhooks may")) from None


def event_type_of(status: TurnStatus, error: Json | None) -> str | None:
    if status in ("completed", "interrupted"):
        return "turn.ended"
    if status == "suspended":
        return "approval.needed"
    if status == "failed":
        code = error.get("code") if isinstance(error, dict) else None
        return "budget.reached" if code == "quota_exceeded" else "turn.failed"
    return None


async def record_turn_event(
    rt: Runtime, job: TurnJob, status: TurnStatus, error: Json | None, *, attempt: int
) -> int:
    """Put the turn's event in the outbox of each endpoint of the tenant subscribed to it. Never
    raises (a webhook must not fail a turn): a failure is logged. Returns the deliveries stored."""
    if rt.webhooks is None:
        return 0
    event_type = event_type_of(status, error)
    if event_type is None:
        return 0
    data: dict[str, Any] = {
        "tenantId": job.tenantId,
        "containerId": job.containerId,
        "imageId": job.imageId,
        "sessionId": job.sessionId,
        "turnId": job.turnId,
        "status": status,
    }
    if isinstance(error, dict):
        data["error"] = {"code": error.get("code"), "message": error.get("message")}
    try:
        return await record_event(rt, job.tenantId, event_type, f"{job.turnId}.{status}.{attempt}", data)
    except Exception as exc:
        log.warning(
            "recording a webhook event failed", extra={"turn_id": job.turnId, "error": type(exc).__name__}
        )
        return 0


async def record_event(
    rt: Runtime, tenant_id: str, event_type: str, event_id: str, data: dict[str, Any]
) -> int:
    webhooks = webhooks_of(rt)
    endpoints = [e for e in await webhooks.list_endpoints(tenant_id) if event_type in e.events]
    if not endpoints:
        return 0
    now = rt.clock.now_ms()
    body = json.dumps(
        {
            "type": event_type,
            "timestamp": datetime.fromtimestamp(now / 1000, tz=UTC).isoformat().replace("+00:00", "Z"),
            "eventId": event_id,
            "data": data,
        },
        separators=(",", ":"),
    )
    stored = 0
    for endpoint in endpoints:
        delivery = WebhookDelivery(
            tenantId=tenant_id,
            endpointId=endpoint.endpointId,
            deliveryId=rt.ids.new("msg"),
            eventId=event_id,
            eventType=event_type,  # type: ignore[arg-type]
            payload=body,
            nextAttemptAt=now,
            createdAt=now,
        )
        stored += await webhooks.enqueue(delivery)
    return stored


def backoff_ms(attempts: int) -> int:
    """The wait before attempt ``attempts + 1``, after ``attempts`` failed ones."""
    return int(min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempts - 1)) * 1000)


async def deliver_due(
    rt: Runtime, client: httpx.AsyncClient, *, allow_private: bool, limit: int = DUE_BATCH
) -> int:
    """One sender step: send every due delivery this sender leases. Returns the attempts made."""
    webhooks = webhooks_of(rt)
    now = rt.clock.now_ms()
    made = 0
    for delivery in await webhooks.due_deliveries(now, limit):
        if not await webhooks.lease(delivery, now + LEASE_MS):
            continue  # another sender has it
        made += 1
        try:
            await _attempt(rt, webhooks, client, delivery, allow_private=allow_private)
        except Exception as exc:  # the store failed: the lease runs out, the delivery is sent again
            log.warning(
                "a webhook delivery failed",
                extra={"delivery_id": delivery.deliveryId, "error": type(exc).__name__},
            )
    return made


async def _attempt(
    rt: Runtime,
    webhooks: Webhooks,
    client: httpx.AsyncClient,
    delivery: WebhookDelivery,
    *,
    allow_private: bool,
) -> None:
    import httpx

    endpoint = await webhooks.get_endpoint(delivery.tenantId, delivery.endpointId)
    if endpoint is None:  # deleted with its deliveries; one left behind (DynamoDB deletes item by item,
        # or an event recorded as the endpoint went) is closed, so it is not leased again every minute
        gone = {"status": "failed", "lastError": "the endpoint was deleted"}
        await webhooks.save_delivery(delivery.model_copy(update=gone))
        return
    attempts = delivery.attempts + 1
    code: int | None = None
    error: str | None = None
    try:
        await check_url(endpoint.url, allow_private=allow_private)
        secret = await webhooks.endpoint_secret(endpoint)
        timestamp = rt.clock.now_ms() // 1000
        headers = {
            "content-type": "application/json",
            "user-agent": "AgentVM-Webhooks",
            "webhook-id": delivery.deliveryId,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(secret, delivery.deliveryId, timestamp, delivery.payload),
        }
        answer = await client.post(
            endpoint.url, content=delivery.payload.encode(), headers=headers, timeout=SEND_TIMEOUT_S
        )
        code = answer.status_code
        if not 200 <= code < 300:
            error = f"HTTP {code}"
    except BadRequest as exc:
        error = str(exc)
    except httpx.HTTPError as exc:
        error = type(exc).__name__
    now = rt.clock.now_ms()
    changes: dict[str, Any] = {"attempts": attempts, "lastStatusCode": code, "lastError": error}
    if error is None:
        changes |= {"status": "delivered", "deliveredAt": now}
    elif attempts >= MAX_ATTEMPTS:
        changes |= {"status": "failed"}
    else:
        changes |= {"nextAttemptAt": now + backoff_ms(attempts)}
    if error is not None:
        changes["lastError"] = error[:MAX_ERROR_CHARS]
    await webhooks.save_delivery(delivery.model_copy(update=changes))


async def replay(rt: Runtime, tenant_id: str, delivery_id: str) -> WebhookDelivery | None:
    """Send a delivery again (delivered or failed): pending at once, its attempts counted anew. The
    same ``webhook-id``: a receiver that kept it knows it is the same event."""
    webhooks = webhooks_of(rt)
    delivery = await webhooks.get_delivery(tenant_id, delivery_id)
    if delivery is None:
        return None
    again = delivery.model_copy(
        update={"status": "pending", "attempts": 0, "nextAttemptAt": rt.clock.now_ms(), "deliveredAt": None}
    )
    await webhooks.save_delivery(again)
    return again


__all__ = [
    "EVENT_TYPES",
    "MAX_ATTEMPTS",
    "backoff_ms",
    "check_url",
    "deliver_due",
    "event_type_of",
    "new_secret",
    "record_event",
    "record_turn_event",
    "replay",
    "sign",
    "webhooks_of",
]
