"""API Gateway's ``$connect``, translated: the new connection registered with who it is
(``functions/ws_connect``).

The tenant and the API key come from the authorizer's context (``requestContext.authorizer.tenantId``
/ ``keyId``, ``adapters/aws/apigw_authorizer.py``). A connection opened without credentials has
neither: it is registered unauthenticated, and may send only an ``auth`` frame (browser clients),
which registers it again with its key's tenant (``gateway/access.py``). There is no default tenant.
A client may declare batched frames with ``?frames=batch`` (``streaming.batching``): recorded by
the same write; an unknown ``frames`` value refuses the upgrade (400). A tenant at its cap of live
connections (``security/tenant_limits.py``) is refused with 429 (the client sees the upgrade fail).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.adapters.aws.cloudwatch.emf_metrics import held
from agentvm.errors import AgentVMError, RateLimited
from agentvm.observability.metrics import record_connection
from agentvm.ports import ConnectionInfo
from agentvm.security.tenant_limits import connection_cap
from agentvm.streaming.batching import asked_cadence, wants_batches

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

    from agentvm.runtime import Runtime


async def register_upgrade(rt: Runtime, event: dict[str, Any], log: Logger) -> dict[str, Any]:
    """Register the ``$connect`` ``event``'s connection; the answer to API Gateway (200 accepts).

    ``log`` gets the connection's keys (connection, tenant, key) and one line: ``connected`` (with
    the connection's EMF document, ``emf_metrics.held``) or ``upgrade refused``."""
    request = event["requestContext"]
    authorizer = request.get("authorizer") or {}
    tenant_id, key_id = authorizer.get("tenantId"), authorizer.get("keyId")
    connection_id = request["connectionId"]
    log.append_keys(connection_id=connection_id, tenant_id=tenant_id, key_id=key_id)
    connected_at = request.get("connectedAt") or rt.clock.now_ms()
    try:  # ?frames=batch: this client takes several frames per message (streaming/batching.py)
        query = event.get("queryStringParameters") or {}
        batch = wants_batches(query)
        cadence = asked_cadence(query)  # ?cadence=live|economy: its text cadence (batch_cadence.py)
    except AgentVMError as exc:
        log.info("upgrade refused", extra={"code": exc.code, "reason": exc.message})
        return {"statusCode": 400}
    info = ConnectionInfo(connection_id, tenant_id, connected_at, key_id=key_id, batch=batch, cadence=cadence)
    cap = await connection_cap(rt.tenant_limits, tenant_id)  # security/tenant_limits.py
    try:
        await rt.connections.register(info, tenant_cap=cap)
    except RateLimited as exc:  # the tenant holds its cap of live connections
        log.info("upgrade refused", extra={"code": exc.code, "reason": exc.message})
        return {"statusCode": 429}
    # one EMF document (observability/metrics.py), carried by the `connected` line (emf_metrics.held)
    with held() as documents:
        record_connection(rt, tenant_id, opened=True)
        extra: dict[str, Any] = {"authenticated": tenant_id is not None}  # else: awaits an auth frame
        extra.update(documents.for_line("connection", log))
        log.info("connected", extra=extra)
    return {"statusCode": 200}


__all__ = ["register_upgrade"]
