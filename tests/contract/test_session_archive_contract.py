"""The ``SessionArchive`` port's contract (imports and forks under a ledger claim, message search),
run against SQLite with FTS5, SQLite without it (the scan fallback), DynamoDB on moto (with its
default scan budget, and with a budget so small every request stops after one page), and PostgreSQL
(tsvector + GIN)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest

from agentvm.adapters.aws.dynamodb.sessions import DynamoDbSessionArchive
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.local.sqlite.sessions import SqliteSessionArchive
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.errors import Conflict
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
from agentvm.records import ImageRecord, SessionImport, SessionRecord, SessionSummary
from agentvm.sessions.search import parse_query
from tests.contract.conftest import CONTRACT_TABLE
from tests.contract.moto_table import atomic_moto

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from agentvm.messages import Message
    from agentvm.ports import SearchPosition, SessionArchive, Store


@asynccontextmanager
async def sqlite_fts(tmp_path: Path) -> AsyncIterator[tuple[Store, SessionArchive]]:
    store = SqliteStore(tmp_path / "agentvm.db")
    archive = SqliteSessionArchive(store)
    assert archive.fts
    try:
        yield store, archive
    finally:
        store.close()


@asynccontextmanager
async def sqlite_scan(tmp_path: Path) -> AsyncIterator[tuple[Store, SessionArchive]]:
    store = SqliteStore(":memory:")
    try:
        yield store, SqliteSessionArchive(store, fts=False)
    finally:
        store.close()


@asynccontextmanager
async def dynamo(tmp_path: Path, budget: int | None = None) -> AsyncIterator[tuple[Store, SessionArchive]]:
    with atomic_moto():
        store = DynamoDbStore(CONTRACT_TABLE)
        store.create_table()
        kw = {} if budget is None else {"scan_budget_bytes": budget}
        yield store, DynamoDbSessionArchive(CONTRACT_TABLE, **kw)


@asynccontextmanager
async def dynamo_one_page(tmp_path: Path) -> AsyncIterator[tuple[Store, SessionArchive]]:
    async with dynamo(tmp_path, budget=1) as pair:
        yield pair


@asynccontextmanager
async def postgres(tmp_path: Path) -> AsyncIterator[tuple[Store, SessionArchive]]:
    # imported here: a session that runs no PostgreSQL test never imports psycopg
    from agentvm.adapters.postgres.sessions import PostgresSessionArchive
    from agentvm.adapters.postgres.store import PostgresStore
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresStore(database), PostgresSessionArchive(database)


@pytest.fixture(
    params=[
        pytest.param(sqlite_fts, id="sqlite-fts5"),
        pytest.param(sqlite_scan, id="sqlite-scan"),
        pytest.param(dynamo, id="dynamo", marks=pytest.mark.aws),
        pytest.param(dynamo_one_page, id="dynamo-one-page", marks=pytest.mark.aws),
        pytest.param(postgres, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def pair(request, tmp_path):
    async with request.param(tmp_path) as p:
        yield p


def records(image_id: str, *, tenant: str = "tenant-a", container: str = "user-alice", at: int = 1000):
    image = ImageRecord(
        tenantId=tenant,
        imageId=image_id,
        containerId=container,
        sessionId=f"sess_{image_id}",
        name=image_id,
        createdAt=at,
        updatedAt=at,
    )
    session = SessionRecord(
        tenantId=tenant,
        sessionId=image.sessionId,
        imageId=image_id,
        containerId=container,
        createdAt=at,
        updatedAt=at,
    )
    return image, session


def claim_for(image: ImageRecord, key: str = "import:exp_1:user-alice", owner: str = "me") -> SessionImport:
    return SessionImport(
        tenantId=image.tenantId,
        key=key,
        containerId=image.containerId,
        imageId=image.imageId,
        sessionId=image.sessionId,
        owner=owner,
        claimedAt=1000,
    )


def chat(*texts: str, prefix: str = "m") -> list[Message]:
    """Alternating user and assistant messages with these texts."""
    out: list[Message] = []
    for i, text in enumerate(texts):
        if i % 2 == 0:
            out.append(UserMessage(id=f"{prefix}{i}", timestamp=i, content=text))
        else:
            out.append(
                AssistantMessage(
                    id=f"{prefix}{i}", timestamp=i, content=[TextPart(text=text)], parentId=f"{prefix}{i - 1}"
                )
            )
    return out


async def put(
    archive: SessionArchive, image_id: str, messages: list[Message], **kw: object
) -> tuple[ImageRecord, SessionImport]:
    image, session = records(image_id, **kw)  # type: ignore[arg-type]
    claim = claim_for(image, key=f"import:{image_id}:{image.containerId}")
    assert (await archive.claim_import(claim)).owner == claim.owner
    await archive.write_import(claim, image, session, messages, None)
    return image, claim


async def found(archive: SessionArchive, query: str, tenant: str = "tenant-a", **kw: object) -> list[tuple]:
    """Every hit, page after page (limit 2), as (image id, seq)."""
    terms = parse_query(query)
    out: list[tuple] = []
    after: SearchPosition | None = None
    for _ in range(100):
        page = await archive.search_messages(
            tenant, terms, container_id=kw.get("container_id"), limit=2, after=after
        )  # type: ignore[arg-type]
        assert len(page.hits) <= 2
        out += [(h.image.imageId, h.seq) for h in page.hits]
        if page.next is None:
            return out
        after = page.next
    raise AssertionError("paging did not end")


# -- the ledger and whole-session writes --------------------------------------------------------------
async def test_a_claimed_key_returns_the_first_claim_and_is_per_tenant(pair):
    _, archive = pair
    image, _ = records("img_1")
    first = claim_for(image)
    assert await archive.claim_import(first) == first
    assert await archive.claim_import(first.model_copy(update={"owner": "other", "imageId": "x"})) == first
    theirs = first.model_copy(update={"tenantId": "tenant-b", "owner": "b"})
    assert await archive.claim_import(theirs) == theirs


async def test_a_claim_is_replaced_only_while_unchanged(pair):
    _, archive = pair
    image, _ = records("img_1")
    first = claim_for(image)
    await archive.claim_import(first)
    second = first.model_copy(update={"owner": "second", "claimedAt": 2000})
    assert await archive.replace_import(first, second)
    assert not await archive.replace_import(first, first.model_copy(update={"owner": "third"}))
    assert await archive.claim_import(first) == second


async def test_a_written_session_reads_back_whole_and_the_claim_is_done(pair):
    store, archive = pair
    image, session = records("img_1")
    claim = claim_for(image)
    await archive.claim_import(claim)
    history = chat("hello", "hi there", "how are you", "fine")
    summary = SessionSummary(
        sessionId=image.sessionId, upToSeq=2, text="they said hello", model="echo/echo-1"
    )
    done = await archive.write_import(claim, image, session, history, summary)
    assert done.status == "done" and await archive.claim_import(claim) == done
    assert await store.get_image("tenant-a", "img_1") == image
    assert await store.get_session("tenant-a", image.sessionId) == session
    assert await store.list_messages(image.sessionId) == history
    assert await store.get_summary(image.sessionId) == summary
    assert [i.imageId for i in await store.list_images("tenant-a", "user-alice")] == ["img_1"]
    # the store appends after the written history, as after any other
    appended = await store.append_message(image.sessionId, UserMessage(id="m9", timestamp=9, content="more"))
    assert appended.seq == 5


async def test_a_taken_over_claim_refuses_the_write_and_discarding_leaves_nothing(pair):
    store, archive = pair
    image, session = records("img_1")
    claim = claim_for(image)
    await archive.claim_import(claim)
    assert await archive.replace_import(claim, claim.model_copy(update={"owner": "thief"}))
    with pytest.raises(Conflict):
        await archive.write_import(claim, image, session, chat("a", "b"), None)
    await archive.discard_import(claim)  # the failed writer's clean-up: its claim is not its own now
    assert await store.get_image("tenant-a", "img_1") is None
    assert await store.list_messages(image.sessionId) == []
    assert (await archive.claim_import(claim)).owner == "thief"


async def test_discarding_a_claim_deletes_its_session_and_frees_the_key(pair):
    store, archive = pair
    image, session = records("img_1")
    claim = claim_for(image)
    await archive.claim_import(claim)
    summary = SessionSummary(sessionId=image.sessionId, upToSeq=1, text="s", model="echo/echo-1")
    done = await archive.write_import(claim, image, session, chat("a", "b"), summary)
    await archive.discard_import(done)
    assert await store.get_image("tenant-a", "img_1") is None
    assert await store.get_session("tenant-a", image.sessionId) is None
    assert await store.list_messages(image.sessionId) == []
    assert await store.get_summary(image.sessionId) is None
    fresh = claim.model_copy(update={"owner": "again"})
    assert await archive.claim_import(fresh) == fresh


# -- search ---------------------------------------------------------------------------------------------
LISBON = chat(
    "Where should I eat in Lisbon tonight?",
    "Try the Alfama district: Café Martinho serves bacalhau.",
    "And what about e-mail access there?",
    "Most cafés have Wi-Fi; ask for the password.",
)


async def test_search_finds_words_phrases_and_prefixes_ignoring_case_and_accents(pair):
    _, archive = pair
    await put(archive, "img_1", LISBON)
    assert await found(archive, "lisbon") == [("img_1", 1)]
    assert await found(archive, '"alfama district"') == [("img_1", 2)]
    assert await found(archive, '"district alfama"') == []
    assert await found(archive, "CAFE martinho") == [("img_1", 2)]
    assert await found(archive, "caf*") == [("img_1", 4), ("img_1", 2)]
    assert await found(archive, '"cafe mar"*') == [("img_1", 2)]
    assert await found(archive, "e-mail") == [("img_1", 3)]
    assert await found(archive, "wi-fi password") == [("img_1", 4)]
    assert await found(archive, "lisbon password") == []  # every term, in one message
    assert await found(archive, "bacalhau tonight") == []


async def test_search_reads_user_and_assistant_text_only(pair):
    _, archive = pair
    call = ToolCallMessage(
        id="t1", timestamp=1, toolCall=ToolCallPart(id="c1", name="lookup", input={"q": "zebra"})
    )
    result = ToolResultMessage(
        id="t2",
        timestamp=2,
        toolCallId="c1",
        toolResult=ToolResultPart(
            id="c1", name="lookup", output=ToolResultOutput(type="text", value="zebra")
        ),
    )
    parts = UserMessage(
        id="u1", timestamp=3, content=[TextPart(text="first zebra part"), TextPart(text="second")]
    )
    await put(archive, "img_1", [call, result, parts])
    assert await found(archive, "zebra") == [("img_1", 3)]
    assert await found(archive, '"part second"') == [("img_1", 3)]  # parts are read one per line


async def test_search_orders_by_conversation_then_message_newest_first_and_pages_exactly(pair):
    _, archive = pair
    await put(archive, "img_a", chat("apple one", "apple two", "apple three"), at=1000)
    await put(archive, "img_c", chat("apple four", "pear"), at=3000)
    await put(archive, "img_b", chat("apple five"), at=2000, container="user-bob")
    expected = [("img_c", 1), ("img_b", 1), ("img_a", 3), ("img_a", 2), ("img_a", 1)]
    assert await found(archive, "apple") == expected
    assert await found(archive, "apple", container_id="user-alice") == [
        e for e in expected if e[0] != "img_b"
    ]
    assert await found(archive, "apple", container_id="user-nobody") == []


async def test_search_never_crosses_tenants(pair):
    _, archive = pair
    await put(archive, "img_a", chat("the secret plan of tenant a"))
    await put(archive, "img_b", chat("the secret plan of tenant b"), tenant="tenant-b")
    assert await found(archive, '"secret plan"') == [("img_a", 1)]
    assert await found(archive, '"secret plan"', tenant="tenant-b") == [("img_b", 1)]
    assert await found(archive, "secret", tenant="tenant-c") == []
    # tenant b's container of the same name is tenant b's
    assert await found(archive, "secret", tenant="tenant-b", container_id="user-alice") == [("img_b", 1)]


async def test_search_sees_messages_written_after_an_earlier_search_and_forgets_deleted_images(pair):
    store, archive = pair
    image, _ = await put(archive, "img_1", chat("first words"))
    assert await found(archive, "first") == [("img_1", 1)]
    await store.append_message(image.sessionId, UserMessage(id="late", timestamp=5, content="later words"))
    assert await found(archive, "words") == [("img_1", 2), ("img_1", 1)]
    await store.delete_image("tenant-a", "img_1")
    assert await found(archive, "words") == []


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("Ελληνικά: ΣΊΣΥΦΟΣ ήταν βασιλιάς", "σίσυφος"),
        ("İstanbul'da kahve içtik", "istanbul da"),
        ("Die Straße ist lang", "STRASSE"),
        ("naïve résumé", "naive resume"),
        ("日本語のテキスト 検索", "検索"),
        ("snake_case_name and x² units", "snake case"),
        ("price: $100 + tax", '"100 tax"'),
    ],
)
async def test_every_store_tokenizes_alike(pair, text, query):
    _, archive = pair
    await put(archive, "img_1", chat(text))
    assert await found(archive, query) == [("img_1", 1)]
