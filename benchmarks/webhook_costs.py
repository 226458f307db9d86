"""What webhooks add on AWS, metered on moto: the DynamoDB units of a turn's end for a tenant without
endpoints and with one, and of the sender's attempts (delivered at once; a failure, then its retry).

The AWS host's real adapter (``aws_runtime``'s ``DynamoDbWebhooks``) and the core's own code
(``record_turn_event``, as ``turns.finish`` calls it; ``deliver_due``, as ``functions/webhook_sender``
runs it) on moto, every request billed by ``benchmarks.billing`` (the meter of ``cost_meter``), a
receiver on loopback. The sender's asynchronous invoke and Lambda time are not metered here
(docs/webhooks.md prices them).

    ./dev python -m benchmarks.webhook_costs
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict
from typing import Any

from benchmarks.billing import DDB_READ, DDB_WRITE, TableSchema
from benchmarks.moto_turns import Metering
from benchmarks.prices import DDB_READ_UNIT, DDB_WRITE_UNIT

TABLE = "agentvm-webhook-costs"
SCHEMA = TableSchema(("pk", "sk"), {"gsi1": ("gsi1pk", "gsi1sk"), "gsi2": ("gsi2pk", "gsi2sk")})


def _job(tenant: str, turn: str) -> Any:
    from agentvm.records import TurnJob

    return TurnJob(
        turnId=turn,
        tenantId=tenant,
        containerId="user-1",
        imageId="img_1",
        sessionId="sess_1",
        agentId="agent_1",
        userMessageId="msg_1",
        requestId="req_1",
        enqueuedAt=1,
    )


async def _phases(metering: Metering) -> list[tuple[str, dict[str, float], int]]:
    import httpx

    from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
    from agentvm.config import Settings
    from agentvm.hosts.aws import aws_runtime
    from agentvm.records import WebhookEndpoint
    from agentvm.turns.webhooks import BACKOFF_BASE_S, deliver_due, new_secret, record_turn_event
    from tests.webhook_receiver import Receiver

    DynamoDbStore(TABLE).create_table(wait=True)
    settings = Settings(
        table_name=TABLE,
        auth_secret="webhook-costs-server-secret-0123456789abcdef",
        webhooks_allow_private_networks=True,
    )
    rt = aws_runtime(settings)
    assert rt.webhooks is not None
    offset = [0]
    rt.clock.now_ms = lambda: time.time_ns() // 1_000_000 + offset[0]  # type: ignore[method-assign]
    receiver = Receiver([])
    endpoint = WebhookEndpoint(
        tenantId="hooked", endpointId="whe_1", url=receiver.url, events=["turn.ended"], createdAt=1
    )
    await rt.webhooks.put_endpoint(endpoint, new_secret())
    out: list[tuple[str, dict[str, float], int]] = []

    async def phase(name: str, work: Any) -> None:
        before = len(metering.aws.calls)
        await work
        units: dict[str, float] = defaultdict(float)
        calls = metering.aws.calls[before:]
        for call in calls:
            units[call.kind] += call.units
        out.append((name, dict(units), len(calls)))

    async with httpx.AsyncClient() as client:
        await phase(
            "a turn's end, tenant without endpoints",
            record_turn_event(rt, _job("plain", "t1"), "completed", None, attempt=1),
        )
        await phase(
            "a turn's end, tenant with one endpoint",
            record_turn_event(rt, _job("hooked", "t2"), "completed", None, attempt=1),
        )
        await phase("a sender run: the attempt, delivered", deliver_due(rt, client, allow_private=True))
        await phase("a sender run with nothing due", deliver_due(rt, client, allow_private=True))
        await record_turn_event(rt, _job("hooked", "t3"), "completed", None, attempt=1)
        receiver.statuses.append(500)
        await phase("a sender run: the attempt, answered 500", deliver_due(rt, client, allow_private=True))
        offset[0] += int(BACKOFF_BASE_S * 1000) + 1
        await phase("a sender run: the retry, delivered", deliver_due(rt, client, allow_private=True))
    receiver.close()
    return out


def render(rows: list[tuple[str, dict[str, float], int]]) -> str:
    lines = [
        "| step | DynamoDB requests | WRU | RRU | $ per million |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, units, requests in rows:
        wru, rru = units.get(DDB_WRITE, 0.0), units.get(DDB_READ, 0.0)
        usd = (wru * DDB_WRITE_UNIT.usd + rru * DDB_READ_UNIT.usd) * 1e6
        lines.append(f"| {name} | {requests} | {wru:g} | {rru:g} | ${usd:.2f} |")
    return "\n".join(lines)


def main() -> None:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    metering = Metering(SCHEMA)
    with metering.active():
        rows = asyncio.run(_phases(metering))
    print(render(rows))


if __name__ == "__main__":
    main()
