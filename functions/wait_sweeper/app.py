"""The wait sweeper: every minute (an EventBridge schedule), suspended turns whose wait passed its
deadline are answered ``timed_out`` and continued, continuations whose enqueue was lost are
enqueued again, and the MCP tasks turns wait on are asked how they are (``tasks/get``: their
progress pushed to the session, an ended one's result answering its wait: ``turns.mcp_tasks``)
(``turns.waits.sweep_waits``); and the usage hours that closed are rolled up into their
sums (``DynamoDbUsageRollups.roll_closed_hours``: at most ``ROLLUP_LIMIT`` tenant hours per run).

One Query of the due marks per run, plus a read and a write or two per wait it acts on; nothing
else. A run that finds nothing costs one Lambda request of a few milliseconds and one read unit:
about 44,000 runs a month, under $0.03 (COST_MODEL.md prices). The rollup adds eight ``gsi2`` Queries
of the open hour markers per run (4 RRU when none is due: ~$0.02 a month) and, per tenant hour it rolls, a
GetItem, a Query of its records and a write per container active in it plus the marker's. A
pending MCP task adds one ``tasks/get`` per run (a session per server per run; the MCP SDK is
imported only then) and its next poll time written (the wait and its due mark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from agentvm.adapters.aws.dynamodb.usage import DynamoDbUsageRollups
from agentvm.hosts.aws import LambdaEntry, rounds_until_done, run_sync
from agentvm.turns.waits import sweep_waits

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

# the server secret opens the ids of MCP tasks turns wait on (turns/mcp_tasks.py)
REQUIRED_SETTINGS = ("table_name", "queue_url", "auth_secret_parameter")
MAX_ROUNDS = 20  # at most 20 x 100 waits per run; the next run takes the rest

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    async def run() -> tuple[int, int]:
        total = await rounds_until_done(lambda: sweep_waits(rt), max_rounds=MAX_ROUNDS)
        rolled = 0
        if isinstance(rt.usage, DynamoDbUsageRollups):
            rolled = (await rt.usage.roll_closed_hours(rt.clock.now_ms())).rolled
        return total, rolled

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        acted, rolled = run_sync(run())
        if acted:
            logger.info("swept suspended turns", extra={"waits": acted})
        if rolled:
            logger.info("rolled up usage hours", extra={"hours": rolled})
        return {"waits": acted, "usageHours": rolled}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
