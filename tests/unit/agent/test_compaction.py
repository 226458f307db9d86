"""Compaction: bounded reads per turn whatever the history, summaries created, reused, refreshed.

The turn-level tests run on both stores (SQLite, and DynamoDB on moto), through ``process_turn``
with a model that answers summary requests with a numbered summary and turns with a fixed reply.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from agentvm.adapters.aws.dynamodb.models import message_sk, session_pk
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.llm.scripted import SingleModelResolver
from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.push import LocalPush
from agentvm.adapters.local.sqlite.counters import SqliteCounters
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.agent.compaction import SUMMARY_SYSTEM, fold_count
from agentvm.agent.context import SUMMARY_HEADING, estimate_tokens
from agentvm.errors import ProviderUnavailable
from agentvm.llm import ModelStart, ModelStop, TextDelta
from agentvm.messages import AssistantMessage, ErrorMessage, TextPart, UserMessage, message_to_wire
from agentvm.observability.metrics import NoMetrics
from agentvm.observability.running import TurnProgress
from agentvm.ports import ConnectionInfo
from agentvm.records import ImageRecord, SessionRecord, TurnJob, turn_id_for
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.after_reply import AfterReplyTasks
from agentvm.turns.cancel_poll import CancelPoll
from agentvm.turns.worker import process_turn
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.llm import ModelEvent, ModelRequest

TENANT = "tenant-a"


class SummarisingModel:
    """Turns get ``reply``; summary requests get ``summary <n>``. Every request is kept."""

    def __init__(self, reply: str = "fine thanks") -> None:
        self.reply = reply
        self.requests: list[ModelRequest] = []
        self.fail_summaries = False
        self.on_summary: list[Any] = []  # callbacks run when a summary request arrives
        self.summaries_held: asyncio.Event | None = None  # set: summary requests wait until it is

    def summary_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.system == SUMMARY_SYSTEM]

    def turn_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.system != SUMMARY_SYSTEM]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        summarising = request.system == SUMMARY_SYSTEM
        if summarising:
            for callback in self.on_summary:
                callback()
            if self.fail_summaries:
                raise ProviderUnavailable("summariser down")
            if self.summaries_held is not None:
                await self.summaries_held.wait()
        text = f"summary {len(self.summary_requests())}" if summarising else self.reply
        yield ModelStart(message_id=f"msg_m{len(self.requests)}", model=request.model, input_tokens=7)
        for i, word in enumerate(text.split()):
            yield TextDelta(word if i == 0 else " " + word)
        yield ModelStop("end_turn", input_tokens=100, output_tokens=len(text.split()))


async def _sqlite(tmp_path) -> AsyncIterator[Any]:
    store = SqliteStore(":memory:")
    try:
        yield store
    finally:
        store.close()


async def _dynamo(tmp_path) -> AsyncIterator[Any]:
    with atomic_moto():
        store = DynamoDbStore(CONTRACT_TABLE)
        store.create_table()
        yield store


@pytest.fixture(
    params=[pytest.param(_sqlite, id="sqlite"), pytest.param(_dynamo, id="dynamo", marks=pytest.mark.aws)]
)
async def store(request, tmp_path):
    async with asynccontextmanager(request.param)(tmp_path) as instance:
        yield instance


class Session:
    """One image and its session on a runtime, with helpers to seed history and run turns."""

    def __init__(
        self, rt: Runtime, model: SummarisingModel, n: int = 1, image: dict[str, Any] | None = None
    ) -> None:
        self.rt = rt
        self.model = model
        self.image = ImageRecord(
            tenantId=TENANT,
            imageId=f"img_{n}",
            containerId="c1",
            sessionId=f"ses_{n}",
            name="A",
            systemPrompt="Be brief.",
            agentId="agent_1",
            createdAt=1,
            updatedAt=1,
            **(image or {}),
        )
        self.n = n
        self.turns = 0
        self.seeded = 0

    @property
    def session_id(self) -> str:
        return self.image.sessionId

    async def create(self) -> Session:
        ids = {"tenantId": TENANT, "containerId": "c1", "createdAt": 1, "updatedAt": 1}
        await self.rt.store.create_image(
            self.image, SessionRecord(**ids, sessionId=self.session_id, imageId=self.image.imageId)
        )
        return self

    async def seed(self, pairs: int, text: str = "hello") -> None:
        """``pairs`` answered exchanges, written straight to the store (fast, even for 10,000)."""
        store = self.rt.store
        messages: list[Any] = []
        for i in range(pairs):
            n = self.seeded + i
            question = UserMessage(id=f"msg_u{n}", timestamp=1, content=f"{text} {n}")
            answer = AssistantMessage(
                id=f"msg_a{n}", timestamp=1, content=[TextPart(text=f"re {n}")], parentId=question.id
            )
            messages += [question, answer]
        self.seeded += pairs
        if isinstance(store, DynamoDbStore):
            last = await store.recent_messages_after(self.session_id, 0, 1)
            seq = last[-1].seq if last else 0
            with store._m.message.batch_write() as batch:
                for k, message in enumerate(messages, start=seq + 1):
                    body = json.dumps(message_to_wire(message))
                    batch.save(store._m.message(session_pk(self.session_id), message_sk(k), body=body))
        else:
            for message in messages:
                await store.append_message(self.session_id, message)

    async def turn(self, content: str = "how are you?", later: Any = None) -> TurnJob:
        self.turns += 1
        user = UserMessage(id=f"msg_s{self.n}t{self.turns}", timestamp=1, content=content)
        await self.rt.store.append_message(self.session_id, user)
        job = TurnJob(
            turnId=turn_id_for(user.id),
            tenantId=TENANT,
            containerId="c1",
            imageId=self.image.imageId,
            sessionId=self.session_id,
            agentId="agent_1",
            userMessageId=user.id,
            requestId=f"req_{self.turns}",
            enqueuedAt=1,
        )
        await process_turn(self.rt, job, later=later)
        return job


def _runtime(store: Any, model: SummarisingModel, **turns: Any) -> Runtime:
    settings = {"flush_s": 0.01, "history_window": 20, "compaction_threshold_tokens": 8000, **turns}
    return Runtime(
        store=store,
        queue=None,  # type: ignore[arg-type]  # process_turn never enqueues
        connections=InMemoryConnections(),
        push=LocalPush(),
        models=SingleModelResolver(model, "fake/m1"),
        turns=TurnSettings(**settings),
        cancel_poll=CancelPoll(),
        progress=TurnProgress(),
        metrics=NoMetrics(),
    )


async def _reads_of_one_turn(session: Session) -> int:
    before = session.rt.store.queries
    await session.turn()
    return session.rt.store.queries - before


# -- the acceptance tests, on both stores -------------------------------------------------------


async def test_store_reads_per_turn_do_not_grow_with_history(store):
    model = SummarisingModel()
    rt = _runtime(store, model)
    small = await Session(rt, model, 1).create()
    big = await Session(rt, model, 2).create()
    await small.seed(5)  # 10 messages
    await big.seed(5_000)  # 10,000 messages

    small_reads = await _reads_of_one_turn(small)
    big_first = await _reads_of_one_turn(big)  # the window is all unsummarised: a compaction follows
    assert len(model.summary_requests()) == 1
    big_reads = await _reads_of_one_turn(big)  # summarised: an ordinary turn again

    assert big_reads == small_reads <= 7  # SQLite 5; DynamoDB also reads the last seq per append
    assert big_first <= small_reads + 2  # the compaction re-reads the summary and the window, once
    summary = await store.get_summary(big.session_id)
    assert summary is not None and summary.upToSeq > 9_990
    # the turn after the compaction saw the summary and only the messages after it
    last = model.turn_requests()[-1]
    assert SUMMARY_HEADING in last.system and "summary 1" in last.system
    assert len(last.messages) < 20
    # and the full history is still there for image_messages_request
    assert await _stored_messages(store, big.session_id) == 10_000 + 4


async def _stored_messages(store, session_id: str) -> int:
    """How many messages the session has. On DynamoDB a COUNT query: ``list_messages`` of 10,000
    items takes moto seconds (its listing is tested in the contract suite and below)."""
    if not isinstance(store, DynamoDbStore):
        history = await store.list_messages(session_id)
        assert history[0].id == "msg_u0"
        return len(history)
    client = boto3.client("dynamodb", region_name="us-east-1")
    count, page = 0, {}
    while True:
        response = client.query(
            TableName=CONTRACT_TABLE,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :msg)",
            ExpressionAttributeValues={":pk": {"S": session_pk(session_id)}, ":msg": {"S": "MSG#"}},
            Select="COUNT",
            **page,
        )
        count += response["Count"]
        if "LastEvaluatedKey" not in response:
            return count
        page = {"ExclusiveStartKey": response["LastEvaluatedKey"]}


async def test_a_summary_is_created_past_the_threshold_reused_and_refreshed(store):
    model = SummarisingModel()
    # ~250 tokens per seeded question: the threshold is crossed once four are in view
    rt = _runtime(store, model, history_window=50, compaction_threshold_tokens=600)
    session = await Session(rt, model).create()
    await session.seed(2, text="x" * 1000)
    await session.turn()
    assert model.summary_requests() == [] and await store.get_summary(session.session_id) is None

    await session.seed(2, text="x" * 1000)
    await session.turn()  # now past 600 tokens: summarised after this turn
    first = await store.get_summary(session.session_id)
    assert first is not None and first.text == "summary 1" and first.model == "fake/m1"
    assert len(model.summary_requests()) == 1

    await session.turn()  # under the threshold again: the summary is reused, not remade
    assert len(model.summary_requests()) == 1
    reused = model.turn_requests()[-1]
    assert reused.system == f"Be brief.\n\n{SUMMARY_HEADING}\nsummary 1"
    assert reused.messages[0].role == "user"  # the kept tail starts at a question
    assert estimate_tokens(reused.system) + sum(estimate_tokens(t.text) for t in reused.messages) < 600

    await session.seed(3, text="x" * 1000)
    await session.turn()  # past it again: refreshed from the previous summary plus what came since
    second = await store.get_summary(session.session_id)
    assert second.upToSeq > first.upToSeq and second.text == "summary 2"
    assert "<summary_so_far>\nsummary 1\n</summary_so_far>" in model.summary_requests()[-1].messages[0].text
    assert second.messages > first.messages

    # every message is still stored, and listed for image_messages_request
    history = await store.list_messages(session.session_id)
    assert len(history) == 2 * (session.seeded + session.turns)
    # the summaries were billed, as compaction usage, besides the turns
    usage = await store.list_usage(TENANT)
    compactions = [u for u in usage if u.kind == "compaction"]
    assert len(compactions) == 2 and len(usage) == 2 + session.turns
    assert all(u.inputTokens == 100 and u.status == "completed" for u in compactions)
    assert compactions[0].turnId == f"turn_s1t2:compact:{first.upToSeq}"


# -- the rest on SQLite ---------------------------------------------------------------------------


@pytest.fixture
async def sqlite_store():
    store = SqliteStore(":memory:")
    yield store
    store.close()


async def test_compaction_runs_after_the_turns_terminal_events(sqlite_store):
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=100)
    session = await Session(rt, model).create()
    frames: list[str] = []

    async def receive(payload: str) -> None:
        frames.append(json.loads(payload)["type"])

    rt.push.attach("conn_1", receive)
    await rt.connections.register(ConnectionInfo("conn_1", TENANT, 0))
    await rt.connections.subscribe("conn_1", session.session_id)
    seen_at_summary: list[list[str]] = []
    model.on_summary.append(lambda: seen_at_summary.append(list(frames)))
    await session.seed(3, text="y" * 200)

    await session.turn()

    assert len(seen_at_summary) == 1
    assert seen_at_summary[0][-1] == "conversation_end"  # the client had the whole reply first
    assert frames == seen_at_summary[0]  # and compaction sends nothing


async def test_the_next_turn_does_not_wait_for_the_previous_turns_compaction(sqlite_store):
    """Off the session's queue slot (``turns/after_reply.py``, as ``avm serve`` runs it): the next
    turn runs while the compaction's model call is still out, and its own compaction, from the
    same summary, is left to the one running (the claim): one summary call, not two."""
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=100)
    rt.counters = SqliteCounters(":memory:")
    session = await Session(rt, model).create()
    await session.seed(3, text="y" * 200)
    model.summaries_held = asyncio.Event()
    after = AfterReplyTasks()

    first = await session.turn(later=after.start)  # returns with its compaction still out
    while not model.summary_requests():
        await asyncio.sleep(0.01)
    second = await session.turn(later=after.start)  # runs meanwhile: nothing waits for the summary

    for job in (first, second):
        assert (await sqlite_store.get_turn(job.turnId)).status == "completed"
    assert await sqlite_store.get_summary(session.session_id) is None
    model.summaries_held.set()
    await after.wait()
    assert (await sqlite_store.get_summary(session.session_id)).text == "summary 1"
    assert len(model.summary_requests()) == 1  # the second turn's compaction found it claimed
    assert len(model.turn_requests()) == 2


async def test_a_stopping_host_cancels_a_compaction_that_does_not_end(sqlite_store):
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=100)
    session = await Session(rt, model).create()
    await session.seed(3, text="y" * 200)
    model.summaries_held = asyncio.Event()  # never set: the summary call hangs
    after = AfterReplyTasks()
    await session.turn(later=after.start)
    while not model.summary_requests():
        await asyncio.sleep(0.01)

    await after.aclose(timeout_s=0.05)

    assert len(after) == 0
    assert await sqlite_store.get_summary(session.session_id) is None


async def test_a_failing_summariser_never_fails_the_turn_and_the_next_turn_retries(sqlite_store):
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=100)
    session = await Session(rt, model).create()
    await session.seed(3, text="y" * 200)
    model.fail_summaries = True

    job = await session.turn()

    assert (await sqlite_store.get_turn(job.turnId)).status == "completed"
    assert await sqlite_store.get_summary(session.session_id) is None
    model.fail_summaries = False
    await session.turn()
    assert (await sqlite_store.get_summary(session.session_id)).text == "summary 2"


async def test_an_oversized_context_is_compacted_before_the_turn(sqlite_store):
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=100)
    session = await Session(rt, model).create()
    await session.seed(4, text="z" * 400)  # ~450 tokens, past twice the threshold, never summarised

    await session.turn()

    first, second = model.requests[:2]
    assert first.system == SUMMARY_SYSTEM  # summarised first...
    assert SUMMARY_HEADING in second.system and second.messages[-1].text == "how are you?"  # ...then used


@pytest.mark.parametrize(
    ("image", "side"),
    [
        ({"model": "openai/gpt-4.1"}, "openai/gpt-4.1-mini"),  # by default: the cheap sibling
        ({"model": "openai/gpt-4.1", "sideModel": ""}, "openai/gpt-4.1"),  # opted out: its own
        ({"model": "openai/gpt-4.1", "sideModel": "fake/side-1"}, "fake/side-1"),  # named
    ],
)
async def test_compaction_runs_on_the_images_side_model_and_usage_names_it(sqlite_store, image, side):
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=100)
    session = await Session(rt, model, image=image).create()
    await session.seed(4, text="x" * 400)
    await session.turn()

    [summarising] = model.summary_requests()
    assert summarising.model == side.partition("/")[2]
    assert {r.model for r in model.turn_requests()} == {"gpt-4.1"}  # the turn keeps the image's model
    summary = await sqlite_store.get_summary(session.session_id)
    assert summary is not None and summary.model == side
    usage = {u.kind: u.model for u in await sqlite_store.list_usage(TENANT)}
    assert usage == {"turn": "openai/gpt-4.1", "compaction": side}


async def test_the_servers_compaction_model_beats_the_side_model(sqlite_store):
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=100, compaction_model="fake/big-1")
    session = await Session(rt, model, image={"model": "openai/gpt-4o"}).create()
    await session.seed(4, text="x" * 400)
    await session.turn()
    assert [r.model for r in model.summary_requests()] == ["big-1"]


async def test_compaction_off_reads_the_plain_window(sqlite_store):
    model = SummarisingModel()
    rt = _runtime(sqlite_store, model, compaction_threshold_tokens=0)
    session = await Session(rt, model).create()
    await session.seed(30, text="w" * 400)

    reads = await _reads_of_one_turn(session)

    assert model.summary_requests() == [] and reads <= 5
    # the window, as before compaction existed (its oldest message is a reply without its question)
    assert len(model.turn_requests()[0].messages) == 19


# -- what gets folded ---------------------------------------------------------------------------


def _u(n: int) -> UserMessage:
    return UserMessage(id=f"u{n}", timestamp=1, content="q" * 40)


def _a(n: int, parent: int) -> AssistantMessage:
    return AssistantMessage(id=f"a{n}", timestamp=1, content=[TextPart(text="r" * 40)], parentId=f"u{parent}")


def test_fold_keeps_a_tail_that_starts_at_a_question():
    history = [_u(1), _a(1, 1), _u(2), _a(2, 2), _u(3), _a(3, 3)]
    assert fold_count(history, first_unrun_id=None, keep_max=3, keep_tokens=10_000) == 4
    assert fold_count(history, first_unrun_id=None, keep_max=2, keep_tokens=10_000) == 4
    assert fold_count(history, first_unrun_id=None, keep_max=10, keep_tokens=10_000) == 0
    assert fold_count(history, first_unrun_id=None, keep_max=10, keep_tokens=25) == 4  # by tokens


def test_fold_never_separates_a_reply_from_its_question_nor_folds_unrun_turns():
    # queue policy: two questions stored before the first answer
    history = [_u(1), _u(2), _a(1, 1), _a(2, 2), _u(3), _a(3, 3), _u(4)]
    assert fold_count(history, first_unrun_id=None, keep_max=4, keep_tokens=10_000) == 4
    assert fold_count(history, first_unrun_id=None, keep_max=5, keep_tokens=10_000) == 4
    # u4's turn has not run: nothing from it on is folded
    assert fold_count(history, first_unrun_id="u4", keep_max=1, keep_tokens=10_000) == 6
    assert fold_count(history, first_unrun_id="u2", keep_max=1, keep_tokens=10_000) == 0  # a1 answers u1
    assert fold_count(history, first_unrun_id="u_missing", keep_max=1, keep_tokens=10_000) == 0
    errors = [_u(1), ErrorMessage(id="e1", timestamp=1, content="x", parentId="u1"), _u(2), _a(2, 2)]
    assert fold_count(errors, first_unrun_id=None, keep_max=2, keep_tokens=10_000) == 2


def test_fold_never_cuts_a_tool_result_from_its_call():
    from agentvm.messages import (
        ToolCallMessage,
        ToolCallPart,
        ToolResultMessage,
        ToolResultOutput,
        ToolResultPart,
    )

    call = ToolCallMessage(id="c1", timestamp=1, toolCall=ToolCallPart(id="t1", name="x"), parentId="u1")
    result = ToolResultMessage(
        id="r1",
        timestamp=1,
        toolCallId="t1",
        toolResult=ToolResultPart(id="t1", name="x", output=ToolResultOutput(type="text", value="ok")),
    )
    # queue policy: u2 was stored while u1's tool ran, so u1's result comes after u2
    history = [_u(1), call, _u(2), result, _a(1, 1), _a(2, 2), _u(3), _a(3, 3)]
    assert fold_count(history, first_unrun_id=None, keep_max=6, keep_tokens=10_000) == 6
    assert fold_count(history, first_unrun_id=None, keep_max=2, keep_tokens=10_000) == 6
