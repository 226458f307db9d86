"""The ``ElicitationStore`` contract on SQLite, DynamoDB (moto) and PostgreSQL: an MCP server's open
question, answered once by its tenant only, finished by the waiting process."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.elicitations import DynamoDbElicitations
from agentvm.adapters.local.sqlite.elicitations import SqliteElicitations
from agentvm.adapters.postgres.elicitations import PostgresElicitations
from agentvm.ports import ElicitationAnswer, ElicitationOwner, ElicitationRequest, PendingElicitation
from tests.contract.moto_table import backends

NOW = 1_800_000_000_000
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture(params=backends(SqliteElicitations, DynamoDbElicitations, postgres=PostgresElicitations))
async def store(request, tmp_path):
    async with request.param(tmp_path) as instance:
        yield instance


def question(
    eid: str = "elicit_1", *, tenant: str = "acme", deadline: int = NOW + 60_000
) -> PendingElicitation:
    owner = ElicitationOwner(tenant, "alice", "sess_1", "turn_1")
    return PendingElicitation(
        eid, owner, "call_1", "ask", ElicitationRequest("Who?", schema=SCHEMA), deadline
    )


async def test_an_open_question_is_read_back_by_its_tenant_only(store):
    await store.put(question())
    assert await store.get("acme", "elicit_1", NOW) == question()
    assert await store.get("globex", "elicit_1", NOW) is None
    assert await store.get("acme", "elicit_missing", NOW) is None
    assert await store.get("acme", "elicit_1", NOW + 60_000) is None  # past its deadline
    url = PendingElicitation(
        "elicit_u",
        question().owner,
        "call_2",
        "login",
        ElicitationRequest("Sign in", mode="url", url="https://x.test/a"),
        NOW + 5,
    )
    await store.put(url)
    assert await store.get("acme", "elicit_u", NOW) == url


async def test_the_first_answer_wins_and_the_waiting_side_reads_it(store):
    await store.put(question())
    assert await store.answer_of("acme", "elicit_1") is None
    accepted = ElicitationAnswer("accept", {"name": "Ada"})
    assert await store.answer("globex", "elicit_1", ElicitationAnswer("decline"), NOW) is False
    assert await store.answer("acme", "elicit_1", accepted, NOW) is True
    assert await store.answer("acme", "elicit_1", ElicitationAnswer("decline"), NOW) is False
    assert await store.get("acme", "elicit_1", NOW) is None  # answered: no longer open
    assert await store.answer_of("acme", "elicit_1") == accepted
    assert await store.answer_of("globex", "elicit_1") is None
    assert await store.finish("acme", "elicit_1") == accepted


async def test_concurrent_answers_take_exactly_one(store):
    await store.put(question())
    answers = [ElicitationAnswer("accept", {"name": f"n{i}"}) for i in range(8)]
    won = await asyncio.gather(*(store.answer("acme", "elicit_1", a, NOW) for a in answers))
    assert sum(won) == 1
    assert await store.finish("acme", "elicit_1") == answers[won.index(True)]


async def test_an_answer_after_the_deadline_or_the_finish_is_refused(store):
    await store.put(question(deadline=NOW + 10))
    assert await store.answer("acme", "elicit_1", ElicitationAnswer("decline"), NOW + 10) is False
    await store.put(question("elicit_2"))
    assert await store.finish("acme", "elicit_2") is None
    assert await store.answer("acme", "elicit_2", ElicitationAnswer("decline"), NOW) is False
    assert await store.get("acme", "elicit_2", NOW) is None
    assert await store.answer("acme", "elicit_never", ElicitationAnswer("decline"), NOW) is False
    assert await store.finish("acme", "elicit_never") is None


async def test_open_questions_are_counted_per_tenant(store):
    for i in range(3):
        await store.put(question(f"elicit_{i}"))
    await store.put(question("elicit_g", tenant="globex"))
    await store.put(question("elicit_old", deadline=NOW - 1))
    assert await store.open_count("acme", NOW) == 3
    await store.answer("acme", "elicit_0", ElicitationAnswer("cancel"), NOW)
    await store.finish("acme", "elicit_1")
    assert await store.open_count("acme", NOW) == 1
    assert await store.open_count("globex", NOW) == 1
