"""Webhooks over HTTP (docs/webhooks.md): ``/v1/webhooks/endpoints`` (register, list, get, delete),
an endpoint's deliveries, and ``/v1/webhooks/deliveries/{id}/replay``.

Admin keys only, the caller's tenant only: another tenant's endpoint or delivery answers exactly
like a missing one (``404``). An endpoint's signing secret is in the answer that creates it, and
nowhere else ever (stored sealed; never logged).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID
from agentvm.errors import BadRequest, NotFound
from agentvm.records import WebhookDelivery, WebhookEndpoint
from agentvm.turns.webhooks import check_url, new_secret, replay, webhooks_of

ENDPOINT_ID = Path(min_length=1, max_length=MAX_ID)
MAX_ENDPOINTS = 20  # per tenant

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

_ENDPOINT = {
    "endpointId": "whe_mk2x9a_q8w7e6r5t4",
    "url": "https://example.com/agentvm-events",
    "events": ["turn.ended", "approval.needed"],
    "description": "ops bot",
    "createdAt": 1767200000000,
}
_DELIVERY = {
    "endpointId": "whe_mk2x9a_q8w7e6r5t4",
    "deliveryId": "msg_mk2x9b_a1b2c3d4e5",
    "eventId": "turn_mk2x9a_q8w7e6r5t4.completed.1",
    "eventType": "turn.ended",
    "payload": '{"type":"turn.ended","timestamp":"2026-01-01T09:00:00Z",...}',
    "status": "delivered",
    "attempts": 2,
    "nextAttemptAt": 1767254405000,
    "lastStatusCode": 200,
    "lastError": None,
    "createdAt": 1767254400000,
    "deliveredAt": 1767254405100,
}
EventName = Literal["turn.ended", "turn.failed", "approval.needed", "budget.reached"]


class NewEndpoint(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples({"url": "https://example.com/agentvm-events", "events": ["turn.ended"]}),
    )

    url: StrictStr = Field(min_length=8, max_length=2000, description="http(s); public addresses only")
    events: list[EventName] = Field(min_length=1, max_length=4, description="the events it gets")
    description: StrictStr | None = Field(default=None, max_length=500)


def _endpoint_view(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return endpoint.model_dump(exclude={"tenantId"})


def _delivery_view(delivery: WebhookDelivery) -> dict[str, Any]:
    return delivery.model_dump(exclude={"tenantId"})


@router.post(
    "/endpoints",
    status_code=201,
    response_model=None,
    responses={
        **ok(
            201,
            None,
            {"endpoint": _ENDPOINT, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
            "the endpoint",
        ),
        **error_responses(400),
    },
)
async def create_endpoint(runtime: RuntimeDep, caller: Caller, body: NewEndpoint) -> dict[str, Any]:
    """Register an endpoint. The answer holds its signing secret: shown this once, never again."""
    principal = admin(caller)
    webhooks = webhooks_of(runtime)
    await check_url(body.url, allow_private=runtime.webhooks_allow_private)
    if len(await webhooks.list_endpoints(principal.tenant_id)) >= MAX_ENDPOINTS:
        raise BadRequest(f"a tenant has at most {MAX_ENDPOINTS} webhook endpoints")
    endpoint = WebhookEndpoint(
        tenantId=principal.tenant_id,
        endpointId=runtime.ids.new("whe"),
        url=body.url,
        events=sorted(set(body.events)),
        description=body.description,
        createdAt=runtime.clock.now_ms(),
    )
    secret = new_secret()
    await webhooks.put_endpoint(endpoint, secret)
    return {"endpoint": _endpoint_view(endpoint), "secret": secret}


@router.get(
    "/endpoints",
    response_model=None,
    responses={**ok(200, None, {"endpoints": [_ENDPOINT]}, "the endpoints"), **error_responses(400)},
)
async def list_endpoints(runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    principal = admin(caller)
    return {
        "endpoints": [
            _endpoint_view(e) for e in await webhooks_of(runtime).list_endpoints(principal.tenant_id)
        ]
    }


async def _endpoint(runtime: RuntimeDep, tenant_id: str, endpoint_id: str) -> WebhookEndpoint:
    found = await webhooks_of(runtime).get_endpoint(tenant_id, endpoint_id)
    if found is None:
        raise NotFound(f"webhook endpoint not found: {endpoint_id}")
    return found


_ONE = {
    **ok(200, None, {"endpoint": _ENDPOINT}, "the endpoint (never its secret)"),
    **error_responses(400, 404),
}


@router.get("/endpoints/{endpoint_id}", response_model=None, responses=_ONE)
async def get_endpoint(runtime: RuntimeDep, caller: Caller, endpoint_id: str = ENDPOINT_ID) -> dict[str, Any]:
    return {"endpoint": _endpoint_view(await _endpoint(runtime, admin(caller).tenant_id, endpoint_id))}


@router.delete("/endpoints/{endpoint_id}", response_model=None, responses=_ONE)
async def delete_endpoint(
    runtime: RuntimeDep, caller: Caller, endpoint_id: str = ENDPOINT_ID
) -> dict[str, Any]:
    """Delete the endpoint and its deliveries (pending ones are not sent)."""
    principal = admin(caller)
    endpoint = await _endpoint(runtime, principal.tenant_id, endpoint_id)
    if not await webhooks_of(runtime).delete_endpoint(principal.tenant_id, endpoint_id):
        raise NotFound(f"webhook endpoint not found: {endpoint_id}")
    return {"endpoint": _endpoint_view(endpoint)}


@router.get(
    "/endpoints/{endpoint_id}/deliveries",
    response_model=None,
    responses={**ok(200, None, {"deliveries": [_DELIVERY]}, "newest first"), **error_responses(400, 404)},
)
async def list_deliveries(
    runtime: RuntimeDep,
    caller: Caller,
    endpoint_id: str = ENDPOINT_ID,
    limit: int = Query(default=100, ge=1, le=1000),
) -> dict[str, Any]:
    principal = admin(caller)
    await _endpoint(runtime, principal.tenant_id, endpoint_id)
    found = await webhooks_of(runtime).list_deliveries(principal.tenant_id, endpoint_id, limit)
    return {"deliveries": [_delivery_view(d) for d in found]}


@router.post(
    "/deliveries/{delivery_id}/replay",
    response_model=None,
    responses={
        **ok(200, None, {"delivery": _DELIVERY}, "the delivery, pending again"),
        **error_responses(400, 404),
    },
)
async def replay_delivery(
    runtime: RuntimeDep, caller: Caller, delivery_id: str = Path(min_length=1, max_length=MAX_ID)
) -> dict[str, Any]:
    """Send a delivery again at once (the same ``webhook-id``), whatever its status."""
    principal = admin(caller)
    again = await replay(runtime, principal.tenant_id, delivery_id)
    if again is None:
        raise NotFound(f"webhook delivery not found: {delivery_id}")
    return {"delivery": _delivery_view(again)}


__all__ = ["NewEndpoint", "router"]
