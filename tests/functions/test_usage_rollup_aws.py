"""The usage rollup through the real scheduled handler (``functions/wait_sweeper``) on moto: real
turns write their usage records, the sweeper rolls their hour once it is closed, and the sums read
the same before and after."""

from __future__ import annotations

import pytest

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.aws.dynamodb.usage import GRACE_MS, DynamoDbUsageRollups
from agentvm.hosts.aws import run_sync
from agentvm.observability.periods import HOUR_MS
from functions.wait_sweeper import app as wait_sweeper
from tests.functions.aws_host import TABLE, frame
from tests.functions.conftest import CONN, FakeLambdaContext
from tests.security_harness import ManualClock

pytestmark = pytest.mark.aws


def test_the_sweeper_rolls_up_a_closed_hour_and_the_sums_stay_the_records(host, model):
    img = host.image(CONN)
    for n in range(3):
        model.add(f"Answer {n}.")
        host.send(CONN, frame("message_send", f"req_{n}", imageId=img["imageId"], content=f"q{n}"))
        host.run_turns()
    records = run_sync(DynamoDbStore(TABLE).list_usage("default"))
    assert len(records) == 3
    start = min(r.createdAt for r in records) // HOUR_MS * HOUR_MS
    rollups = DynamoDbUsageRollups(TABLE)

    def summed() -> tuple[int, int, int, int]:
        hours = run_sync(rollups.hour_cells("default", start - HOUR_MS, start + 2 * HOUR_MS))
        days = run_sync(
            rollups.day_cells("default", start - start % 86_400_000, start - start % 86_400_000 + 86_400_000)
        )
        return (
            sum(c.records for c in hours),
            sum(c.input_tokens + c.output_tokens for c in hours),
            sum(c.records for c in days),
            sum(c.input_tokens + c.output_tokens for c in days),
        )

    tokens = sum(r.inputTokens + r.outputTokens for r in records)
    assert summed() == (3, tokens, 3, tokens)  # the hour is open: read from the records

    now = ManualClock(max(r.createdAt for r in records))
    sweeper = wait_sweeper.build_handler(host.runtime(usage=rollups, clock=now))
    assert sweeper({"source": "agentvm.wait-sweeper"}, FakeLambdaContext()) == {"waits": 0, "usageHours": 0}
    hours = {r.createdAt // HOUR_MS for r in records}  # one, or two if the turns straddled an hour
    now.ms = (max(hours) + 1) * HOUR_MS + GRACE_MS  # every hour of theirs is closed
    assert sweeper({"source": "agentvm.wait-sweeper"}, FakeLambdaContext())["usageHours"] == len(hours)
    assert sweeper({"source": "agentvm.wait-sweeper"}, FakeLambdaContext())["usageHours"] == 0
    assert summed() == (3, tokens, 3, tokens)
