"""The stepped history window (agent/window.py): its start moves in blocks, a tool call is never
shown without its result, a resumed turn reads what its first attempt read, and every turn says
when (and why) its prompt prefix differs from the previous turn's."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest

from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.agent.context import load_context
from agentvm.agent.window import start_seq
from agentvm.messages import (
    AssistantMessage,
    TextPart,
    ToolCallMessage,
    ToolCallPart,
    ToolResultMessage,
    ToolResultOutput,
    ToolResultPart,
    UserMessage,
)
from agentvm.records import SessionSummary, TurnJob, turn_id_for
from agentvm.turns.worker import process_turn
from tests.unit.agent.test_compaction import TENANT, Session, SummarisingModel, _dynamo, _runtime, _sqlite

SESSION = "ses"


def tool_turn(n: int, *, calls: int = 1, result: str = "result") -> list:
    """A user message and its answer: ``calls`` parallel tool calls, their results, a reply."""
    user = UserMessage(id=f"u{n}", timestamp=n, content=f"question {n}")
    out: list = [user]
    ids = [f"c{n}_{k}" for k in range(calls)]
    out += [
        ToolCallMessage(
            id=f"tc{n}_{k}",
            timestamp=n,
            toolCall=ToolCallPart(id=i, name="search", input={"q": n}),
            parentId=user.id,
        )
        for k, i in enumerate(ids)
    ]
    out += [
        ToolResultMessage(
            id=f"tr{n}_{k}",
            timestamp=n,
            toolCallId=i,
            toolResult=ToolResultPart(
                id=i, name="search", output=ToolResultOutput(type="text", value=f"{result} {n}")
            ),
        )
        for k, i in enumerate(ids)
    ]
    out.append(
        AssistantMessage(id=f"a{n}", timestamp=n, content=[TextPart(text=f"answer {n}")], parentId=user.id)
    )
    return out


@pytest.fixture
async def store():
    instance = SqliteStore(":memory:")
    yield instance
    instance.close()


async def play(store: SqliteStore, first: int, count: int, read=None, **kw) -> list:
    """Store ``count`` turns as a session does: each user message, then (``read``: what its turn
    reads, called with the message's seq and number) its answer. What ``read`` returned, per turn."""
    seen = []
    for n in range(first, first + count):
        user, *answer = tool_turn(n, calls=1 + n % 3, **kw)
        appended = await store.append_message(SESSION, user)
        if read is not None:
            seen.append(await read(appended.seq, n))
        for message in answer:
            await store.append_message(SESSION, message)
    return seen


def test_the_start_moves_in_blocks_and_keeps_between_window_and_window_plus_step():
    window, step = 50, 20
    starts = []
    for anchor in range(1, 400):
        start = start_seq(0, anchor, window, step)
        kept = anchor - start + 1
        assert min(anchor, window) <= kept <= window + step - 1
        starts.append(start)
    assert starts == sorted(starts)
    moves = [a for a in range(2, 400) if starts[a - 1] != starts[a - 2]]
    assert moves and all((a - window) % step == 0 for a in moves)  # once per block, not per message
    assert len(moves) == len(set(starts)) - 1
    # after a summary the grid restarts from what it covers
    assert start_seq(100, 130, window, step) == 101
    # step 0: the old window, sliding by every message
    assert [start_seq(0, a, window, 0) for a in (50, 51, 52)] == [1, 2, 3]


async def test_tool_calls_and_results_are_never_split_and_each_turn_starts_with_a_user_message(store):
    async def read(seq: int, n: int):
        context = await load_context(store, SESSION, 12, summarised=False, anchor_seq=seq, step=5)
        return n, context.request(model="m", image_prompt="p", up_to_user_id=f"u{n}", max_tokens=10)

    for n, request in await play(store, 0, 40, read):
        assert request.messages[0].role == "user" and request.messages[-1].text == f"question {n}"
        for i, turn in enumerate(request.messages):
            if turn.tool_results:  # answers exactly the calls of the assistant turn just before it
                calls = request.messages[i - 1].tool_calls
                assert [r.call_id for r in turn.tool_results] == [c.id for c in calls]
            if turn.tool_calls:
                assert request.messages[i + 1].tool_results


async def test_a_resumed_turn_reads_the_window_its_first_attempt_read(store):
    await play(store, 0, 30)
    last = await store.append_message(SESSION, UserMessage(id="u99", timestamp=99, content="now"))
    first = await load_context(
        store, SESSION, 12, summarised=False, through_seq=last.seq, anchor_seq=last.seq, step=5
    )
    # the first attempt stores three tool steps, then dies; the redelivery reads again
    for message in tool_turn(99, calls=2)[1:-1] * 1:
        await store.append_message(SESSION, message)
    for k in range(6):
        for message in tool_turn(100 + k)[1:-1]:  # more steps of the same turn: calls and results
            parented = (
                message.model_copy(update={"parentId": "u99"})
                if isinstance(message, ToolCallMessage)
                else message
            )
            await store.append_message(SESSION, parented)
    resumed = await load_context(store, SESSION, 12, summarised=False, anchor_seq=last.seq, step=5)
    assert resumed.entries[0].seq == first.entries[0].seq
    assert [e.message.id for e in resumed.entries][: len(first.entries)] == [
        e.message.id for e in first.entries
    ]
    before = first.request(model="m", image_prompt="p", up_to_user_id="u99", max_tokens=10).messages
    after = resumed.request(model="m", image_prompt="p", up_to_user_id="u99", max_tokens=10).messages
    assert after[: len(before)] == before  # the same conversation, then the stored steps
    assert len(after) > len(before)
    # the old sliding window lost its oldest messages to the turn's own steps
    old = await load_context(store, SESSION, 12, summarised=False)
    assert old.entries[0].seq > first.entries[0].seq


async def test_the_prefix_break_is_reported_exactly_when_the_prefix_changes(store):
    async def read(seq: int, n: int, step: int = 18):
        context = await load_context(store, SESSION, 12, summarised=False, anchor_seq=seq, step=step)
        request = context.request(model="m", image_prompt="p", up_to_user_id=f"u{n}", max_tokens=10)
        return context.prefix_break, request.messages

    previous = None
    reasons = []
    for n, (reason, messages) in enumerate(await play(store, 0, 40, read)):
        reasons.append(reason)
        if previous is not None:
            extends = messages[: len(previous)] == previous
            assert extends == (reason is None), n
        previous = messages
    assert reasons[0] is None  # the first turn has nothing to break
    breaks = [r for r in reasons if r is not None]
    assert breaks and set(breaks) == {"window"}
    # 6 messages a turn, 240 in all: the start moves every 18 messages, not every turn
    assert len(breaks) <= 240 // 18 + 1
    # the old sliding window breaks on every turn once it is full
    sliding = [reason for reason, _ in await play(store, 40, 10, lambda seq, n: read(seq, n, step=0))]
    assert sliding == ["window"] * 10


async def test_a_new_summary_is_reported_once_as_a_compaction_break(store):
    async def seq_of(seq: int, n: int) -> int:
        return seq

    seqs = await play(store, 0, 6, seq_of)
    await store.put_summary(
        SessionSummary(sessionId=SESSION, upToSeq=seqs[3] - 1, text="s", model="m", seenSeq=seqs[4] - 1)
    )
    # the turn at seqs[4] is the first to send the summary; the next one sends the same again
    first = await load_context(store, SESSION, 50, anchor_seq=seqs[4], step=20)
    second = await load_context(store, SESSION, 50, anchor_seq=seqs[5], step=20)
    assert (first.prefix_break, second.prefix_break) == ("compaction", None)
    assert first.entries[0].seq == seqs[3]


# -- through the worker: the usage records say which turns broke the prefix -------------------------


class AnchoredSession(Session):
    """A session whose turns carry their user message's seq, as the gateway's jobs do."""

    async def turn(self, content: str = "how are you?") -> TurnJob:
        self.turns += 1
        user = UserMessage(id=f"msg_s{self.n}t{self.turns}", timestamp=self.turns, content=content)
        appended = await self.rt.store.append_message(self.session_id, user)
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
            userSeq=appended.seq,
        )
        await process_turn(self.rt, job)
        return job


async def _turn_breaks(store, session) -> list[str | None]:
    usage = sorted(
        (u for u in await store.list_usage(TENANT) if u.kind == "turn"),
        key=lambda u: int(u.turnId.split("t")[-1]),
    )
    return [u.prefixBreak for u in usage]


@pytest.fixture(
    params=[pytest.param(_sqlite, id="sqlite"), pytest.param(_dynamo, id="dynamo", marks=pytest.mark.aws)]
)
async def either_store(request, tmp_path):
    async with asynccontextmanager(request.param)(tmp_path) as instance:
        yield instance


async def test_usage_records_name_the_window_breaks(either_store):
    store = either_store
    model = SummarisingModel()
    rt = _runtime(store, model, history_window=12, history_window_step=6, compaction_threshold_tokens=0)
    session = await AnchoredSession(rt, model).create()
    for _ in range(12):
        await session.turn()
    breaks = await _turn_breaks(store, session)
    # two messages a turn: the 12-message window is full after six turns, then moves every third
    assert breaks == [None] * 9 + ["window", None, None]
    requests = model.turn_requests()
    assert requests[9].messages[: len(requests[8].messages)] != requests[8].messages  # the break
    assert requests[10].messages[: len(requests[9].messages)] == requests[9].messages


async def test_usage_records_name_the_compaction_break(store):
    model = SummarisingModel()
    rt = _runtime(store, model, history_window=50, compaction_threshold_tokens=600)
    session = await AnchoredSession(rt, model).create()
    await session.seed(4, text="x" * 1000)
    await session.turn()  # past the threshold: summarised after this turn
    assert await store.get_summary(session.session_id) is not None
    await session.turn()  # the first turn to send the summary
    await session.turn()
    assert await _turn_breaks(store, session) == [None, "compaction", None]
