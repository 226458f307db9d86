"""The ``KnowledgeIndex`` port on PostgreSQL (the cluster host): a ``tsvector`` for words, ``real[]``
vectors ranked by exact cosine similarity in SQL.

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

**Vectors.** pgvector is not packaged for Debian bookworm's PostgreSQL (nor available on every
managed database), so a vector is a ``real[]`` with its ``norm`` stored beside it, and
``search_vectors`` computes the exact cosine similarity of every chunk of the version in SQL (a
brute-force scan: ``sum(a * b)`` over ``unnest`` of both arrays). Exact, so recall is perfect, but
its cost grows with the version: about ``chunks x dimensions`` multiplications a query, evaluated
row by row by the executor (BENCHMARKS.md, "Knowledge search on SQLite and PostgreSQL", has the
milliseconds at 1k, 10k and 100k chunks). Storage: ``4 x dimensions`` bytes a vector (1.5 KiB at
384). Where the pgvector extension is installed, a ``vector(n)`` column with an HNSW index
(``vector_cosine_ops``) is the step that makes this logarithmic; it is not written here because no
test could run it on this platform.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from agentvm.ports import KnowledgeChunk, KnowledgeDocument, KnowledgeHit, vector_dimensions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database

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

    vectors = True  # real[] needs no extension

    def __init__(self, database: Database, *, analyze_after_rows: int | None = ANALYZE_AFTER_ROWS) -> None:
        self._db = database
        self.analyze_after_rows = analyze_after_rows  # None: leave statistics to autovacuum

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
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS},"
                " (SELECT sum(a::float8 * b) FROM unnest(embedding, %b::real[]) AS t(a, b))"
                " / (NULLIF(norm, 0) * %s) AS similarity"
                f" FROM knowledge_chunks WHERE {_SCOPE} AND dimensions = %s"
                " ORDER BY similarity DESC NULLS LAST, document_id, ordinal LIMIT %s",
                (list(vector), norm, owner, resource, version, len(vector), limit),
            )
            rows = await cur.fetchall()
        return [KnowledgeHit(KnowledgeChunk.from_row(r), float(r[6] or 0.0)) for r in rows]

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


__all__ = ["ANALYZE_AFTER_ROWS", "MAX_QUERY_TERMS", "SEARCH_WORDS", "PostgresKnowledgeIndex"]
