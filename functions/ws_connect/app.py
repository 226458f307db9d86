"""``$connect``: register the new connection and who it is.

API Gateway calls this once per socket, after the ``$connect`` REQUEST authorizer
(``functions/ws_authorizer``) allowed it and before the upgrade completes; returning 200 accepts
the connection. Nothing may be posted to the connection from here (it does not exist yet: a post
answers 410). The tenant and the API key come from the authorizer's context
(``requestContext.authorizer.tenantId`` / ``keyId``). A connection opened without credentials has
neither: it is registered unauthenticated, and may send only an ``auth`` frame (browser clients),
which registers it again with its key's tenant (``core.gateway``). There is no default tenant.
A client may declare batched frames with ``?frames=batch`` (``streaming.batching``): recorded by
the same write; an unknown ``frames`` value refuses the upgrade (400). A tenant at its cap of live
connections (``security/tenant_limits.py``) is refused with 429 (the client sees the upgrade fail).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from agentvm.adapters.aws.cloudwatch.emf_metrics import held
from agentvm.errors import AgentVMError, RateLimited
from agentvm.hosts.aws import LambdaEntry, run_sync
from agentvm.observability.metrics import record_connection
from agentvm.ports import ConnectionInfo
from agentvm.security.tenant_limits import connection_cap
from agentvm.streaming.batching import wants_batches

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name",)

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        request = event["requestContext"]
        authorizer = request.get("authorizer") or {}
        tenant_id, key_id = authorizer.get("tenantId"), authorizer.get("keyId")
        connection_id = request["connectionId"]
        logger.append_keys(connection_id=connection_id, tenant_id=tenant_id, key_id=key_id)
        connected_at = request.get("connectedAt") or rt.clock.now_ms()
        try:  # ?frames=batch: this client takes several frames per message (streaming/batching.py)
            batch = wants_batches(event.get("queryStringParameters") or {})
        except AgentVMError as exc:
            logger.info("upgrade refused", extra={"code": exc.code, "reason": exc.message})
            return {"statusCode": 400}
        info = ConnectionInfo(connection_id, tenant_id, connected_at, key_id=key_id, batch=batch)
        cap = run_sync(connection_cap(rt.tenant_limits, tenant_id))  # security/tenant_limits.py
        try:
            run_sync(rt.connections.register(info, tenant_cap=cap))
        except RateLimited as exc:  # the tenant holds its cap of live connections
            logger.info("upgrade refused", extra={"code": exc.code, "reason": exc.message})
            return {"statusCode": 429}
        # one EMF document (observability/metrics.py), carried by the `connected` line (emf_metrics.held)
        with held() as documents:
            record_connection(rt, tenant_id, opened=True)
            extra: dict[str, Any] = {"authenticated": tenant_id is not None}  # else: awaits an auth frame
            extra.update(documents.for_line("connection", logger))
            logger.info("connected", extra=extra)
        return {"statusCode": 200}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
