"""What schedules cost on AWS: the schedule sweeper's requests and billed units, measured on moto.

The AWS runtime (``aws_runtime``: the DynamoDB store, schedules, budgets, tenants on one table, the
SQS FIFO turn queue) with every AWS request counted and billed by ``benchmarks/billing.py``
(``Metering``, as ``cost_meter`` does). Three measurements of ``turns.schedules.fire_due``, the
sweeper's one step:

* **idle**: a sweep that finds nothing due (what 44,640 invocations a month cost at least);
* **first tick**: a sweep firing ``--schedules`` schedules' first ticks (per run);
* **later tick**: the next tick of each (per run): it also settles the previous run's tokens.

The turns themselves (the worker's part) are not counted: a scheduled turn costs what any turn
costs (``cost_meter``). Lambda's own request and duration are added from the template's memory and
the handler's measured CPU time is not (moto's is mixed in): see the idle row's note.

Run: ``./dev python -m benchmarks.schedule_sweeps [--schedules 50]``
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime

from benchmarks import prices
from benchmarks.billing import DDB_READ, DDB_WRITE, SQS_REQUEST, TableSchema
from benchmarks.moto_turns import Metering

TABLE = "agentvm-schedules-bench"
TENANT = "tenant-bench"
RUNS_A_MONTH = 31 * 24 * 60  # rate(1 minute)


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


async def measure(n: int) -> list[dict[str, str]]:
    import boto3

    from agentvm.config import Settings
    from agentvm.hosts.aws import aws_runtime
    from agentvm.images import ImageConfig, create
    from agentvm.records import ScheduleRecord
    from agentvm.turns.schedules import fire_due, next_tick
    from tests.security_harness import ManualClock

    schema = TableSchema(("pk", "sk"), {"gsi1": ("gsi1pk", "gsi1sk"), "gsi2": ("gsi2pk", "gsi2sk")})
    metering = Metering(schema)
    rows = []
    with metering.active():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="bench.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        rt = aws_runtime(Settings(table_name=TABLE, queue_url=url))
        from agentvm.adapters.aws.dynamodb.store import DynamoDbStore

        DynamoDbStore(TABLE).create_table()
        clock = ManualClock(_ms("2026-01-15T09:59:30"))
        rt.clock = clock
        assert rt.schedules is not None
        for i in range(n):
            image = await create(
                rt, TENANT, f"user-{i}", ImageConfig(name="Daily"), admin=True, by=None, notices=[]
            )
            now = clock.now_ms()
            await rt.schedules.put_schedule(
                ScheduleRecord(
                    tenantId=TENANT,
                    scheduleId=f"sch_bench_{i:04d}",
                    imageId=image.imageId,
                    containerId=image.containerId,
                    cron="0 * * * *",
                    message="Summarise yesterday's tickets.",
                    tokensPerRun=20_000,
                    tokensPerDay=100_000,
                    nextAt=next_tick("0 * * * *", "UTC", now),
                    createdAt=now,
                    updatedAt=now,
                )
            )
        calls = metering.aws.calls

        async def step(label: str, at: str, per: int) -> None:
            clock.ms = _ms(at)
            before = len(calls)
            fired = await fire_due(rt)
            assert fired == per, (label, fired)
            made = calls[before:]
            wru = sum(c.units for c in made if c.kind == DDB_WRITE)
            rru = sum(c.units for c in made if c.kind == DDB_READ)
            sqs_requests = sum(c.units for c in made if c.kind == SQS_REQUEST)
            per_run = max(per, 1)
            usd = (
                wru * prices.DDB_WRITE_UNIT.usd
                + rru * prices.DDB_READ_UNIT.usd
                + sqs_requests * prices.SQS_FIFO_REQUEST.usd
            ) / per_run
            rows.append(
                {
                    "sweep": label,
                    "runs fired": str(per),
                    "AWS requests per run": f"{len(made) / per_run:.1f}",
                    "write units per run": f"{wru / per_run:.1f}",
                    "read units per run": f"{rru / per_run:.1f}",
                    "SQS requests per run": f"{sqs_requests / per_run:.1f}",
                    "$ per million runs (requests, no Lambda)": f"{usd * 1e6:.2f}",
                }
            )

        await step("idle (nothing due)", "2026-01-15T09:59:40", 0)
        await step("first tick of each schedule", "2026-01-15T10:00:05", n)
        await step("a later tick (settles the previous run)", "2026-01-15T11:00:05", n)
    idle = rows[0]
    lambda_usd = prices.LAMBDA_REQUEST.usd + 0.256 * 0.05 * prices.LAMBDA_ARM_GB_S.usd  # 50 ms at 256 MB
    reads_usd = float(idle["read units per run"]) * prices.DDB_READ_UNIT.usd
    month = RUNS_A_MONTH * (lambda_usd + reads_usd)
    idle["$ per million runs (requests, no Lambda)"] += (
        f" (a month of idle sweeps: ${month:.3f} with Lambda at 50 ms, 256 MB)"
    )
    return rows


def render(rows: list[dict[str, str]]) -> str:
    keys = list(rows[0])
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(r[k] for k in keys) + " |" for r in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=50)
    args = parser.parse_args()
    print(render(asyncio.run(measure(args.schedules))))


if __name__ == "__main__":
    main()
