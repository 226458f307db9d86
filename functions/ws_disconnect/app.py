"""``$disconnect``: forget the connection and its subscriptions.

Delivery of ``$disconnect`` is best-effort (API Gateway says so): a connection whose event never
arrives is pruned when a post to it answers 410, and its record expires by TTL after the 2-hour
connection limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from agentvm.adapters.aws.cloudwatch.emf_metrics import held
from agentvm.hosts.aws import LambdaEntry, run_sync
from agentvm.observability.metrics import record_connection

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name",)

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        request = event["requestContext"]
        connection_id = request["connectionId"]
        logger.append_keys(connection_id=connection_id)
        info = run_sync(rt.connections.get(connection_id))  # whose it was, for the metrics
        run_sync(rt.connections.remove(connection_id))
        # one EMF document (observability/metrics.py), carried by the `disconnected` line
        with held() as documents:
            record_connection(rt, info.tenant_id if info is not None else None, opened=False)
            extra: dict[str, Any] = {
                "status_code": request.get("disconnectStatusCode"),
                "reason": request.get("disconnectReason"),
            }
            extra.update(documents.for_line("connection", logger))
            logger.info("disconnected", extra=extra)
        return {"statusCode": 200}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
