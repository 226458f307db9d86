"""The ``$connect`` REQUEST authorizer: who is opening this WebSocket (API keys, SECURITY.md).

API Gateway calls it before ``$connect`` with the upgrade request's ``headers`` and
``queryStringParameters``; its answer is an IAM policy for ``execute-api:Invoke`` on the
``$connect`` ``methodArn`` (``adapters/aws/apigw_authorizer.py``): **Allow** with the key's tenant
and id for a client key, **Allow** with an empty context without credentials (the connection may
send only an ``auth`` frame, what browser clients send), **Deny** for bad credentials (API Gateway
refuses the upgrade with 403; no connection is made).

Anything else (DynamoDB or SSM unavailable) raises: API Gateway answers 500 and refuses the
upgrade too, so a failure never lets a connection in with an identity. The authorizer has no
identity sources (template.yaml): with one, API Gateway would refuse credential-less browser
upgrades itself, before the ``auth`` frame could be sent; it also means results are never cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from agentvm.adapters.aws.apigw_authorizer import authorize_upgrade
from agentvm.hosts.aws import LambdaEntry, run_sync

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "auth_secret_parameter")

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    auth = rt.auth
    assert auth is not None  # aws_runtime always attaches one

    # Never log_event=True: the event holds the token.
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        logger.append_keys(connection_id=(event.get("requestContext") or {}).get("connectionId"))
        return run_sync(authorize_upgrade(auth, event, logger))

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
