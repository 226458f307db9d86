"""The turn worker: SQS FIFO turn jobs in, streamed turns out (``process_turn``).

The queue's message group is the session, so SQS hands out one session's turns in order and
never two of them at once. One invocation receives up to ``BatchSize`` jobs, usually of different
sessions: they run concurrently on one event loop, so the invocation's wait on the models (most of
its billed duration) is shared between them. Failures are reported per record
(``ReportBatchItemFailures``): only failed records return to the queue (``hosts/lambda_entry.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

# First of the core, before pydantic is imported: see hosts/lambda_entry.py (cold start).
from agentvm.hosts.lambda_entry import sqs_batch_handler  # isort: skip
from agentvm.adapters.aws.cloudwatch.emf_metrics import held
from agentvm.adapters.aws.sqs_queue import job_from_body
from agentvm.hosts.aws import LambdaEntry, run_sync
from agentvm.observability.metrics import turn_line
from agentvm.turns.worker import process_turn

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from agentvm.runtime import Runtime

# the server secret seals the ids of MCP tasks turns wait on (turns/mcp_tasks.py)
REQUIRED_SETTINGS = ("table_name", "ws_endpoint", "auth_secret_parameter")

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
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
            figures = documents.for_line("turn", logger) or turn_line(outcome, rt.clock.monotonic() - started)
            logger.info("turn finished", extra=figures)

    # Sessions concurrently on the process's loop; ``run_sync`` is looked up on each batch (a test
    # gives the worker a loop of its own by replacing this module's).
    return sqs_batch_handler(
        record_handler, logger=logger, by_session=True, run=lambda batch: run_sync(batch)
    )


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
