"""SQLite-only behaviour of ``SqliteStore``: files, reopening, the read counter and query plans.

The port's behaviour is covered for every store by ``test_store_contract.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.messages import UserMessage
from agentvm.records import ContainerRecord, ImageRecord, SessionRecord, TurnJob, UsageRecord

if TYPE_CHECKING:
    from pathlib import Path

TENANT = "tenant-a"


def image_and_session(image_id: str = "img_1") -> tuple[ImageRecord, SessionRecord]:
    session_id = f"ses_{image_id}"
    return (
        ImageRecord(
            tenantId=TENANT,
            imageId=image_id,
            containerId="user-alice",
            sessionId=session_id,
            name="helper",
            createdAt=1,
            updatedAt=1,
        ),
        SessionRecord(
            tenantId=TENANT,
            sessionId=session_id,
            imageId=image_id,
            containerId="user-alice",
            createdAt=1,
            updatedAt=1,
        ),
    )


def user(text: str) -> UserMessage:
    return UserMessage(id=f"msg_{text}", timestamp=1, content=text)


async def test_everything_written_is_read_back_after_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    img, ses = image_and_session()
    usage = UsageRecord(
        turnId="turn_1",
        tenantId=TENANT,
        containerId="user-alice",
        imageId="img_1",
        sessionId="ses_img_1",
        model="fake/echo",
        createdAt=1,
    )
    first = SqliteStore(path)
    await first.put_container(
        ContainerRecord(tenantId=TENANT, containerId="user-alice", createdAt=1, updatedAt=1)
    )
    await first.create_image(img, ses)
    await first.append_message(ses.sessionId, user("a"), idempotency_key="req_1")
    await first.append_message(ses.sessionId, user("b"))
    await first.put_usage(usage)
    await first.request_cancel(ses.sessionId, "turn_1")
    first.close()

    reopened = SqliteStore(path)

    assert await reopened.get_container(TENANT, "user-alice") is not None
    assert await reopened.get_image(TENANT, "img_1") == img
    assert await reopened.get_session(TENANT, ses.sessionId) == ses
    assert await reopened.list_messages(ses.sessionId) == [user("a"), user("b")]
    assert await reopened.list_usage(TENANT) == [usage]
    assert await reopened.is_cancel_requested(ses.sessionId, "turn_1") is True
    # the sequence and the idempotency keys carry on where they were
    assert (await reopened.append_message(ses.sessionId, user("c"))).seq == 3
    repeat = await reopened.append_message(ses.sessionId, user("x"), idempotency_key="req_1")
    assert (repeat.seq, repeat.created, repeat.message) == (1, False, user("a"))
    reopened.close()


async def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "state.db"

    store = SqliteStore(path)
    await store.append_message("ses_1", user("a"))
    store.close()

    assert path.is_file()


async def test_queries_counts_one_select_per_read_and_none_per_plain_write() -> None:
    store = SqliteStore(":memory:")
    img, ses = image_and_session()
    await store.create_image(img, ses)
    await store.append_message(ses.sessionId, user("a"))
    writes = store.queries

    await store.get_image(TENANT, "img_1")
    await store.get_session(TENANT, ses.sessionId)
    await store.recent_messages(ses.sessionId, 20)
    await store.is_cancel_requested(ses.sessionId, "turn_1")

    assert writes == 0
    assert store.queries == 4
    store.close()


async def test_a_repeated_idempotency_key_costs_one_select() -> None:
    store = SqliteStore(":memory:")
    await store.append_message("ses_1", user("a"), idempotency_key="req_1")
    before = store.queries

    await store.append_message("ses_1", user("a"), idempotency_key="req_1")

    assert store.queries - before == 1
    store.close()


async def test_recent_messages_reads_the_window_through_the_primary_key_without_sorting() -> None:
    # A turn reads only its window: the plan must walk the (session_id, seq) key backwards and stop
    # at LIMIT, never sort the session's whole history.
    store = SqliteStore(":memory:")
    for i in range(50):
        await store.append_message("ses_1", user(f"m{i}"))
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)

    await store.recent_messages("ses_1", 5)

    store._conn.set_trace_callback(None)
    (select,) = [s for s in statements if s.startswith("SELECT")]
    plan = " ".join(row[3] for row in store._conn.execute(f"EXPLAIN QUERY PLAN {select}"))
    assert "PRIMARY KEY" in plan
    assert "TEMP B-TREE" not in plan
    store.close()


async def test_store_and_turn_queue_can_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "agentvm.db"
    store = SqliteStore(path)
    queue = SqliteTurnQueue(path)
    job = TurnJob(
        turnId="turn_1",
        tenantId=TENANT,
        containerId="user-alice",
        imageId="img_1",
        sessionId="ses_img_1",
        agentId="agt_1",
        userMessageId="msg_a",
        requestId="req_1",
        enqueuedAt=1,
    )

    await store.append_message("ses_img_1", user("a"))
    await queue.enqueue(job)
    await store.append_message("ses_img_1", user("b"))

    assert queue.pending() == [job]
    assert [m.id for m in await store.list_messages("ses_img_1")] == ["msg_a", "msg_b"]
    queue.close()
    store.close()


async def test_adapters_of_a_shared_file_use_one_connection_that_outlives_their_close(tmp_path: Path) -> None:
    from agentvm.adapters.local.sqlite.counters import SqliteCounters
    from agentvm.adapters.local.sqlite.running import SqliteRunningTurns
    from agentvm.adapters.local.sqlite.store import connect, share_connections
    from agentvm.ports import RunningTurn

    shared, own = tmp_path / "shared.db", tmp_path / "own.db"
    share_connections(shared)
    store = SqliteStore(shared)
    counters = SqliteCounters(shared)
    running = SqliteRunningTurns(shared, store)
    assert store.connection is connect(shared) is connect(str(tmp_path / "." / "shared.db"))
    assert SqliteStore(own).connection is not SqliteStore(own).connection  # not registered: one each

    await counters.incr("storage#t", {"bytes": 5}, expires_at=2**40)
    counters.close()  # an adapter's close leaves the process's connection open for the others
    await running.mark(RunningTurn("t", "c", "img", "ses", "turn_1", 1, None))
    await store.put_usage(
        UsageRecord(
            turnId="turn_1",
            tenantId="t",
            containerId="c",
            imageId="img",
            sessionId="ses",
            model="m",
            inputTokens=1,
            outputTokens=2,
            createdAt=1,
        )
    )
    assert [t.turn_id for t in await running.running("t")] == ["turn_1"]
    assert (await running.tokens(["turn_1"]))["turn_1"].output_tokens == 2
    assert await SqliteCounters(shared).get("storage#t") == {"bytes": 5}
