"""The ``KnowledgeIndex`` port's contract, on SQLite (FTS5 words, sqlite-vec vectors) and PostgreSQL
(tsvector words, real[] vectors), and hybrid search over each: ranks, stemming, tenant and version
isolation, replacement and deletion, and the fusion of both lists. PostgreSQL three ways: as
configured (pgvector when installed; every query exact with ``<=>``, ``exact_below`` unset), through
pgvector's HNSW index for every query (``exact_below=0``; pgvector is required under CI=true), and
without the extension (the exact scan in SQL)."""

from __future__ import annotations

import logging
import random
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex, match_expression
from agentvm.ports import DRAFT, KnowledgeChunk, KnowledgeHit
from agentvm.resources.hybrid import RRF_K, hybrid_search, reciprocal_rank_fusion
from tests.knowledge_files import BagOfWordsEmbedder

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@asynccontextmanager
async def on_sqlite() -> AsyncIterator[Any]:
    idx = SqliteKnowledgeIndex(":memory:")
    try:
        yield idx
    finally:
        idx.close()


@asynccontextmanager
async def on_postgres() -> AsyncIterator[Any]:
    # imported here: a session that runs no PostgreSQL test never imports psycopg
    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        yield PostgresKnowledgeIndex(database)


@asynccontextmanager
async def on_postgres_hnsw() -> AsyncIterator[Any]:
    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database, require_pgvector

    async with fresh_database() as database:
        await require_pgvector(database)
        yield PostgresKnowledgeIndex(database, exact_below=0)


@asynccontextmanager
async def on_postgres_without_pgvector() -> AsyncIterator[Any]:
    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database

    async with fresh_database() as database:
        async with database.connection() as conn:
            await conn.execute("DROP EXTENSION IF EXISTS vector")
        idx = PostgresKnowledgeIndex(database)
        assert not await idx.uses_pgvector()
        yield idx


@pytest.fixture(
    params=[
        pytest.param(on_sqlite, id="sqlite"),
        pytest.param(on_postgres, id="postgres", marks=pytest.mark.postgres),
        pytest.param(on_postgres_hnsw, id="postgres-hnsw", marks=pytest.mark.postgres),
        pytest.param(on_postgres_without_pgvector, id="postgres-exact", marks=pytest.mark.postgres),
    ]
)
async def empty(request):
    """An empty index of each host."""
    async with request.param() as idx:
        yield idx


def chunk(doc: str, ordinal: int, text: str, path: str = "", title: str = "Handbook") -> KnowledgeChunk:
    return KnowledgeChunk(doc, title, path, path.rsplit(" > ", 1)[-1], ordinal, text)


HANDBOOK = [
    chunk("billing.md", 0, "Invoices are sent on the first day of each month.", "Billing"),
    chunk(
        "billing.md", 1, "Refunds are paid back to the original card within five days.", "Billing > Refunds"
    ),
    chunk("security.md", 0, "Two-factor authentication is available on every plan.", "Security"),
    chunk("shipping.md", 0, "Orders ship from Rotterdam; express delivery takes two days.", "Shipping"),
]


@pytest.fixture
async def index(empty):
    await empty.add_chunks("acme", "handbook", "1", HANDBOOK, None)
    return empty


async def test_words_rank_by_matches_and_stem(index):
    hits = await index.search_words("acme", "handbook", "1", "how are refunds refunded?", 5)
    assert [h.chunk.heading_path for h in hits] == ["Billing > Refunds"]
    hits = await index.search_words("acme", "handbook", "1", "two days", 5)
    # shipping has both words; security has "two", billing "day(s)" (stemmed): fewer matches rank lower
    assert hits[0].chunk.document_id == "shipping.md"
    assert {h.chunk.document_id for h in hits[1:]} == {"security.md", "billing.md"}
    assert all(hits[0].score > h.score for h in hits[1:])
    assert await index.search_words("acme", "handbook", "1", "zebra", 5) == []


async def test_accents_are_folded_in_the_text_and_in_the_query(empty):
    """As FTS5's ``remove_diacritics`` does: ``cafe`` finds ``café`` and ``café`` finds ``cafe``
    (PostgreSQL: the ``unaccent`` dictionary of the ``avm_knowledge`` configuration)."""
    idx = empty
    await idx.add_chunks(
        "acme",
        "kb",
        "1",
        [
            chunk("menu.md", 0, "Crème brûlée is served on Fridays.", "Café"),
            chunk("review.md", 0, "A naive review of the cafe next door."),
            chunk("other.md", 0, "Opening hours are posted at the door."),
        ],
        None,
    )
    for query in ("cafe", "café", "CAFÉ"):
        hits = await idx.search_words("acme", "kb", "1", query, 5)
        assert sorted(h.chunk.document_id for h in hits) == ["menu.md", "review.md"], query
    hits = await idx.search_words("acme", "kb", "1", "creme brulee", 5)
    assert [h.chunk.document_id for h in hits] == ["menu.md"]
    hits = await idx.search_words("acme", "kb", "1", "naïve", 5)
    assert [h.chunk.document_id for h in hits] == ["review.md"]


async def test_the_heading_path_counts_more_than_the_text(empty):
    idx = empty
    await idx.add_chunks(
        "acme",
        "kb",
        "1",
        [
            chunk("a.md", 0, "Our team answers questions about refunds, shipping and invoices.", "Contact"),
            chunk("b.md", 0, "Money goes back to the card used to pay.", "Refunds"),
        ],
        None,
    )
    hits = await idx.search_words("acme", "kb", "1", "refunds", 5)
    assert [h.chunk.document_id for h in hits] == ["b.md", "a.md"]


def test_query_syntax_never_reaches_fts5():
    assert match_expression('refund" OR scope:x NEAR(a b) *') == '"refund" OR "scope" OR "x" OR "near" OR "b"'
    assert match_expression("the of") == '"the" OR "of"'  # only stop words: kept
    assert match_expression("!!! ???") is None


async def test_query_syntax_is_only_words(index):
    assert await index.search_words("acme", "handbook", "1", '"*) OR (', 5) == []
    assert await index.search_words("acme", "handbook", "1", "!!! ???", 5) == []
    for hostile in ("refunds' | 'x", "refunds\\' & !card:*", "refunds ) OR scope:x NEAR(a b) <-> *"):
        hits = await index.search_words("acme", "handbook", "1", hostile, 5)
        assert [h.chunk.heading_path for h in hits] == ["Billing > Refunds"]


async def test_another_tenant_resource_or_version_never_returns_hits(index):
    await index.add_chunks(
        "other", "handbook", "1", [chunk("x.md", 0, "Refunds for the other tenant.")], None
    )
    mine = await index.search_words("acme", "handbook", "1", "refunds tenant", 10)
    assert {h.chunk.document_id for h in mine} == {"billing.md"}
    theirs = await index.search_words("other", "handbook", "1", "refunds invoices", 10)
    assert [h.chunk.document_id for h in theirs] == ["x.md"]
    assert await index.search_words("acme", "handbook", "2", "refunds", 10) == []
    assert await index.search_words("acme", "manual", "1", "refunds", 10) == []
    assert await index.search_words("nobody", "handbook", "1", "refunds", 10) == []


async def test_documents_chunks_stats_and_dropping(index):
    await index.add_chunks("acme", "handbook", DRAFT, HANDBOOK[:2], None)
    assert [(d.document_id, d.chunks) for d in await index.documents("acme", "handbook", "1")] == [
        ("billing.md", 2),
        ("security.md", 1),
        ("shipping.md", 1),
    ]
    assert await index.chunks("acme", "handbook", DRAFT) == HANDBOOK[:2]
    size = sum(len(c.text.encode()) for c in HANDBOOK)
    assert await index.stats("acme", "handbook") == (
        4,
        6,
        size + sum(len(c.text.encode()) for c in HANDBOOK[:2]),
    )
    freed = await index.drop_document("acme", "handbook", DRAFT, "billing.md")
    assert freed == sum(len(c.text.encode()) for c in HANDBOOK[:2])
    assert await index.drop_document("acme", "handbook", DRAFT, "billing.md") == 0
    assert await index.search_words("acme", "handbook", DRAFT, "refunds", 5) == []
    assert len(await index.search_words("acme", "handbook", "1", "refunds", 5)) == 1  # the version keeps it
    await index.drop_version("acme", "handbook", "1")
    assert await index.stats("acme", "handbook") == (0, 0, 0)
    assert await index.search_words("acme", "handbook", "1", "refunds", 5) == []


async def test_dropping_an_owner_forgets_its_drafts_and_versions_only(index):
    await index.add_chunks("acme", "never-published", DRAFT, HANDBOOK[:1], None)
    await index.add_chunks("other", "handbook", "1", HANDBOOK[:1], None)
    await index.drop_owner("acme")
    assert await index.stats("acme", "handbook") == (0, 0, 0)
    assert await index.stats("acme", "never-published") == (0, 0, 0)
    assert await index.stats("other", "handbook") == (1, 1, len(HANDBOOK[0].text.encode()))


async def test_a_chunk_of_the_same_document_and_ordinal_replaces_the_indexed_one(index):
    await index.add_chunks(
        "acme", "handbook", "1", [chunk("billing.md", 1, "Refunds take ten days now.")], None
    )
    hits = await index.search_words("acme", "handbook", "1", "refunds", 5)
    assert [h.chunk.text for h in hits] == ["Refunds take ten days now."]
    assert await index.search_words("acme", "handbook", "1", "original card", 5) == []


async def test_a_large_first_add_indexes_as_adding_one_by_one_does(empty):
    """SQLite indexes a large add to an empty index in one FTS5 'rebuild' (``BULK_LOAD``): the same
    hits, scores and vectors as chunk by chunk, a repeated document and ordinal replaced, and the
    index kept up to date by later adds and removals."""
    rng = random.Random(3)
    words = ["refunds", "invoices", "shipping", "security", "returns", "rotterdam", "card", "plan"]
    chunks = [
        chunk(f"d{n // 4}.md", n % 4, " ".join(rng.choice(words) for _ in range(12))) for n in range(120)
    ]
    chunks.append(chunk("d0.md", 1, "Replaced: express delivery only."))  # the same document and ordinal
    embedder = BagOfWordsEmbedder()
    vectors = embedder.embed([c.text for c in chunks], purpose="document")
    await empty.add_chunks("acme", "kb", "1", chunks, vectors)  # one call, into an empty index
    for c, v in zip(chunks, vectors, strict=True):  # one by one, into one that is not
        await empty.add_chunks("acme", "kb", "2", [c], [v])
    (query,) = embedder.embed(["refunds card"], purpose="query")
    for text in ("refunds card", "express delivery", "original"):
        bulk = await empty.search_words("acme", "kb", "1", text, 20)
        assert bulk == await empty.search_words("acme", "kb", "2", text, 20)
    near = [await empty.search_vectors("acme", "kb", v, query, 10) for v in ("1", "2")]
    assert near[0] == near[1] and near[0]
    assert len(await empty.chunks("acme", "kb", "1")) == 120
    await empty.add_chunks("acme", "kb", "1", [chunk("d1.md", 0, "Zeppelin arrivals.")], None)
    assert [h.chunk.document_id for h in await empty.search_words("acme", "kb", "1", "zeppelin", 5)] == [
        "d1.md"
    ]
    await empty.drop_document("acme", "kb", "1", "d1.md")
    assert await empty.search_words("acme", "kb", "1", "zeppelin", 5) == []


async def test_vectors_find_the_nearest_chunks_per_version_and_tenant(empty):
    idx = empty
    assert idx.vectors  # sqlite-vec loaded (through sqlean.py where sqlite3 cannot load extensions)
    embedder = BagOfWordsEmbedder()
    texts = [c.text for c in HANDBOOK]
    await idx.add_chunks("acme", "handbook", "1", HANDBOOK, embedder.embed(texts, purpose="document"))
    await idx.add_chunks(
        "other", "handbook", "1", HANDBOOK[:1], embedder.embed(texts[:1], purpose="document")
    )
    (query,) = embedder.embed(["express delivery from Rotterdam"], purpose="query")
    hits = await idx.search_vectors("acme", "handbook", "1", query, 2)
    assert hits[0].chunk.document_id == "shipping.md" and len(hits) == 2
    assert hits[0].score > hits[1].score
    theirs = await idx.search_vectors("other", "handbook", "1", query, 10)
    assert [h.chunk.document_id for h in theirs] == ["billing.md"]
    assert await idx.search_vectors("acme", "handbook", "2", query, 5) == []
    assert await idx.search_vectors("acme", "handbook", "1", [1.0, 0.0, 0.0], 5) == []  # no such dimension
    await idx.drop_version("acme", "handbook", "1")
    assert await idx.search_vectors("acme", "handbook", "1", query, 5) == []


async def test_vectors_of_one_call_must_match_the_chunks(empty):
    idx = empty
    with pytest.raises(ValueError, match="2 vectors for 1 chunks"):
        await idx.add_chunks("acme", "kb", "1", HANDBOOK[:1], [[1.0], [2.0]])
    with pytest.raises(ValueError, match="same dimensions"):
        await idx.add_chunks("acme", "kb", "1", HANDBOOK[:2], [[1.0, 0.0], [1.0]])


def test_reciprocal_rank_fusion_sums_one_over_k_plus_rank():
    a, b, c = (KnowledgeHit(chunk(d, 0, d), 0.0) for d in ("a", "b", "c"))
    fused = reciprocal_rank_fusion([a, b], [b, c])
    assert [h.chunk.document_id for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert fused[1].score == pytest.approx(1 / (RRF_K + 1))


async def test_hybrid_search_without_an_embedder_says_it_ran_words_only(index):
    result = await hybrid_search(index, None, "acme", "handbook", "1", "refunds", 3)
    assert result.mode == "words"
    assert [h.chunk.heading_path for h in result.hits] == ["Billing > Refunds"]


async def test_hybrid_search_fuses_words_and_vectors(empty):
    idx = empty
    embedder = BagOfWordsEmbedder()
    await idx.add_chunks(
        "acme", "handbook", "1", HANDBOOK, embedder.embed([c.text for c in HANDBOOK], purpose="document")
    )
    # "refund" (singular) is only a word match through stemming; "card" pulls the vector side
    result = await hybrid_search(idx, embedder, "acme", "handbook", "1", "refund card", 3)
    assert result.mode == "hybrid"
    assert result.hits[0].chunk.heading_path == "Billing > Refunds"
    assert result.hits[0].score > 1 / (RRF_K + 1)  # found by both lists: no single list scores that
    assert embedder.calls[-1] == (1, "query")
    # a version without vectors: words alone, and said so
    await idx.add_chunks("acme", "handbook", "2", HANDBOOK, None)
    assert (await hybrid_search(idx, embedder, "acme", "handbook", "2", "refund card", 3)).mode == "words"


@pytest.mark.postgres
async def test_postgres_refreshes_its_statistics_after_a_large_add():
    """One ``add_chunks`` of ``analyze_after_rows`` rows or more ANALYZEs the table (a publish of a
    large version is searched at once, before autovacuum would); a smaller one leaves it alone."""
    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database

    async def analysed_rows(database) -> float:  # pg_class.reltuples: -1 until the first ANALYZE
        async with database.connection() as conn:
            cur = await conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'knowledge_chunks'")
            row = await cur.fetchone()
        return float(row[0])

    async with fresh_database() as database:
        idx = PostgresKnowledgeIndex(database, analyze_after_rows=4)
        await idx.add_chunks("acme", "handbook", DRAFT, HANDBOOK[:3], None)
        assert await analysed_rows(database) == -1
        await idx.add_chunks("acme", "handbook", "1", HANDBOOK, None)
        assert await analysed_rows(database) == 7


def seeded_vectors(seed: int, count: int, dimensions: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.gauss(0, 1) for _ in range(dimensions)] for _ in range(count)]


@pytest.mark.postgres
async def test_pgvector_indexes_each_dimension_and_its_search_matches_the_exact_one():
    """A version at or above ``exact_below`` chunks is searched through the dimension's HNSW index
    (created on the first add of that dimension), over-fetched and re-ranked: the same top ten as
    the exact scan here, never another tenant's or another dimension's chunks."""
    from agentvm.adapters.postgres import knowledge
    from tests.postgres_server import fresh_database, require_pgvector

    async with fresh_database() as database:
        await require_pgvector(database)
        hnsw = knowledge.PostgresKnowledgeIndex(database, exact_below=300)
        exact = knowledge.PostgresKnowledgeIndex(database)  # the default: every query exact
        chunks = [chunk(f"doc-{n}.md", 0, f"chunk {n}") for n in range(400)]
        await hnsw.add_chunks("acme", "kb", "1", chunks, seeded_vectors(1, 400, 16))
        await hnsw.add_chunks("other", "kb", "1", chunks, seeded_vectors(2, 400, 16))
        await hnsw.add_chunks("acme", "kb", "1", [chunk("short.md", 0, "eight")], seeded_vectors(3, 1, 8))
        async with database.connection() as conn:
            cur = await conn.execute(
                "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'knowledge_chunks_cosine_%'"
                " ORDER BY indexname"
            )
            assert [r[0] for r in await cur.fetchall()] == [
                "knowledge_chunks_cosine_16",
                "knowledge_chunks_cosine_8",
            ]
            # the HNSW query can use its dimension's index (the planner's choice on a table this
            # small is a sort, so sorting is priced out here)
            await conn.execute("SET enable_sort = off")
            plan = await conn.execute(
                "EXPLAIN " + knowledge._hnsw_query(16), ([1.0] * 16, "acme", "kb", "1", 100, 10)
            )
            assert "knowledge_chunks_cosine_16" in "\n".join(r[0] for r in await plan.fetchall())
        found = 0
        for query in seeded_vectors(4, 10, 16):
            got = await hnsw.search_vectors("acme", "kb", "1", query, 10)
            want = await exact.search_vectors("acme", "kb", "1", query, 10)
            assert len(got) == 10 and all(h.chunk.document_id.startswith("doc-") for h in got)
            found += len({h.chunk.document_id for h in got} & {h.chunk.document_id for h in want})
            assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
        assert found / 100 >= 0.9  # recall@10 against the exact scan
        async with database.connection() as conn:  # the index only where the operator chose it
            assert await hnsw._through_the_index(conn, ("acme", "kb", "1"), 16)
            assert not await exact._through_the_index(conn, ("acme", "kb", "1"), 16)
        assert len(await hnsw.search_vectors("other", "kb", "1", query, 500)) == 400


@pytest.mark.postgres
async def test_without_pgvector_vector_search_scans_exactly_and_says_so_once(caplog, monkeypatch):
    from agentvm.adapters.postgres import knowledge
    from tests.postgres_server import fresh_database

    monkeypatch.setattr(knowledge, "_told_exact", False)
    async with fresh_database() as database:
        async with database.connection() as conn:
            await conn.execute("DROP EXTENSION IF EXISTS vector")
        with caplog.at_level(logging.INFO, logger="agentvm.adapters.postgres.knowledge"):
            for _ in range(2):
                idx = knowledge.PostgresKnowledgeIndex(database, exact_below=0)
                await idx.add_chunks("acme", "kb", "1", HANDBOOK, seeded_vectors(5, len(HANDBOOK), 16))
                hits = await idx.search_vectors("acme", "kb", "1", seeded_vectors(5, 1, 16)[0], 3)
                assert hits[0].chunk == HANDBOOK[0] and hits[0].score == pytest.approx(1.0)
        assert caplog.text.count("no pgvector in this database") == 1
        async with database.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname LIKE '%cosine%'")
            assert (await cur.fetchone())[0] == 0
