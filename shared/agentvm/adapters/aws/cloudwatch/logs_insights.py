"""CloudWatch Logs Insights: run one query over the functions' log group and wait for its rows.

Used by ``/v1/logs`` (``cloudwatch_logs.py``) and ``/v1/metrics`` (``emf_metrics.py``) on the AWS
host. A query is started, then polled until it completes; one that has not completed within
``timeout_s`` is stopped and answered ``503 query_timeout`` (the caller narrows its range). A
query costs $0.005 per GB of log data scanned in its time range.

String values go into a query only through ``quoted`` (a double-quoted literal with ``\\`` and
``"`` escaped), and each filter is its own ``| filter`` stage, so no value can widen another
stage's condition (the tenant's above all).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from agentvm.errors import AgentVMError, QueryTimedOut

if TYPE_CHECKING:
    from collections.abc import Callable

_DONE = {"Complete", "Failed", "Cancelled", "Timeout", "Unknown"}


def quoted(value: str) -> str:
    """``value`` as an Insights string literal."""
    cleaned = "".join(ch for ch in value if ch >= " ")  # no control characters (newlines end a stage)
    return '"' + cleaned.replace("\\", "\\\\").replace('"', '\\"') + '"'


class LogsInsights:
    """Queries over one log group. The boto3 client is made on first use (no cold-start cost)."""

    def __init__(
        self,
        log_group: str,
        *,
        client: Any = None,
        timeout_s: float = 20.0,
        poll_s: float = 0.25,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_group = log_group
        self._client = client
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._monotonic = monotonic
        self.queries: list[str] = []  # the query strings run, last one last (tests, debugging)

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("logs")
        return self._client

    async def run(
        self, query: str, since_ms: int, until_ms: int, *, limit: int | None = None
    ) -> list[dict[str, str]]:
        """The rows of ``query`` over ``[since_ms, until_ms]`` (Insights times are whole seconds:
        the range is widened to them; queries filter ``@timestamp`` to the millisecond themselves)."""
        self.queries.append(query)
        args: dict[str, Any] = {
            "logGroupName": self.log_group,
            "startTime": since_ms // 1000,
            "endTime": -(-until_ms // 1000),
            "queryString": query,
        }
        if limit is not None:
            args["limit"] = limit
        started = await asyncio.to_thread(self.client.start_query, **args)
        query_id = started["queryId"]
        deadline = self._monotonic() + self.timeout_s
        while True:
            answer = await asyncio.to_thread(self.client.get_query_results, queryId=query_id)
            status = answer.get("status", "Unknown")
            if status in _DONE:
                break
            if self._monotonic() >= deadline:
                try:
                    await asyncio.to_thread(self.client.stop_query, queryId=query_id)
                except Exception:  # it may have finished meanwhile; nothing else to undo
                    pass
                raise QueryTimedOut(
                    f"the log query did not finish within {self.timeout_s:g} s: narrow the time range"
                )
            await asyncio.sleep(self.poll_s)
        if status != "Complete":
            raise AgentVMError(f"the log query ended {status.lower()}")
        return [{cell["field"]: cell.get("value", "") for cell in row} for row in answer.get("results", [])]


__all__ = ["LogsInsights", "quoted"]
