"""The HTTP API (payload format 2.0): the same FastAPI app ``avm serve`` serves, through Mangum.

``lifespan="off"``: Mangum would otherwise run the app's startup and shutdown on every
invocation; everything the app needs is built once, with the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from mangum import Mangum

from agentvm.api.app import create_app
from agentvm.hosts.aws import LambdaEntry, event_loop

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "auth_secret_parameter")

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    event_loop()  # Mangum runs the app on the thread's current loop: make that the process's one loop
    asgi = Mangum(create_app(rt), lifespan="off")

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return asgi(event, context)

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
