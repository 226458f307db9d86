"""The ``KnowledgeIndex`` port on PostgreSQL (the cluster host): a ``tsvector`` for words, ``real[]``
vectors ranked by cosine similarity (pgvector's HNSW index where the extension is, exact otherwise).

**Table** ``knowledge_chunks`` (migrations ``0111_knowledge_chunks``, ``0112_knowledge_unaccent``):
one row per chunk, keyed by ``(tenant_id, resource, version, document_id, ordinal)``; every query
names the tenant, resource and version, so one tenant's query never reads another's chunks.

**Words.** ``words`` is a generated ``tsvector`` under a GIN index: ``to_tsvector('avm_knowledge',
...)`` of the heading path (weight A), title (B) and text (D). ``avm_knowledge`` is PostgreSQL's
'english' configuration (Snowball stemming and stop words) with the ``unaccent`` dictionary before
the stemmer. 'english' rather than 'simple' because the local index stems with Porter
(``refunds``, ``refunded`` and ``refund`` are one term there) and the same question should find the
same chunks on every host (its stop words are dropped too; FTS5 keeps them but they rank low under
BM25 anyway). ``unaccent`` because FTS5's ``remove_diacritics`` folds accents: ``cafe`` finds
``café`` there, so it must here. Folding is done by PostgreSQL, not in Python before indexing and
querying, because PostgreSQL already parses both the rows and the query (below): folding in Python
would need a second, folded copy of every text to index (a generated column cannot call Python)
and would split one normalisation between two languages. The price: the cluster's database needs
the ``unaccent`` extension, which ships in PostgreSQL's contrib and is trusted since PostgreSQL 13
(a database owner may create it; managed services offer it). ``words`` also holds one lexeme naming
the version (``'s' || md5(tenant, resource, version)``): a search ANDs it with the query's words, so
the GIN index intersects with that version's posting list instead of returning every tenant's
matches (the same trick as the local index's FTS5 ``scope`` column).

The query is parsed by PostgreSQL itself (``to_tsvector('avm_knowledge', query)``: the same parser,
folding and stemmer as the rows, no tokenizer here) and its lexemes are ORed, as the local index ORs
its words: a paraphrase sharing two of five words still finds the chunk, and ``ts_rank_cd`` (cover
density, with the weights above) ranks chunks matching more of them higher.
``websearch_to_tsquery`` and ``plainto_tsquery`` AND every word, so a question with one word absent
from a chunk would miss it.

**Statistics.** Plans depend on them: right after a large version is indexed and before
autovacuum's ANALYZE, the planner may filter the version's rows through the primary key instead of
reading the GIN index. So ``add_chunks`` runs ``ANALYZE`` on the table itself, right after its
commit, when one call added ``ANALYZE_AFTER_ROWS`` (1,000) rows or more: a publish indexes a
version in one call, uploads add one document at a time. Why 1,000: at that size both plans
answer alike (measured at 1,000 chunks: tens of milliseconds either way), while ANALYZE reads a
fixed sample (300 x ``default_statistics_target`` rows, 30,000 by default) whatever the table's
size, so its cost stays bounded (about half a second at 20,000 rows; the columns no query filters
on carry no statistics, migration 0112) and small beside indexing 1,000 chunks (a second or more).
``SKIP_LOCKED``: when autovacuum or another node is analysing the table already, this one does not
wait. Measured at 10,000 chunks (BENCHMARKS.md, "ANALYZE after a publish"): a rare word in 128 ms
through the primary key without it, 2.2 ms through the GIN index with it.

**Vectors** are ``real[]`` with their ``norm`` beside them, on every server. Two ways to search them:

* *pgvector* (the ``vector`` extension, migration ``0113_knowledge_pgvector``; Debian bookworm does
  not package it for PostgreSQL 15: ``scripts/install_pgvector.sh`` builds Debian trixie's 0.8.0).
  Embeddings differ in length by provider and model, and an HNSW index needs one fixed dimension,
  so there is no ``vector`` column: each dimension ``n`` gets its own partial expression index,
  ``hnsw ((embedding::vector(n)) vector_cosine_ops) WHERE dimensions = n``, created by
  ``add_chunks`` the first time it stores vectors of that length (in its own transaction, under an
  advisory lock: nodes adding the same new dimension do not race). No second copy of a vector in
  the table, no schema change for a new model, and nodes without pgvector keep writing the same
  rows (the index follows them). **Queries are exact by default**: the index answers fast but
  approximately (recall@10 0.43 at 100,000 fake-llm chunks), which users would see as worse
  answers, so it is an operator's choice (``exact_below``, ``AVM_KNOWLEDGE_EXACT_BELOW``; 10,000 is
  the measured break-even). With it set, a query of a version holding ``exact_below`` or more
  chunks of its dimension asks the index for ``limit x OVERFETCH`` candidates (``hnsw.ef_search``
  as many, at most pgvector's 1,000; ``hnsw.iterative_scan = relaxed_order`` so that the rows of
  other versions and tenants the index visits do not leave it short) and re-ranks them by their
  exact cosine similarity. A smaller version is scanned exactly with pgvector's ``<=>`` (C, through
  the primary key: about ``chunks x dimensions`` operations, ~7 µs a chunk at 384 dimensions, so
  under 70 ms below 10,000 chunks, with perfect recall; the index answers 10,000 chunks in ~8 ms
  but found 0.73 to 0.82 of the exact top ten there, on fake-llm embeddings). Dimensions above
  ``HNSW_MAX_DIMENSIONS`` (2,000, pgvector's limit for ``vector``) are scanned exactly too.
* *Exact in SQL*, when the extension is absent (not installed, or not created: it is not a trusted
  extension): the cosine similarity of every chunk of the version, ``sum(a * b)`` over ``unnest``
  of both arrays, row by row in the executor. Perfect recall, cost ``chunks x dimensions`` a query,
  slow past a few thousand chunks. Logged once per process.

BENCHMARKS.md ("pgvector") has the latency and recall@10 of both at 1k, 10k and 100k chunks.
Storage: ``4 x dimensions`` bytes a vector in the table (1.5 KiB at 384), about as much again in
its HNSW index.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from agentvm.ports import KnowledgeChunk, KnowledgeDocument, KnowledgeHit, vector_dimensions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database

logger = logging.getLogger(__name__)

_COLUMNS = KnowledgeChunk.COLUMNS
_SCOPE = "tenant_id = %s AND resource = %s AND version = %s"
MAX_QUERY_TERMS = 32
ANALYZE_AFTER_ROWS = 1000  # one add_chunks adding this many rows refreshes the planner's statistics
# ts_rank_cd's weights for D, C, B, A (each at most 1): the heading path (A) weighs 3 times the text
# (D), the title (B) twice, as the local index's bm25() column weights; C is unused
_WEIGHTS = "'{0.3, 0.3, 0.6, 0.9}'"
# The query's lexemes (PostgreSQL's own parser and English stemmer), each quoted, ORed; NULL when
# the query has none (only stop words or punctuation). The version's lexeme is ANDed for the index.
_QUERY = (
    "SELECT (SELECT string_agg('''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''', ' | ')"
    "        FROM (SELECT l FROM unnest(tsvector_to_array(to_tsvector('avm_knowledge', %s))) AS l"
    f"             LIMIT {MAX_QUERY_TERMS}) AS terms)::tsquery"
)
# The words search proper, on the query's tsquery (``_QUERY``); its parameters: the tsquery, then
# tenant, resource, version (the key), the same three again (the version's lexeme), the limit.
SEARCH_WORDS = (
    f"SELECT {_COLUMNS}, ts_rank_cd({_WEIGHTS}, words, q) AS rank"
    " FROM knowledge_chunks, CAST(%s AS tsquery) AS q"
    f" WHERE {_SCOPE}"
    " AND words @@ (CAST('s' || md5(%s || chr(1) || %s || chr(1) || %s) AS tsquery) && q)"
    " ORDER BY rank DESC, document_id, ordinal LIMIT %s"
)
OVERFETCH = 100  # HNSW candidates a result (k x OVERFETCH: 1,000 for k = 10), re-ranked exactly
MAX_EF_SEARCH = 1000  # pgvector's ceiling for hnsw.ef_search
HNSW_MAX_DIMENSIONS = 2000  # pgvector's ceiling for an HNSW index on `vector`
# pg_advisory_xact_lock's key while a node creates a dimension's HNSW index: b"avm-hnsw"
_INDEX_LOCK_KEY = int.from_bytes(b"avm-hnsw", "big", signed=True)
_told_exact = False  # the "no pgvector" line is logged once per process
# The exact scan without pgvector: cosine in SQL over both arrays.
_EXACT_IN_SQL = (
    f"SELECT {_COLUMNS},"
    " (SELECT sum(a::float8 * b) FROM unnest(embedding, %b::real[]) AS t(a, b))"
    " / (NULLIF(norm, 0) * %s) AS similarity"
    f" FROM knowledge_chunks WHERE {_SCOPE} AND dimensions = %s"
    " ORDER BY similarity DESC NULLS LAST, document_id, ordinal LIMIT %s"
)
# The exact scan with pgvector: ``<=>`` (cosine distance) on the untyped cast, which no HNSW index
# matches, so the planner reads the version through the primary key.
_EXACT_PGVECTOR = (
    f"SELECT {_COLUMNS}, 1 - (embedding::vector <=> CAST(%b::real[] AS vector)) AS similarity"
    f" FROM knowledge_chunks WHERE {_SCOPE} AND dimensions = %s AND norm > 0"
    " ORDER BY similarity DESC, document_id, ordinal LIMIT %s"
)
# How many chunks of a dimension a version holds, counting no further than ``exact_below``.
_COUNT_UP_TO = (
    "SELECT count(*) FROM (SELECT 1 FROM knowledge_chunks"
    f" WHERE {_SCOPE} AND dimensions = %s LIMIT %s) AS held"
)


def _hnsw_query(dimensions: int) -> str:
    """The HNSW search of one dimension: ``limit x OVERFETCH`` candidates in the index's order
    (the expression and predicate are the index's, so the planner can use it), then the exact
    re-rank. ``dimensions`` is an int (formatted, not a parameter: a type modifier must be literal)."""
    typed = f"embedding::vector({int(dimensions)})"
    return (
        f"SELECT {_COLUMNS}, 1 - distance AS similarity FROM ("
        f" SELECT {_COLUMNS}, {typed} <=> q AS distance"
        f" FROM knowledge_chunks, CAST(CAST(%b AS real[]) AS vector({int(dimensions)})) AS q"
        f" WHERE {_SCOPE} AND dimensions = {int(dimensions)} AND norm > 0"
        " ORDER BY distance LIMIT %s) AS candidates"
        " ORDER BY distance, document_id, ordinal LIMIT %s"
    )


def _hnsw_index_name(dimensions: int) -> str:
    return f"knowledge_chunks_cosine_{int(dimensions)}"


def _hnsw_index(dimensions: int) -> str:
    n = int(dimensions)
    return (  # IF NOT EXISTS: another node may have created it while this one waited for the lock
        f"CREATE INDEX IF NOT EXISTS {_hnsw_index_name(n)} ON knowledge_chunks"
        f" USING hnsw ((embedding::vector({n})) vector_cosine_ops) WHERE dimensions = {n}"
    )


_INSERT = (
    "INSERT INTO knowledge_chunks (tenant_id, resource, version, document_id, ordinal, title,"
    " heading_path, location, text, embedding, dimensions, norm)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %b::real[], %s, %s)"
    " ON CONFLICT (tenant_id, resource, version, document_id, ordinal) DO UPDATE SET"
    " title = excluded.title, heading_path = excluded.heading_path, location = excluded.location,"
    " text = excluded.text, embedding = excluded.embedding, dimensions = excluded.dimensions,"
    " norm = excluded.norm"
)


def _norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


class PostgresKnowledgeIndex:
    """``agentvm.ports.KnowledgeIndex`` on the node's ``Database``."""

    vectors = True  # real[] needs no extension (pgvector, when present, indexes them)

    def __init__(
        self,
        database: Database,
        *,
        analyze_after_rows: int | None = ANALYZE_AFTER_ROWS,
        exact_below: int | None = None,
        overfetch: int = OVERFETCH,
    ) -> None:
        self._db = database
        self.overfetch = overfetch  # HNSW candidates a result, re-ranked exactly
        # chunks of a version from which a query uses the HNSW index (None: every query is exact)
        self.exact_below = exact_below
        self.analyze_after_rows = analyze_after_rows  # None: leave statistics to autovacuum
        self._pgvector: bool | None = None  # the extension exists in this database (asked once)
        self._iterative = False  # pgvector 0.8 or later: hnsw.iterative_scan
        self._indexed: set[int] = set()  # dimensions whose HNSW index this instance ensured

    async def uses_pgvector(self) -> bool:
        """Whether the database has the ``vector`` extension (asked once; logged once per process
        when it has not: vector search is then the exact scan in SQL)."""
        global _told_exact
        if self._pgvector is None:
            async with self._db.connection() as conn:
                cur = await conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                row = await cur.fetchone()
            self._pgvector = row is not None
            # hnsw.iterative_scan is pgvector 0.8's; before it, the over-fetch alone
            self._iterative = row is not None and tuple(int(p) for p in row[0].split(".")[:2]) >= (0, 8)
            if not self._pgvector and not _told_exact:
                _told_exact = True
                logger.info(
                    "knowledge: no pgvector in this database: vector search scans every chunk of a"
                    " version exactly (slow past a few thousand chunks; docs/embeddings.md)"
                )
        return self._pgvector

    async def _ensure_hnsw_index(self, dimensions: int) -> None:
        if dimensions in self._indexed or dimensions > HNSW_MAX_DIMENSIONS or not await self.uses_pgvector():
            return
        name = _hnsw_index_name(dimensions)
        async with self._db.transaction() as conn:
            # looked up first: CREATE INDEX IF NOT EXISTS takes the table's SHARE lock (waiting for
            # every insert in flight) before it finds the index there
            if await (await conn.execute("SELECT to_regclass(%s)", (name,))).fetchone() == (None,):
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INDEX_LOCK_KEY,))
                await conn.execute(_hnsw_index(dimensions))
        self._indexed.add(dimensions)

    async def add_chunks(
        self,
        owner: str,
        resource: str,
        version: str,
        chunks: Sequence[KnowledgeChunk],
        vectors: Sequence[Sequence[float]] | None,
    ) -> None:
        dimensions = vector_dimensions(chunks, vectors)
        rows = [
            (
                owner,
                resource,
                version,
                c.document_id,
                c.ordinal,
                c.title,
                c.heading_path,
                c.location,
                c.text,
                list(vectors[n]) if vectors else None,
                dimensions,
                _norm(vectors[n]) if vectors else None,
            )
            for n, c in enumerate(chunks)
        ]
        if not rows:
            return
        if dimensions:
            await self._ensure_hnsw_index(dimensions)
        async with self._db.transaction() as conn, conn.cursor() as cur:
            await cur.executemany(_INSERT, rows)  # pipelined: one round trip per batch, not per row
        if self.analyze_after_rows is not None and len(rows) >= self.analyze_after_rows:
            await self.analyze()

    async def analyze(self) -> None:
        """Refresh the planner's statistics of the chunk table (skipped when someone else holds
        its ANALYZE lock: autovacuum, or another node doing the same)."""
        async with self._db.connection() as conn:
            await conn.execute("ANALYZE (SKIP_LOCKED) knowledge_chunks")

    async def search_words(
        self, owner: str, resource: str, version: str, query: str, limit: int
    ) -> list[KnowledgeHit]:
        if limit < 1:
            return []
        async with self._db.connection() as conn:
            cur = await conn.execute(_QUERY, (query,))
            row = await cur.fetchone()
            if row is None or row[0] is None:
                return []
            cur = await conn.execute(
                SEARCH_WORDS, (str(row[0]), owner, resource, version, owner, resource, version, limit)
            )
            rows = await cur.fetchall()
        return [KnowledgeHit(KnowledgeChunk.from_row(r), float(r[6])) for r in rows]

    async def search_vectors(
        self, owner: str, resource: str, version: str, vector: Sequence[float], limit: int
    ) -> list[KnowledgeHit]:
        norm = _norm(vector)
        if limit < 1 or not vector or norm == 0:
            return []
        dimensions = len(vector)
        scope = (owner, resource, version)
        if not await self.uses_pgvector():
            query, params = _EXACT_IN_SQL, (list(vector), norm, *scope, dimensions, limit)
            async with self._db.connection() as conn:
                rows = await (await conn.execute(query, params)).fetchall()
        else:
            async with self._db.transaction() as conn:
                if not await self._through_the_index(conn, scope, dimensions):
                    cur = await conn.execute(_EXACT_PGVECTOR, (list(vector), *scope, dimensions, limit))
                else:
                    candidates = limit * self.overfetch
                    ef_search = str(min(MAX_EF_SEARCH, max(40, candidates)))
                    await conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (ef_search,))
                    if self._iterative:
                        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    cur = await conn.execute(
                        _hnsw_query(dimensions), (list(vector), *scope, candidates, limit)
                    )
                rows = await cur.fetchall()
        return [KnowledgeHit(KnowledgeChunk.from_row(r), float(r[6] or 0.0)) for r in rows]

    async def _through_the_index(self, conn: Any, scope: tuple[str, str, str], dimensions: int) -> bool:
        """Whether this query uses the dimension's HNSW index: the operator chose the index
        (``exact_below``), the dimension has one, and the version holds that many chunks of it."""
        if self.exact_below is None or dimensions > HNSW_MAX_DIMENSIONS:
            return False
        row = await (await conn.execute(_COUNT_UP_TO, (*scope, dimensions, self.exact_below))).fetchone()
        return row is not None and row[0] >= self.exact_below

    async def drop_version(self, owner: str, resource: str, version: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute(f"DELETE FROM knowledge_chunks WHERE {_SCOPE}", (owner, resource, version))

    async def drop_document(self, owner: str, resource: str, version: str, document_id: str) -> int:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "WITH gone AS (DELETE FROM knowledge_chunks"
                f" WHERE {_SCOPE} AND document_id = %s RETURNING octet_length(text) AS size)"
                " SELECT coalesce(sum(size), 0) FROM gone",
                (owner, resource, version, document_id),
            )
            row = await cur.fetchone()
        return int(row[0]) if row is not None else 0

    async def drop_owner(self, owner: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute("DELETE FROM knowledge_chunks WHERE tenant_id = %s", (owner,))

    async def stats(self, owner: str, resource: str) -> tuple[int, int, int]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT count(DISTINCT (version, document_id)), count(*),"
                " coalesce(sum(octet_length(text)), 0)"
                " FROM knowledge_chunks WHERE tenant_id = %s AND resource = %s",
                (owner, resource),
            )
            row = await cur.fetchone()
        return (int(row[0]), int(row[1]), int(row[2])) if row is not None else (0, 0, 0)

    async def documents(self, owner: str, resource: str, version: str) -> list[KnowledgeDocument]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT document_id, min(title), count(*), sum(octet_length(text))"
                f" FROM knowledge_chunks WHERE {_SCOPE} GROUP BY document_id ORDER BY document_id",
                (owner, resource, version),
            )
            rows = await cur.fetchall()
        return [KnowledgeDocument(r[0], r[1], int(r[2]), int(r[3])) for r in rows]

    async def chunks(self, owner: str, resource: str, version: str) -> list[KnowledgeChunk]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM knowledge_chunks WHERE {_SCOPE} ORDER BY document_id, ordinal",
                (owner, resource, version),
            )
            rows = await cur.fetchall()
        return [KnowledgeChunk.from_row(r) for r in rows]


__all__ = [
    "ANALYZE_AFTER_ROWS",
    "HNSW_MAX_DIMENSIONS",
    "MAX_QUERY_TERMS",
    "OVERFETCH",
    "SEARCH_WORDS",
    "PostgresKnowledgeIndex",
]
