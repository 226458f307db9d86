"""The turn worker: SQS FIFO turn jobs in, streamed turns out (``process_turn``).

The queue's message group is the session, so SQS hands out one session's turns in order and
never two of them at once. One invocation receives up to ``BatchSize`` jobs, usually of different
sessions: they run concurrently on one event loop, so the invocation's wait on the models (most of
its billed duration) is shared between them. Failures are reported per record
(``ReportBatchItemFailures``): only failed records return to the queue.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch.exceptions import SQSFifoMessageGroupCircuitBreakerError

from agentvm.adapters.aws.cloudwatch.emf_metrics import held
from agentvm.adapters.aws.sqs_queue import job_from_body
from agentvm.hosts.aws import LambdaEntry, run_sync
from agentvm.observability.metrics import turn_status
from agentvm.turns.worker import process_turn

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from agentvm.agent.loop import TurnOutcome
    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "ws_endpoint")

logger = Logger()

_SKIPPED = SQSFifoMessageGroupCircuitBreakerError("an earlier record of this session failed")


class SessionBatchProcessor(AsyncBatchProcessor):
    """Powertools' partial-batch processor, ordered for a FIFO queue grouped by session.

    Sessions (message groups) run concurrently; the records of one session run one after another,
    in queue order. When a record fails, the later records of its session are reported failed
    without running: SQS redelivers the whole tail after the failed record, so order holds. A
    record that succeeded is never reported, so it never runs twice.
    """

    def __init__(self) -> None:
        # A batch where every record failed is reported like any other (not raised): SQS treats
        # both the same, and each failure was already logged with its own correlation keys.
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False, logger=logger)

    def async_process(self) -> list[tuple[Any, ...]]:
        return run_sync(self._process_sessions())  # the process's one loop, never asyncio.run

    async def _process_sessions(self) -> list[tuple[Any, ...]]:
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


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    processor = SessionBatchProcessor()

    async def record_handler(record: SQSRecord) -> None:
        job = job_from_body(record.body)
        # Task-local keys: the turns of other sessions log concurrently from the same process.
        logger.thread_safe_append_keys(
            session_id=job.sessionId, turn_id=job.turnId, tenant_id=job.tenantId, message_id=record.message_id
        )
        # The attempt's EMF document (observability/metrics.py) is recorded by the turn, and held:
        # the `turn finished` line carries it (adapters/aws/cloudwatch/emf_metrics.py), one line where two
        # said the same thing. Any document no line took is written on its own (held's end).
        started = rt.clock.monotonic()
        with held() as documents:
            outcome = await process_turn(rt, job)
            if outcome is None:
                logger.info("nothing to run: turn already finished or image deleted")
                return
            # no INFO line (a higher log level): nothing is taken, the document is written alone
            figures = documents.for_line("turn", logger) or _figures(outcome, rt, started)
            logger.info("turn finished", extra=figures)

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return dict(async_process_partial_response(event, record_handler, processor, context))

    return handler


def _figures(outcome: TurnOutcome, rt: Runtime, started: float) -> dict[str, Any]:
    """What `turn finished` says when no EMF document was recorded (metrics other than CloudWatch's),
    under the document's names."""
    figures: dict[str, Any] = {
        "model": outcome.model,
        "status": turn_status(outcome),
        "InputTokens": outcome.input_tokens,
        "OutputTokens": outcome.output_tokens,
        "TurnDurationMs": round((rt.clock.monotonic() - started) * 1000, 1),
    }
    if outcome.error is not None:
        figures["ErrorCode"] = outcome.error.code
    return figures


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
