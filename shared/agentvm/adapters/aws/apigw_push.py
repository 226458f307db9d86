"""The ``Push`` port on API Gateway's ``@connections`` API: one ``post_to_connection`` per frame.

Errors of the management API, translated here:

* ``GoneException`` (HTTP 410): the connection is closed, was never established, or its id is
  stale. Raised as ``agentvm.errors.ConnectionGone``; the fanout then forgets the connection, which
  matters because ``$disconnect`` is best-effort.
* ``LimitExceededException``: the account's request rate, or the client's receive buffer is full.
  The limit is not published, so the post is retried a few times with jittered exponential
  backoff, then the error propagates.
* anything else (``PayloadTooLargeException``, ``ForbiddenException``, throttling that outlived
  botocore's own retries) propagates unchanged.

``posts`` and ``billed_messages`` count delivered frames and the 32 KB units API Gateway bills for
them ($1 per million), for the benchmarks.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

from agentvm.errors import ConnectionGone

# API Gateway meters WebSocket messages in 32 KB increments.
BILLING_UNIT_BYTES = 32 * 1024


class ApiGatewayPush:
    """``agentvm.ports.Push`` through ``apigatewaymanagementapi``.

    ``endpoint_url`` is ``https://{api-id}.execute-api.{region}.amazonaws.com/{stage}`` (or the
    custom domain and base path). ``client`` is a boto3 ``apigatewaymanagementapi`` client; when
    none is given, boto3 is imported and one is built for ``endpoint_url`` (offline).
    """

    def __init__(
        self,
        endpoint_url: str,
        *,
        client: Any | None = None,
        max_attempts: int = 3,
        backoff_s: float = 0.05,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("apigatewaymanagementapi", endpoint_url=endpoint_url)
        self._client = client
        self.endpoint_url = endpoint_url
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self.posts = 0  # frames delivered
        self.billed_messages = 0  # their 32 KB billing units

    async def send(self, connection_id: str, payload: str) -> None:
        data = payload.encode()
        for attempt in range(self._max_attempts):
            try:
                await asyncio.to_thread(
                    self._client.post_to_connection, ConnectionId=connection_id, Data=data
                )
            except Exception as exc:
                code = _error_code(exc)
                if code == "GoneException":
                    raise ConnectionGone(f"connection {connection_id} is gone") from exc
                if code == "LimitExceededException" and attempt + 1 < self._max_attempts:
                    # Full jitter: a random wait up to the exponential cap, so that the posts of
                    # many concurrent turns that hit the limit together do not retry together.
                    await asyncio.sleep(random.uniform(0, self._backoff_s * 2**attempt))
                    continue
                raise
            self.posts += 1
            self.billed_messages += max(1, math.ceil(len(data) / BILLING_UNIT_BYTES))
            return


def _error_code(exc: Exception) -> str | None:
    """The service error code of a botocore ``ClientError`` (modelled exceptions included), else None."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


__all__ = ["BILLING_UNIT_BYTES", "ApiGatewayPush"]
