"""The wait sweeper: every minute (an EventBridge schedule), suspended turns whose wait passed its
deadline are answered ``timed_out`` and continued, and continuations whose enqueue was lost are
enqueued again (``agent.waits.sweep``).

One Query of the due marks per run, plus a read and a write or two per wait it acts on; nothing
else. A run that finds nothing costs one Lambda request of a few milliseconds and one read unit:
about 44,000 runs a month, under $0.03 (COST_MODEL.md prices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from agentvm.agent.waits import sweep
from agentvm.hosts.aws import LambdaEntry, run_sync

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "queue_url")
MAX_ROUNDS = 20  # at most 20 x 100 waits per run; the next run takes the rest

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    async def run() -> int:
        total = 0
        for _ in range(MAX_ROUNDS):
            acted = await sweep(rt)
            total += acted
            if acted == 0:
                break
        return total

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        acted = run_sync(run())
        if acted:
            logger.info("swept suspended turns", extra={"waits": acted})
        return {"waits": acted}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
