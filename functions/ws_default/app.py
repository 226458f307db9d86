"""``$default``: every frame a client sends (the API's only message route).

The frame goes to the gateway; its replies go back to the caller with ``@connections`` posts.
The integration's own return value never reaches the client (no route response is configured):
it only tells API Gateway the frame was handled. A ``message_send_request`` is answered with an
ACK here; the turn itself runs in ``turn_worker`` from the SQS FIFO queue, so this function never
waits on a model (the route integration times out after 29 s).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from agentvm.errors import ConnectionGone
from agentvm.gateway.dispatch import handle_frame
from agentvm.hosts.aws import LambdaEntry, run_sync

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "queue_url", "ws_endpoint", "auth_secret_parameter")

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    async def handle(connection_id: str, raw: str | bytes) -> None:
        for payload in await handle_frame(rt, connection_id, raw):
            try:
                await rt.push.send(connection_id, payload)
            except ConnectionGone:  # the caller left meanwhile; $disconnect (or a TTL) cleans up
                logger.info("caller gone before its reply")
                return

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        connection_id = event["requestContext"]["connectionId"]
        logger.append_keys(connection_id=connection_id)
        body = event.get("body") or ""
        raw: str | bytes = base64.b64decode(body) if event.get("isBase64Encoded") else body
        run_sync(handle(connection_id, raw))
        return {"statusCode": 200}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
