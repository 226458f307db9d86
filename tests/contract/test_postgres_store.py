"""PostgreSQL-only behaviour of ``PostgresStore``: several nodes (pools) on one database, the
tenant purge, and a lost server answered as ``StorageUnavailable``.

The port's behaviour is covered for every store by ``test_store_contract.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.postgres.database import Database
from agentvm.adapters.postgres.store import PostgresStore
from agentvm.errors import StorageUnavailable
from agentvm.messages import UserMessage
from agentvm.records import ContainerRecord, ImageRecord, SessionRecord, TurnRecord, UsageRecord
from tests.postgres_server import fresh_database

pytestmark = pytest.mark.postgres

TENANT = "tenant-a"


def image_and_session(image_id: str, tenant: str = TENANT) -> tuple[ImageRecord, SessionRecord]:
    session_id = f"ses_{image_id}"
    common = {"tenantId": tenant, "containerId": "user-alice", "createdAt": 1, "updatedAt": 1}
    return (
        ImageRecord(imageId=image_id, sessionId=session_id, name="helper", **common),
        SessionRecord(sessionId=session_id, imageId=image_id, **common),
    )


def user(text: str) -> UserMessage:
    return UserMessage(id=f"msg_{text}", timestamp=1, content=text)


async def test_appends_from_three_nodes_to_one_session_get_distinct_consecutive_seqs() -> None:
    async with fresh_database() as first:
        nodes = [Database(first.url, min_size=1, max_size=4) for _ in range(3)]
        await asyncio.gather(*(node.open() for node in nodes))
        try:
            stores = [PostgresStore(node) for node in nodes]
            results = await asyncio.gather(
                *(stores[i % 3].append_message("ses_1", user(f"m{i}")) for i in range(60)),
                *(
                    stores[i % 3].append_message("ses_1", user("keyed"), idempotency_key="k")
                    for i in range(9)
                ),
            )
        finally:
            await asyncio.gather(*(node.close() for node in nodes))
        created = [r for r in results if r.created]
        assert sorted(r.seq for r in created) == list(range(1, 62))
        keyed = {r.seq for r in results if r.message.id == "msg_keyed"}
        assert len(keyed) == 1  # nine appends with one key, from three nodes: one message
        history = await PostgresStore(first).list_messages("ses_1")
        assert len(history) == 61


async def test_purge_tenant_deletes_its_conversations_and_keeps_usage_and_other_tenants() -> None:
    async with fresh_database() as database:
        store = PostgresStore(database)
        for tenant in (TENANT, "tenant-b"):
            await store.put_container(
                ContainerRecord(tenantId=tenant, containerId="user-alice", createdAt=1, updatedAt=1)
            )
            image, session = image_and_session(f"img_{tenant}", tenant)
            await store.create_image(image, session)
            await store.append_message(session.sessionId, user("hi"))
            await store.put_turn(
                TurnRecord(
                    turnId=f"turn_{tenant}", sessionId=session.sessionId, status="completed", updatedAt=1
                )
            )
            await store.put_usage(
                UsageRecord(
                    turnId=f"turn_{tenant}",
                    tenantId=tenant,
                    containerId="user-alice",
                    imageId=image.imageId,
                    sessionId=session.sessionId,
                    model="fake/echo",
                    createdAt=1,
                )
            )
        assert await store.purge_tenant(TENANT) == 1
        assert await store.list_containers(TENANT) == []
        assert await store.get_image(TENANT, f"img_{TENANT}") is None
        assert await store.list_messages(f"ses_img_{TENANT}") == []
        assert await store.get_turn(f"turn_{TENANT}") is None
        assert [u.turnId for u in await store.list_usage(TENANT)] == [f"turn_{TENANT}"]  # billing stays
        assert len(await store.list_messages("ses_img_tenant-b")) == 1
        assert await store.get_turn("turn_tenant-b") is not None


async def test_a_connection_the_server_dropped_is_storage_unavailable() -> None:
    async with fresh_database() as database:
        node = Database(database.url, min_size=1, max_size=1)
        await node.open()
        try:
            async with node.connection() as conn:
                pid = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone() or [0])[0]
            async with database.connection() as conn:  # an operator, or a failover, ends it
                await conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            # the pool checks nothing on borrow: the statement meets the closed connection
            with pytest.raises(StorageUnavailable):
                await PostgresStore(node).get_turn("turn_1")
            # and the pool replaces it: the next call works
            assert await PostgresStore(node).get_turn("turn_1") is None
        finally:
            await node.close()


async def test_a_message_with_a_token_longer_than_a_lexeme_is_indexed_and_found() -> None:
    from agentvm.adapters.postgres.sessions import PostgresSessionArchive
    from agentvm.sessions.search import parse_query

    long_word = "x" * 3000  # a tsvector lexeme holds at most 2,047 bytes
    async with fresh_database() as database:
        store, archive = PostgresStore(database), PostgresSessionArchive(database)
        image, session = image_and_session("img_1")
        await store.create_image(image, session)
        await store.append_message(session.sessionId, user(f"before {long_word} after"))
        await store.append_message(session.sessionId, user(f"before {long_word}y after"))

        async def seqs(query: str) -> list[int]:
            page = await archive.search_messages(
                TENANT, parse_query(query), container_id=None, limit=10, after=None
            )
            return [hit.seq for hit in page.hits]

        # indexing did not fail on the long token, and it is found by prefix (queries hold at
        # most 500 characters), whole tokens only
        assert await seqs("before") == [2, 1]
        assert await seqs('"before after"') == []
        assert await seqs("x" * 450 + "*") == [2, 1]
        assert await seqs("x" * 450) == []


async def test_search_pages_alike_from_the_newest_window_and_from_the_whole_index(monkeypatch) -> None:
    from agentvm.adapters.postgres import sessions
    from agentvm.sessions.search import parse_query

    monkeypatch.setattr(sessions, "_RECENT", 5)  # a window far smaller than the history
    async with fresh_database() as database:
        store, archive = PostgresStore(database), sessions.PostgresSessionArchive(database)
        for n, at in (("img_old", 1), ("img_new", 2)):
            image, session = image_and_session(n)
            await store.create_image(image.model_copy(update={"createdAt": at}), session)
            for i in range(15):
                rare = " zebra" if (n, i) == ("img_old", 0) else ""
                await store.append_message(session.sessionId, user(f"apple {n} {i}{rare}"))

        async def walk(query: str, limit: int) -> list[tuple[str, int]]:
            out, after = [], None
            while True:
                page = await archive.search_messages(
                    TENANT, parse_query(query), container_id=None, limit=limit, after=after
                )
                out += [(hit.image.imageId, hit.seq) for hit in page.hits]
                if page.next is None:
                    return out
                after = page.next

        every = [("img_new", s) for s in range(15, 0, -1)] + [("img_old", s) for s in range(15, 0, -1)]
        assert await walk("apple", 4) == every
        assert await walk("apple", 100) == every
        assert await walk("zebra", 4) == [("img_old", 1)]  # outside the window: the whole index
        assert await walk('"apple img"', 7) == every  # a phrase, checked by the matcher


@pytest.mark.parametrize("loop_turns", [0, 1, 2])
async def test_a_cancel_landing_as_the_pool_hands_over_a_connection_is_not_lost(loop_turns: int) -> None:
    # psycopg_pool on Python 3.11 waits with ``asyncio.wait_for``, which returns the connection and
    # drops a cancel that lands in the instant it is handed over (docs: database.py). Without the
    # check in ``Database.connection`` the waiter below ran its body and finished every time.
    async with fresh_database(migrated=False, max_size=1) as database:
        for _ in range(5):
            ran = False

            async def waiter() -> None:
                nonlocal ran
                async with database.connection() as conn:
                    ran = True
                    await conn.execute("SELECT 1")

            async with database.connection():  # the only connection: the waiter queues for it
                task = asyncio.create_task(waiter())
                await asyncio.sleep(0.05)
            for _ in range(loop_turns):  # the connection is being handed over meanwhile
                await asyncio.sleep(0)
            task.cancel()
            await asyncio.wait([task], timeout=5)
            assert task.cancelled() and not ran
            async with database.connection() as conn:  # given back to the pool, still usable
                await conn.execute("SELECT 1")


async def test_a_timeout_expiring_as_the_pool_hands_over_a_connection_is_a_timeout() -> None:
    async with fresh_database(migrated=False, max_size=1) as database:
        outcome: list[str] = []
        scopes: list[asyncio.Timeout] = []

        async def waiter() -> None:
            try:
                async with asyncio.timeout(60) as scope:
                    scopes.append(scope)
                    async with database.connection():
                        outcome.append("ran")
            except TimeoutError:
                outcome.append("timed out")

        async with database.connection():
            task = asyncio.create_task(waiter())
            await asyncio.sleep(0.05)
        scopes[0].reschedule(asyncio.get_running_loop().time())  # expires during the hand-over
        await asyncio.wait([task], timeout=5)
        assert outcome == ["timed out"]
