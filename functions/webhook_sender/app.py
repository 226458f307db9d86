"""The webhook sender: every minute (an EventBridge schedule), and at once when the turn worker or
the HTTP API wakes it (an asynchronous invoke after a delivery is recorded or replayed), it sends
the outbox's due deliveries, signed, with the backoff of ``turns.webhooks.deliver_due``, the code
the local server's sender runs (docs/webhooks.md).

Rounds of ``ROUND`` deliveries until none is due or the time left is under ``RESERVE_MS``: an
attempt waits at most ``SEND_TIMEOUT_S`` (10 s) for its receiver, so a round fits the reserve, and
what is left goes out on the next run. A run cut off mid-attempt leaves that delivery leased: sent
again after the one-minute lease, with the same ``webhook-id``. Outbound HTTPS: the function is in
no VPC, so it reaches the internet directly (docs/deploy.md).

A run that finds nothing: one Lambda request of a few milliseconds and one ``gsi1`` Query
(about 44,000 runs a month, under $0.03 at COST_MODEL.md prices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from agentvm.hosts.aws import LambdaEntry, rounds_until_done, run_sync

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.runtime import Runtime

REQUIRED_SETTINGS = ("table_name", "auth_secret_parameter")  # the secret the endpoints' are sealed with
ROUND = 4
RESERVE_MS = 45_000  # a round's worst case: ROUND attempts of SEND_TIMEOUT_S (10 s) each, and the writes

logger = Logger()


def build_handler(rt: Runtime) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    async def run(context: Any) -> int:
        import httpx

        from agentvm.turns.webhooks import deliver_due

        async with httpx.AsyncClient(follow_redirects=False) as client:  # per run: no pool frozen between
            return await rounds_until_done(
                lambda: deliver_due(rt, client, allow_private=rt.webhooks_allow_private, limit=ROUND),
                context=context,
                reserve_ms=RESERVE_MS,
            )

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        attempts = run_sync(run(context))
        if attempts:
            logger.info(
                "sent webhook deliveries", extra={"attempts": attempts, "source": event.get("source")}
            )
        return {"attempts": attempts}

    return handler


lambda_handler = LambdaEntry(build_handler, require=REQUIRED_SETTINGS, logger=logger)
