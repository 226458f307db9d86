"""The ``$connect`` REQUEST authorizer: who is opening this WebSocket (API keys, SECURITY.md).

API Gateway calls it before ``$connect`` with the upgrade request's ``headers`` and
``queryStringParameters``; its answer is an IAM policy for ``execute-api:Invoke`` on the
``$connect`` ``methodArn``:

* ``Authorization: Bearer <key>`` (or, without that header, ``?token=<key>``) of an active key with
  the ``client`` scope: **Allow**, with ``context = {"tenantId", "keyId"}``; ``$connect`` registers
  the connection under that tenant and key (``requestContext.authorizer``).
* no credentials: **Allow** with an empty context. The connection is unauthenticated: every frame
  but ``auth`` is answered ``unauthorized`` until an ``auth`` frame (what browser clients send, as
  they cannot set headers) authenticates it on ``$default``.
* bad credentials (malformed, unknown, revoked, wrong secret, no ``client`` scope): **Deny**, and
  API Gateway refuses the upgrade with 403; no connection is made.

Anything else (DynamoDB or SSM unavailable) raises: API Gateway answers 500 and refuses the
upgrade too, so a failure never lets a connection in with an identity. The authorizer has no
identity sources (template.yaml): with one, API Gateway would refuse credential-less browser
upgrades itself, before the ``auth`` frame could be sent; it also means results are never cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from agentvm.errors import Unauthorized
from agentvm.hosts.aws import LambdaEntry, run_sync

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "auth_secret_parameter")
ANONYMOUS = "anonymous"  # the principalId of an Allow without credentials (API Gateway requires one)

logger = Logger()


def policy(
    effect: str, method_arn: str, principal_id: str, context: dict[str, str] | None = None
) -> dict[str, Any]:
    """An authorizer answer: ``effect`` (Allow / Deny) for ``execute-api:Invoke`` on ``method_arn``."""
    answer: dict[str, Any] = {
        "principalId": principal_id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": method_arn}],
        },
    }
    if context:
        answer["context"] = context
    return answer


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    auth = rt.auth
    assert auth is not None  # aws_runtime always attaches one

    # Never log_event=True: the event holds the token.
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        method_arn = event["methodArn"]
        logger.append_keys(connection_id=(event.get("requestContext") or {}).get("connectionId"))
        headers = event.get("headers") or {}
        query = event.get("queryStringParameters") or {}
        try:
            principal = run_sync(auth.from_request(headers, query))
        except Unauthorized as exc:
            logger.info("connection refused", extra={"reason": exc.message})
            return policy("Deny", method_arn, ANONYMOUS)
        if principal is None:
            logger.info("connection allowed without credentials: it may send only an auth frame")
            return policy("Allow", method_arn, ANONYMOUS)
        assert principal.key_id is not None  # a key authenticated it (AWS has no open mode)
        logger.info(
            "connection authenticated", extra={"tenant_id": principal.tenant_id, "key_id": principal.key_id}
        )
        context_ = {"tenantId": principal.tenant_id, "keyId": principal.key_id}
        return policy("Allow", method_arn, principal.key_id, context_)

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
