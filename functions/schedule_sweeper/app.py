"""The schedule sweeper: every minute (an EventBridge Scheduler schedule), the schedules whose tick
came send their message (``turns.schedules.fire_due``: each tick claimed once in the table, however
many invocations run it; the turns go to the turn queue as any turn), and runs whose sweeper died
between the claim and the send are sent again (docs/schedules.md).

Its own function, not a step of the wait sweeper: a run may make an image (``sessionPolicy: new``,
which resolves its model: the provider keys), which the wait sweeper has no business reading, and
a slow or failing schedule never delays approvals' timeouts nor the usage rollup.

A run that finds nothing due costs one Lambda request of a few milliseconds and two ``gsi2``
Queries (1 read unit): about 44,000 runs a month, under $0.03 (COST_MODEL.md prices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from agentvm.hosts.aws import LambdaEntry, rounds_until_done, run_sync
from agentvm.turns.schedules import fire_due

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "queue_url")
MAX_ROUNDS = 10  # at most 10 x 100 due schedules per run; the next minute's run takes the rest
MIN_ROUND_MS = 20_000  # no new round with less left than this (the function's timeout is 60 s)

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    async def run(context: Any) -> int:
        return await rounds_until_done(
            lambda: fire_due(rt), context=context, max_rounds=MAX_ROUNDS, reserve_ms=MIN_ROUND_MS
        )

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        runs = run_sync(run(context))
        if runs:
            logger.info("fired schedules", extra={"runs": runs})
        return {"runs": runs}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
