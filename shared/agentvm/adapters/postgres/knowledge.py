"""The ``KnowledgeIndex`` port on PostgreSQL (the cluster host): a ``tsvector`` for words, ``real[]``
vectors ranked by exact cosine similarity in SQL.

**Table** ``knowledge_chunks`` (migration ``0111_knowledge_chunks``): one row per chunk, keyed by
``(tenant_id, resource, version, document_id, ordinal)``; every query names the tenant, resource
and version, so one tenant's query never reads another's chunks.

**Words.** ``words`` is a generated ``tsvector`` under a GIN index: ``to_tsvector('english', ...)``
of the heading path (weight A), title (B) and text (D). 'english' rather than 'simple' because the
local index stems with Porter (``refunds``, ``refunded`` and ``refund`` are one term there) and
the same question should find the same chunks on both hosts; the Snowball English stemmer is
PostgreSQL's equivalent (its stop words are dropped too; FTS5 keeps them but they rank low under
BM25 anyway). Unlike FTS5's ``remove_diacritics`` it does not fold accents (``unaccent`` is an
extension a managed database may not allow). ``words`` also holds one lexeme naming the version
(``'s' || md5(tenant, resource, version)``): a search ANDs it with the query's words, so the GIN
index intersects with that version's posting list instead of returning every tenant's matches
(the same trick as the local index's FTS5 ``scope`` column).

The query is parsed by PostgreSQL itself (``to_tsvector('english', query)``: the same parser and
stemmer as the rows, no tokenizer here) and its lexemes are ORed, as the local index ORs its words:
a paraphrase sharing two of five words still finds the chunk, and ``ts_rank_cd`` (cover density,
with the weights above) ranks chunks matching more of them higher. ``websearch_to_tsquery`` and
``plainto_tsquery`` AND every word, so a question with one word absent from a chunk would miss it.
Plans depend on statistics: right after a large version is indexed and before autovacuum's
ANALYZE, the planner may filter the version's rows through the primary key instead of reading
the GIN index (a rare word: 285 ms instead of 6.5 ms at 10,000 chunks; BENCHMARKS.md).

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
from typing import TYPE_CHECKING, Any

from agentvm.ports import KnowledgeChunk, KnowledgeDocument, KnowledgeHit, vector_dimensions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database

_COLUMNS = "document_id, title, heading_path, location, ordinal, text"
_SCOPE = "tenant_id = %s AND resource = %s AND version = %s"
MAX_QUERY_TERMS = 32
# ts_rank_cd's weights for D, C, B, A (each at most 1): the heading path (A) weighs 3 times the text
# (D), the title (B) twice, as the local index's bm25() column weights; C is unused
_WEIGHTS = "'{0.3, 0.3, 0.6, 0.9}'"
# The query's lexemes (PostgreSQL's own parser and English stemmer), each quoted, ORed; NULL when
# the query has none (only stop words or punctuation). The version's lexeme is ANDed for the index.
_QUERY = (
    "SELECT (SELECT string_agg('''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''', ' | ')"
    "        FROM (SELECT l FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS l"
    f"             LIMIT {MAX_QUERY_TERMS}) AS terms)::tsquery"
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

    def __init__(self, database: Database) -> None:
        self._db = database

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
                f"SELECT {_COLUMNS}, ts_rank_cd({_WEIGHTS}, words, q) AS rank"
                " FROM knowledge_chunks, CAST(%s AS tsquery) AS q"
                f" WHERE {_SCOPE}"
                " AND words @@ (CAST('s' || md5(%s || chr(1) || %s || chr(1) || %s) AS tsquery) && q)"
                " ORDER BY rank DESC, document_id, ordinal LIMIT %s",
                (str(row[0]), owner, resource, version, owner, resource, version, limit),
            )
            rows = await cur.fetchall()
        return [KnowledgeHit(_chunk(r), float(r[6])) for r in rows]

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
        return [KnowledgeHit(_chunk(r), float(r[6] or 0.0)) for r in rows]

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
        return [_chunk(r) for r in rows]


def _chunk(row: Sequence[Any]) -> KnowledgeChunk:
    return KnowledgeChunk(
        document_id=row[0],
        title=row[1],
        heading_path=row[2],
        location=row[3],
        ordinal=int(row[4]),
        text=row[5],
    )


__all__ = ["MAX_QUERY_TERMS", "PostgresKnowledgeIndex"]
