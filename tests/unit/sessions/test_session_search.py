"""Session search: the query syntax (what it accepts, what it refuses with ``invalid_query``), the
route on both hosts (never a raw engine error, never a 500), paging by cursor, and the local
index's life (built at search time, deleted with its conversations, the fallback without FTS5).
What every store finds is the contract suite's (``tests/contract/test_session_archive_contract.py``);
a 10,000-message container is the slow tier's (``test_session_search_at_scale.py``)."""

from __future__ import annotations

import logging

import pytest

from agentvm.adapters.local.sqlite.sessions import SqliteSessionArchive
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.errors import BadRequest, InvalidQuery
from agentvm.messages import UserMessage
from agentvm.ports import SearchPosition, SearchTerm
from agentvm.records import ImageRecord, SessionRecord
from agentvm.sessions.search import decode_cursor, encode_cursor, matches, parse_query, tokens
from tests.unit.security.test_tenant_attacks import RUNTIME_FACTORIES


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("deploy", [SearchTerm(("deploy",))]),
        ("Deploy  FRIDAY", [SearchTerm(("deploy",)), SearchTerm(("friday",))]),
        ('"blue green" deploy', [SearchTerm(("blue", "green")), SearchTerm(("deploy",))]),
        ("deploy*", [SearchTerm(("deploy",), prefix=True)]),
        ('"blue gre"*', [SearchTerm(("blue", "gre"), prefix=True)]),
        ("e-mail", [SearchTerm(("e", "mail"))]),
        ("café", [SearchTerm(("cafe",))]),
        ('"or" and not', [SearchTerm(("or",)), SearchTerm(("and",)), SearchTerm(("not",))]),
        ("C++ [draft] 100%", [SearchTerm(("c",)), SearchTerm(("draft",)), SearchTerm(("100",))]),
    ],
)
def test_the_query_syntax_is_words_phrases_and_prefixes(query, terms):
    assert list(parse_query(query)) == terms


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("", "at least one word"),
        ("   ", "at least one word"),
        ('"unclosed phrase', "not closed"),
        ("alpha OR beta", "OR is not supported"),
        ("alpha AND beta", "AND is not supported"),
        ("NOT alpha", "NOT is not supported"),
        ("NEAR(alpha beta)", "not part of the search syntax"),
        ("-alpha", "excluding words"),
        ("(alpha beta)", "not part of the search syntax"),
        ("title:alpha", "not part of the search syntax"),
        ("alpha^2", "not part of the search syntax"),
        ("{alpha}", "not part of the search syntax"),
        ("alpha~", "not part of the search syntax"),
        ("al*pha", "* may only end a word"),
        ("*", "no letters or digits"),
        ('""', "no letters or digits"),
        ("?!", "no letters or digits"),
        ("a*", "at least 2"),
        ("x" * 501, "at most 500"),
        (" ".join(f"w{i}" for i in range(17)), "at most 16"),
    ],
)
def test_unsupported_syntax_is_refused_with_invalid_query(query, says):
    with pytest.raises(InvalidQuery) as refused:
        parse_query(query)
    assert refused.value.code == "invalid_query" and says in refused.value.message


def test_matching_needs_every_term_and_phrases_in_a_row():
    text = "The blue-green deploy went out on Friday; nobody noticed."
    assert tokens(text)[:4] == ["the", "blue", "green", "deploy"]
    assert matches(parse_query('"green deploy" friday'), text)
    assert matches(parse_query("notic*"), text)
    assert not matches(parse_query('"deploy green"'), text)
    assert not matches(parse_query("deploy saturday"), text)
    assert not matches(parse_query("notice"), text)  # a word, not a prefix


def test_cursors_round_trip_and_a_forged_one_is_refused():
    position = SearchPosition(1767225600000, "img_1", 42)
    assert decode_cursor(encode_cursor(position)) == position
    for forged in ("%%%", "bm90IGpzb24", encode_cursor(position)[:-3] + "zzz", "WzEsMl0"):
        with pytest.raises(BadRequest) as refused:
            decode_cursor(forged)
        assert refused.value.code == "bad_request"


# -- the route, both hosts --------------------------------------------------------------------------
@pytest.fixture(params=RUNTIME_FACTORIES)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        yield w


async def test_the_route_answers_every_bad_search_with_a_400_never_an_engine_error(world):
    async with world.http("tenant-a") as http:
        for params, code in [
            ({"q": 'NEAR("a b", 2)'}, "invalid_query"),
            ({"q": '"a'}, "invalid_query"),
            ({"q": "a OR b"}, "invalid_query"),
            ({"q": "*"}, "invalid_query"),
            ({"q": "x" * 501}, "invalid_query"),
            ({"q": "plan", "cursor": "not-a-cursor"}, "bad_request"),
            ({"q": "plan", "limit": 0}, "bad_request"),
            ({"q": "plan", "limit": 101}, "bad_request"),
            ({}, "bad_request"),  # no q at all
        ]:
            r = await http.get("/v1/sessions/search", params=params)
            assert (r.status_code, r.json()["error"]["code"]) == (400, code), (params, r.text)


async def test_the_route_pages_through_a_tenants_messages_with_the_cursor(world):
    a = await world.connect(world.tokens["tenant-a"])
    for container in ("user-alice", "user-bob"):
        image = (await a.request("image_create", containerId=container, config={"name": container}))["record"]
        for i in range(3):
            world.model.add(f"Reply {i} about the harbour.")
            await a.request("message_send", imageId=image["imageId"], content=f"Question {i} on the harbour?")
            await world.run_turns()
    seen: list[tuple[str, int]] = []
    cursor = None
    async with world.http("tenant-a") as http:
        while True:
            params = {"q": "harbour", "limit": 4, **({"cursor": cursor} if cursor else {})}
            page = (await http.get("/v1/sessions/search", params=params)).json()
            assert len(page["results"]) <= 4
            seen += [(r["containerId"], r["seq"]) for r in page["results"]]
            cursor = page["next"]
            if cursor is None:
                break
        bob = (
            await http.get("/v1/sessions/search", params={"q": '"reply 2"', "containerId": "user-bob"})
        ).json()
    assert seen == [("user-bob", s) for s in range(6, 0, -1)] + [("user-alice", s) for s in range(6, 0, -1)]
    [hit] = bob["results"]
    assert (hit["containerId"], hit["seq"], hit["role"], hit["name"]) == (
        "user-bob",
        6,
        "assistant",
        "user-bob",
    )
    assert hit["snippet"] == "Reply 2 about the harbour."


# -- the local index ---------------------------------------------------------------------------------
def _image(image_id: str) -> tuple[ImageRecord, SessionRecord]:
    image = ImageRecord(
        tenantId="t",
        imageId=image_id,
        containerId="c",
        sessionId=f"s_{image_id}",
        name="n",
        createdAt=1,
        updatedAt=1,
    )
    return image, SessionRecord(
        tenantId="t", sessionId=image.sessionId, imageId=image_id, containerId="c", createdAt=1, updatedAt=1
    )


async def _search(archive: SqliteSessionArchive, query: str) -> list[int]:
    page = await archive.search_messages("t", parse_query(query), container_id=None, limit=50, after=None)
    return [h.seq for h in page.hits]


async def test_the_index_is_built_at_search_time_and_deleted_with_its_conversation(tmp_path):
    store = SqliteStore(tmp_path / "agentvm.db")
    archive = SqliteSessionArchive(store)
    image, session = _image("img_1")
    await store.create_image(image, session)
    for i in range(3):
        await store.append_message(
            session.sessionId, UserMessage(id=f"m{i}", timestamp=i, content=f"secret {i}")
        )
    rows = "SELECT count(*) FROM message_fts"
    assert store.connection.execute(rows).fetchone() == (0,)  # nothing is indexed on write
    assert await _search(archive, "secret") == [3, 2, 1]
    assert store.connection.execute(rows).fetchone() == (3,)
    await store.delete_image("t", "img_1")
    store.close()
    # the next start (or search) deletes the rows of a deleted conversation: no text is kept
    reopened = SqliteStore(tmp_path / "agentvm.db")
    SqliteSessionArchive(reopened)
    assert reopened.connection.execute(rows).fetchone() == (0,)
    reopened.close()


async def test_without_fts5_search_reads_messages_and_a_database_indexed_before_keeps_working(tmp_path):
    db = tmp_path / "agentvm.db"
    store = SqliteStore(db)
    indexed = SqliteSessionArchive(store)
    image, session = _image("img_1")
    await store.create_image(image, session)
    await store.append_message(session.sessionId, UserMessage(id="m1", timestamp=1, content="alpha beta"))
    assert await _search(indexed, "alpha") == [1]
    # the same database opened where FTS5 is missing: writes and deletes still work, search scans
    fallback = SqliteSessionArchive(store, fts=False)
    await store.append_message(session.sessionId, UserMessage(id="m2", timestamp=2, content="alpha gamma"))
    assert await _search(fallback, "alpha") == [2, 1]
    other, other_session = _image("img_2")
    await store.create_image(other, other_session)
    await store.delete_image("t", "img_2")
    # and with FTS5 again, the index catches up with what was written meanwhile
    assert await _search(SqliteSessionArchive(store), '"alpha gamma"') == [2]
    store.close()


async def test_a_python_without_fts5_is_told_at_start_and_still_searches(monkeypatch, caplog):
    from agentvm.adapters.local.sqlite import sessions as sqlite_sessions

    # What this SQLite says when its module is missing: "no such module: fts5..."
    monkeypatch.setattr(sqlite_sessions, "_FTS", "CREATE VIRTUAL TABLE probe USING fts5_missing(text)")
    store = SqliteStore(":memory:")
    with caplog.at_level(logging.WARNING, logger="agentvm.sessions"):
        archive = SqliteSessionArchive(store)
    assert not archive.fts
    assert any("has no FTS5" in r.getMessage() for r in caplog.records)
    image, session = _image("img_1")
    await store.create_image(image, session)
    await store.append_message(session.sessionId, UserMessage(id="m1", timestamp=1, content="still found"))
    assert await _search(archive, '"still found"') == [1]
    store.close()
