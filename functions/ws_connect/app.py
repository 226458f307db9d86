"""``$connect``: register the new connection and who it is (``adapters/aws/apigw_connect.py``).

API Gateway calls this once per socket, after the ``$connect`` REQUEST authorizer
(``functions/ws_authorizer``) allowed it and before the upgrade completes; returning 200 accepts
the connection. Nothing may be posted to the connection from here (it does not exist yet: a post
answers 410). The tenant and the API key come from the authorizer's context; a connection without
them is registered unauthenticated and may send only an ``auth`` frame. An unknown ``?frames=``
value refuses the upgrade (400), and so does a tenant at its cap of live connections (429).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from agentvm.adapters.aws.apigw_connect import register_upgrade
from agentvm.hosts.aws import LambdaEntry, run_sync

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name",)

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return run_sync(register_upgrade(rt, event, logger))

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
