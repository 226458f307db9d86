"""API Gateway's ``$connect`` REQUEST authorizer, translated: an upgrade event in, an IAM policy out
(``functions/ws_authorizer``; API keys, SECURITY.md).

``authorize_upgrade`` reads the upgrade request's ``headers`` and ``queryStringParameters`` and
answers with a policy for ``execute-api:Invoke`` on the event's ``methodArn`` (``policy``):

* ``Authorization: Bearer <key>`` (or, without that header, ``?token=<key>``) of an active key with
  the ``client`` scope: **Allow**, with ``context = {"tenantId", "keyId"}``;
* no credentials: **Allow** with an empty context (principal ``ANONYMOUS``): the connection may
  send only an ``auth`` frame until one authenticates it;
* bad credentials (malformed, unknown, revoked, wrong secret, no ``client`` scope): **Deny**.

Anything else (the key store or the server secret unavailable) raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.errors import Unauthorized

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

    from agentvm.security.auth import Authenticator

ANONYMOUS = "anonymous"  # the principalId of an Allow without credentials (API Gateway requires one)


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


async def authorize_upgrade(auth: Authenticator, event: dict[str, Any], log: Logger) -> dict[str, Any]:
    """The authorizer's answer to the upgrade ``event``; one line on ``log`` says which (never the token)."""
    method_arn = event["methodArn"]
    headers = event.get("headers") or {}
    query = event.get("queryStringParameters") or {}
    try:
        principal = await auth.from_request(headers, query)
    except Unauthorized as exc:
        log.info("connection refused", extra={"reason": exc.message})
        return policy("Deny", method_arn, ANONYMOUS)
    if principal is None:
        log.info("connection allowed without credentials: it may send only an auth frame")
        return policy("Allow", method_arn, ANONYMOUS)
    assert principal.key_id is not None  # a key authenticated it (AWS has no open mode)
    log.info("connection authenticated", extra={"tenant_id": principal.tenant_id, "key_id": principal.key_id})
    context = {"tenantId": principal.tenant_id, "keyId": principal.key_id}
    return policy("Allow", method_arn, principal.key_id, context)


__all__ = ["ANONYMOUS", "authorize_upgrade", "policy"]
