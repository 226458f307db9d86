"""The ``ToolWaits`` contract, on SQLite, DynamoDB (moto) and PostgreSQL: one suite, so they cannot
drift."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.waits import DynamoDbToolWaits
from agentvm.adapters.local.sqlite.waits import SqliteToolWaits
from agentvm.adapters.postgres.waits import PostgresToolWaits
from agentvm.records import ToolWait, TurnJob, WaitKind
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteToolWaits, DynamoDbToolWaits, postgres=PostgresToolWaits))
async def waits(request, tmp_path):
    async with request.param(tmp_path) as store:
        yield store


def wait(
    call: str = "call_1",
    *,
    turn: str = "turn_1",
    tenant: str = "acme",
    container: str = "alice",
    created: int = 1000,
    deadline: int = 5000,
    kind: WaitKind = "approval",
) -> ToolWait:
    job = TurnJob(
        turnId=turn,
        tenantId=tenant,
        containerId=container,
        imageId="img_1",
        sessionId="sess_1",
        agentId="agent_1",
        userMessageId="msg_1",
        requestId="req_1",
        enqueuedAt=1,
    )
    return ToolWait(
        tenantId=tenant,
        containerId=container,
        imageId="img_1",
        sessionId="sess_1",
        turnId=turn,
        toolCallId=call,
        toolName="deploy",
        input={"env": "prod"},
        kind=kind,
        createdAt=created,
        deadlineAt=deadline,
        checkAt=deadline,
        job=job,
    )


async def test_a_wait_is_created_once_and_read_back(waits):
    assert await waits.put_wait(wait()) is True
    assert await waits.put_wait(wait()) is False
    assert await waits.get_wait("turn_1", "call_1") == wait()
    assert await waits.get_wait("turn_1", "call_2") is None


async def test_a_turns_waits_are_listed_oldest_first(waits):
    await waits.put_wait(wait("call_b", created=2000))
    await waits.put_wait(wait("call_a", created=1000))
    await waits.put_wait(wait("call_x", turn="turn_2"))
    assert [w.toolCallId for w in await waits.turn_waits("turn_1")] == ["call_a", "call_b"]


async def test_only_the_first_decision_wins(waits):
    await waits.put_wait(wait())
    decided = await waits.decide("turn_1", "call_1", {"status": "approved", "decidedAt": 7, "checkAt": 9000})
    assert decided is not None and decided.status == "approved" and decided.checkAt == 9000
    assert await waits.decide("turn_1", "call_1", {"status": "denied"}) is None
    assert (await waits.get_wait("turn_1", "call_1")).status == "approved"
    assert await waits.decide("turn_1", "nope", {"status": "denied"}) is None


async def test_concurrent_decisions_have_one_winner(waits):
    await waits.put_wait(wait())
    results = await asyncio.gather(
        *(waits.decide("turn_1", "call_1", {"status": s}) for s in ("approved", "denied", "approved"))
    )
    assert sum(r is not None for r in results) == 1


async def test_listing_is_per_tenant_and_container_and_drops_consumed_waits(waits):
    await waits.put_wait(wait("c1"))
    await waits.put_wait(wait("c2", container="bob", created=2000))
    await waits.put_wait(wait("c3", tenant="other", turn="turn_9"))
    assert [w.toolCallId for w in await waits.list_waits("acme")] == ["c1", "c2"]
    assert [w.toolCallId for w in await waits.list_waits("acme", "bob")] == ["c2"]
    assert [w.toolCallId for w in await waits.list_waits("other")] == ["c3"]
    await waits.consume("turn_1", "c1")
    assert [w.toolCallId for w in await waits.list_waits("acme")] == ["c2"]
    assert (await waits.get_wait("turn_1", "c1")).consumed is True


async def test_due_waits_are_those_whose_check_time_passed_and_not_consumed(waits):
    await waits.put_wait(wait("early", deadline=1000))
    await waits.put_wait(wait("late", deadline=9000))
    await waits.put_wait(wait("done", deadline=500))
    await waits.consume("turn_1", "done")
    assert [w.toolCallId for w in await waits.due_waits(5000, 10)] == ["early"]
    early = await waits.get_wait("turn_1", "early")
    await waits.reschedule(early, 20_000)
    assert await waits.due_waits(5000, 10) == []
    assert [w.toolCallId for w in await waits.due_waits(20_000, 10)] == ["late", "early"]  # by check time
    assert len(await waits.due_waits(20_000, 1)) == 1


@pytest.mark.parametrize("kind", ["sandbox", "mcp_task"])
async def test_every_kind_of_pending_wait_is_found_by_the_sweep(waits, kind):
    """The pending index (DynamoDB's GSI, the SQL stores' check-time index) holds every kind: the
    sweeper polls a sandbox job's or an MCP task's wait as it times out an approval."""
    await waits.put_wait(wait("c1", deadline=1000, kind=kind))
    [due] = await waits.due_waits(5000, 10)
    assert (due.toolCallId, due.kind, due.status) == ("c1", kind, "pending")
    decided = await waits.decide("turn_1", "c1", {"status": "answered", "output": "done", "checkAt": 9000})
    assert decided is not None and decided.kind == kind and decided.output == "done"
    assert await waits.decide("turn_1", "c1", {"status": "timed_out"}) is None
