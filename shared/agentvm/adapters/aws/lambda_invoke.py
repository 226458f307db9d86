"""Starting another function without waiting for it: Lambda's asynchronous invoke
(``InvocationType="Event"``). The AWS host wakes the webhook sender with it right after a delivery
is recorded or replayed (``adapters/aws/dynamodb/webhooks.py``), so the delivery goes out in
seconds instead of at the sender's next scheduled minute.

Lambda queues the event and answers ``202`` at once (a few milliseconds in the caller); the woken
function runs on its own, with Lambda's own retries of a failed run. Cost: one request
($0.20 per million) plus the sender's run, only when a tenant has an endpoint for the event.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class AsyncInvoke:
    """Calling it starts ``function_name`` with ``payload``, asynchronously. The boto3 client is made
    on the first call (no network I/O at build time)."""

    def __init__(self, function_name: str, payload: dict[str, Any], *, client: Any | None = None) -> None:
        self.function_name = function_name
        self._payload = json.dumps(payload).encode()
        self._client = client

    async def __call__(self) -> None:
        if self._client is None:
            import boto3

            self._client = boto3.client("lambda")
        await asyncio.to_thread(
            self._client.invoke,
            FunctionName=self.function_name,
            InvocationType="Event",
            Payload=self._payload,
        )


__all__ = ["AsyncInvoke"]
