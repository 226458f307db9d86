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

A post never holds a turn for long: the client has short connect and read timeouts (a post is a
small request API Gateway answers in milliseconds) and botocore retries it at most once. A
connection whose post timed out is **stalled**: for ``stall_s`` its posts fail at once with
``ConnectionStalled`` instead of each waiting out the timeout again, so one connection that cannot
be reached costs a turn one timeout, not one per frame. The fanout skips it; the client resumes
from its last ``seq``.

``posts`` and ``billed_messages`` count delivered frames and the 32 KB units API Gateway bills for
them ($1 per million), for the benchmarks.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from typing import Any

from agentvm.errors import AgentVMError, ConnectionGone

# API Gateway meters WebSocket messages in 32 KB increments.
BILLING_UNIT_BYTES = 32 * 1024


class ConnectionStalled(AgentVMError):
    """A post to this connection timed out recently; its frames are skipped for a while."""

    code = "connection_stalled"


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
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 3.0,
        stall_s: float = 30.0,
    ) -> None:
        if client is None:
            import boto3
            from botocore.config import Config

            config = Config(
                connect_timeout=connect_timeout_s,
                read_timeout=read_timeout_s,
                retries={"mode": "standard", "total_max_attempts": 2},
            )
            client = boto3.client("apigatewaymanagementapi", endpoint_url=endpoint_url, config=config)
        self._client = client
        self.endpoint_url = endpoint_url
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._stall_s = stall_s
        self._stalled: dict[str, float] = {}  # connection id -> monotonic time its stall ends
        self.posts = 0  # frames delivered
        self.billed_messages = 0  # their 32 KB billing units

    async def send(self, connection_id: str, payload: str) -> None:
        until = self._stalled.get(connection_id)
        if until is not None:
            if time.monotonic() < until:
                raise ConnectionStalled(f"connection {connection_id} did not take a post in time")
            del self._stalled[connection_id]
        data = payload.encode()
        for attempt in range(self._max_attempts):
            try:
                await asyncio.to_thread(
                    self._client.post_to_connection, ConnectionId=connection_id, Data=data
                )
            except Exception as exc:
                if _is_timeout(exc):
                    self._stalled[connection_id] = time.monotonic() + self._stall_s
                    raise ConnectionStalled(f"a post to connection {connection_id} timed out") from exc
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


def _is_timeout(exc: Exception) -> bool:
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

    return isinstance(exc, ConnectTimeoutError | ReadTimeoutError)


def _error_code(exc: Exception) -> str | None:
    """The service error code of a botocore ``ClientError`` (modelled exceptions included), else None."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


__all__ = ["BILLING_UNIT_BYTES", "ApiGatewayPush", "ConnectionStalled"]
