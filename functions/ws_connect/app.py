"""``$connect``: register the new connection and the tenant it belongs to.

API Gateway calls this once per socket, before the upgrade completes; returning 200 accepts the
connection. Nothing may be posted to the connection from here (it does not exist yet: a post
answers 410). The tenant comes from the REQUEST authorizer's context
(``requestContext.authorizer.tenantId``); the stack has no authorizer yet, so every connection
belongs to the single tenant ``default`` until API-key auth lands (see docs/deploy.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from agentvm.bootstrap import LambdaEntry, run_sync
from agentvm.ports import ConnectionInfo

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.core.runtime import Runtime

DEFAULT_TENANT = "default"
REQUIRED_SETTINGS = ("table_name",)

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        request = event["requestContext"]
        tenant_id = (request.get("authorizer") or {}).get("tenantId") or DEFAULT_TENANT
        connection_id = request["connectionId"]
        logger.append_keys(connection_id=connection_id, tenant_id=tenant_id)
        connected_at = request.get("connectedAt") or rt.clock.now_ms()
        run_sync(rt.connections.register(ConnectionInfo(connection_id, tenant_id, connected_at)))
        logger.info("connected")
        return {"statusCode": 200}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
