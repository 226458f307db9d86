"""The SQS workers' Lambda entry: a batch of queue records in, partial batch failures out.

``sqs_batch_handler`` is the synchronous ``handler(event, context)`` of ``functions/turn_worker``
and ``functions/sandbox_worker``: Powertools' partial-batch processing
(``ReportBatchItemFailures``: only failed records return to the queue, a batch where every record
failed is reported like any other, not raised), with the records' async work run to completion on
the process's one event loop (``run_sync``, never ``asyncio.run``: Lambda freezes the loop between
invocations). Two orders:

* ``by_session``: the turn queue's. Sessions (message groups) run concurrently on the loop, so the
  invocation's wait on the models is shared; one session's records run one after another
  (``SessionBatchProcessor``).
* otherwise one record at a time, in queue order: a sandbox job gets the whole CPU
  (``OneAtATimeProcessor``).

A worker imports this module before anything that imports pydantic: Powertools' batch types load
its pydantic parser models (about 100 ms of a cold start, unused here) when pydantic is already
imported, and nothing when it is not.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch.exceptions import SQSFifoMessageGroupCircuitBreakerError

from agentvm.hosts.aws import INVOCATION, run_sync

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    RunSync = Callable[[Coroutine[Any, Any, list[tuple[Any, ...]]]], list[tuple[Any, ...]]]

_SKIPPED = SQSFifoMessageGroupCircuitBreakerError("an earlier record of this session failed")


class OneAtATimeProcessor(AsyncBatchProcessor):
    """Powertools' partial-batch processor, one record after another on the process's one loop.

    A batch where every record failed is reported like any other (not raised): SQS treats both
    the same, and each failure was already logged with its own correlation keys.
    """

    def __init__(self, logger: Logger, run: RunSync | None = None) -> None:
        # typed as a stdlib logger by Powertools, which takes its own Logger all the same
        super().__init__(
            event_type=EventType.SQS,
            raise_on_entire_batch_failure=False,
            logger=logger,  # type: ignore[arg-type]
        )
        self._run = run

    def async_process(self) -> list[tuple[Any, ...]]:
        return (self._run or run_sync)(self._process_all())  # the process's one loop, never asyncio.run

    async def _process_all(self) -> list[tuple[Any, ...]]:
        return [await self._async_process_record(record) for record in self.records]


class SessionBatchProcessor(OneAtATimeProcessor):
    """Powertools' partial-batch processor, ordered for a FIFO queue grouped by session.

    Sessions (message groups) run concurrently; the records of one session run one after another,
    in queue order. When a record fails, the later records of its session are reported failed
    without running: SQS redelivers the whole tail after the failed record, so order holds. A
    record that succeeded is never reported, so it never runs twice.
    """

    async def _process_all(self) -> list[tuple[Any, ...]]:
        sessions: dict[str, list[dict[str, Any]]] = {}
        for record in self.records:
            group = record.get("attributes", {}).get("MessageGroupId") or record["messageId"]
            sessions.setdefault(group, []).append(record)
        results = await asyncio.gather(*(self._process_session(records) for records in sessions.values()))
        return [entry for entries in results for entry in entries]

    async def _process_session(self, records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        done: list[tuple[Any, ...]] = []
        for i, record in enumerate(records):
            done.append(await self._async_process_record(record))
            if done[-1][0] == "fail":
                skipped = (type(_SKIPPED), _SKIPPED, None)
                done += [
                    self.failure_handler(self._to_batch_type(r, self.event_type), skipped)
                    for r in records[i + 1 :]
                ]
                break
        return done


def sqs_batch_handler(
    record_handler: Callable[[SQSRecord], Awaitable[None]],
    *,
    logger: Logger,
    by_session: bool = False,
    run: RunSync | None = None,
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda handler of an SQS worker: each record to ``record_handler``, failures reported
    per record (``batchItemFailures``), ``logger`` given the invocation's context (state cleared).

    ``run`` runs a batch's coroutine to completion (default: ``run_sync``, the process's one loop).
    """
    processor = SessionBatchProcessor(logger, run) if by_session else OneAtATimeProcessor(logger, run)

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        INVOCATION.begin(context)  # how long an MCP server's question may wait in this invocation
        return dict(async_process_partial_response(event, record_handler, processor, context))

    return handler


__all__ = ["OneAtATimeProcessor", "SessionBatchProcessor", "sqs_batch_handler"]
