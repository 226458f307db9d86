"""The ``KnowledgeIndex`` port on SQLite (the local host): FTS5 for words, sqlite-vec for vectors.

**Tables** (in the host's ``agentvm.db``): ``knowledge_chunks`` holds every chunk's fields, keyed
by ``(owner, resource, version, document_id, ordinal)``; ``knowledge_fts`` is an FTS5 index over
its title, heading path and text (external content: the text is stored once), kept in step by
triggers; ``knowledge_vec_<dimensions>`` is a sqlite-vec ``vec0`` table per vector size, its
rowid the chunk's, partitioned by the version's scope.

**Tenancy.** The owner is part of every key and every query. A search also matches a ``scope``
column (a hash of owner, resource and version, one token) inside FTS5 and is the ``vec0``
partition key, so a query reads the posting lists and vectors of its own version only, not every
tenant's, then checks the exact key again in the join.

**Tokenizer.** ``porter unicode61 remove_diacritics 2``: unicode61 splits words in any script and
folds case and accents (``café`` finds ``cafe``); Porter stemming on top makes ``refunds``,
``refunded`` and ``refunding`` one term, which helps the English business documents knowledge
mostly holds more than it hurts other languages (their words pass through it mostly unchanged).
**Ranking:** FTS5's ``bm25()``, with a heading path weighing 3 and a title 2 against the text's 1.

**Connection.** sqlite-vec is a loadable extension; Python's ``sqlite3`` is not always built to
load extensions (pyenv's and some distributions' are not), so the index opens the file with
``sqlean.py`` (SQLite with extension loading, the ``knowledge`` extra) when the standard module
cannot, or has no FTS5. Without either, words work and ``search_vectors`` answers ``[]`` (``vectors``: False);
adding vectors then fails loudly.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import sqlite3
import struct
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.sqlite.checkpoint import in_background
from agentvm.ports import KnowledgeChunk, KnowledgeDocument, KnowledgeHit, vector_dimensions
from agentvm.resources.search import STOP_WORDS

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

log = logging.getLogger("agentvm.knowledge")

_FTS_ON_INSERT = """CREATE TRIGGER IF NOT EXISTS knowledge_chunks_ai AFTER INSERT ON knowledge_chunks BEGIN
    INSERT INTO knowledge_fts(rowid, scope, title, heading_path, text)
    VALUES (new.id, new.scope, new.title, new.heading_path, new.text);
END;
"""
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS knowledge_chunks (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL, resource TEXT NOT NULL, version TEXT NOT NULL,
    document_id TEXT NOT NULL, ordinal INTEGER NOT NULL,
    scope TEXT NOT NULL, title TEXT NOT NULL, heading_path TEXT NOT NULL, location TEXT NOT NULL,
    text TEXT NOT NULL, dimensions INTEGER,
    UNIQUE (owner, resource, version, document_id, ordinal)
);
CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts USING fts5(
    scope, title, heading_path, text,
    content='knowledge_chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
{_FTS_ON_INSERT}CREATE TRIGGER IF NOT EXISTS knowledge_chunks_ad AFTER DELETE ON knowledge_chunks BEGIN
    INSERT INTO knowledge_fts(knowledge_fts, rowid, scope, title, heading_path, text)
    VALUES ('delete', old.id, old.scope, old.title, old.heading_path, old.text);
END;
"""
# An empty index given at least this many chunks at once (a downloaded draft's local file built, a
# version published) indexes their words in one FTS5 'rebuild' rather than row by row: ~3x faster.
BULK_LOAD = 64
_COLUMNS = KnowledgeChunk.COLUMNS
# bm25() weights, in the FTS5 columns' order: scope, title, heading_path, text
_WEIGHTS = "0.0, 2.0, 3.0, 1.0"
MAX_QUERY_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)


def _last_of_each(chunks: Sequence[KnowledgeChunk]) -> list[tuple[int, KnowledgeChunk]]:
    """The chunks (with their positions) that adding them one by one leaves: the last of each
    document and ordinal, where it came (a replaced chunk goes, its replacement is added)."""
    last: dict[tuple[str, int], tuple[int, KnowledgeChunk]] = {}
    for n, chunk in enumerate(chunks):
        last.pop((chunk.document_id, chunk.ordinal), None)
        last[(chunk.document_id, chunk.ordinal)] = (n, chunk)
    return list(last.values())


def scope_of(owner: str, resource: str, version: str) -> str:
    """One FTS5 token (hex) naming a version: a search matches it before the query's words."""
    return "s" + hashlib.sha256(f"{owner}\x00{resource}\x00{version}".encode()).hexdigest()[:32]


def match_expression(query: str) -> str | None:
    """The FTS5 query for free text: its words (stop words dropped unless nothing else is left),
    each quoted (no FTS5 syntax gets through), any of them matching. None: no word at all."""
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOP_WORDS] or words
    unique = list(dict.fromkeys(kept))[:MAX_QUERY_TERMS]
    if not unique:
        return None
    return " OR ".join(f'"{w}"' for w in unique)


@functools.cache
def _has_fts5(module: Any) -> bool:
    """Whether ``module``'s SQLite has FTS5 (a system SQLite as old as Amazon Linux 2's 3.7.17,
    under the AWS Lambda python3.11 runtime, has not: the index then runs on sqlean.py's)."""
    conn = module.connect(":memory:")
    try:
        return any(row[0] == "ENABLE_FTS5" for row in conn.execute("PRAGMA compile_options"))
    finally:
        conn.close()


def _open(path: str | Path) -> tuple[Any, bool]:
    """A connection to ``path`` and whether it has sqlite-vec loaded."""
    try:
        import sqlite_vec
    except ImportError:
        sqlite_vec = None
    module: Any = sqlite3
    if not _has_fts5(sqlite3) or (
        sqlite_vec is not None and not hasattr(sqlite3.Connection, "enable_load_extension")
    ):
        try:
            import sqlean

            module = sqlean
        except ImportError:
            log.warning("vectors are off: Python's sqlite3 cannot load sqlite-vec and sqlean.py is missing")
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = module.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=5000")
    if in_background(path):  # the checkpoint thread copies the log back (sqlite/checkpoint.py)
        conn.execute("PRAGMA wal_autocheckpoint=0")
    vectors = False
    if sqlite_vec is not None and hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
            vectors = True
        finally:
            conn.enable_load_extension(False)
    return conn, vectors


class SqliteKnowledgeIndex:
    """``agentvm.ports.KnowledgeIndex`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn, self.vectors = _open(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _vec_table(self, dimensions: int) -> str:
        if not self.vectors:
            raise RuntimeError("this index cannot store vectors: install the knowledge extra (sqlite-vec)")
        table = f"knowledge_vec_{int(dimensions)}"
        self._conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
            f"scope TEXT PARTITION KEY, embedding float[{int(dimensions)}] distance_metric=cosine)"
        )
        return table

    async def add_chunks(
        self,
        owner: str,
        resource: str,
        version: str,
        chunks: Sequence[KnowledgeChunk],
        vectors: Sequence[Sequence[float]] | None,
    ) -> None:
        dimensions = vector_dimensions(chunks, vectors)
        table = self._vec_table(dimensions) if dimensions else None
        scope = scope_of(owner, resource, version)
        conn = self._conn
        with self._transaction():
            bulk = (
                len(chunks) >= BULK_LOAD
                and conn.execute("SELECT 1 FROM knowledge_chunks LIMIT 1").fetchone() is None
            )
            if bulk:  # nothing to replace; the words indexed once all rows are in (below)
                conn.execute("DROP TRIGGER knowledge_chunks_ai")
            for n, chunk in _last_of_each(chunks) if bulk else enumerate(chunks):
                if not bulk:
                    self._delete_rows(
                        "owner = ? AND resource = ? AND version = ? AND document_id = ? AND ordinal = ?",
                        (owner, resource, version, chunk.document_id, chunk.ordinal),
                    )
                cur = conn.execute(
                    "INSERT INTO knowledge_chunks (owner, resource, version, document_id, ordinal, scope,"
                    " title, heading_path, location, text, dimensions) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        owner,
                        resource,
                        version,
                        chunk.document_id,
                        chunk.ordinal,
                        scope,
                        chunk.title,
                        chunk.heading_path,
                        chunk.location,
                        chunk.text,
                        dimensions,
                    ),
                )
                if table is not None and vectors is not None:
                    conn.execute(
                        f"INSERT INTO {table} (rowid, scope, embedding) VALUES (?, ?, ?)",
                        (cur.lastrowid, scope, _floats(vectors[n])),
                    )
            if bulk:  # the table held nothing else: its whole FTS5 index is these rows'
                conn.execute("INSERT INTO knowledge_fts(knowledge_fts) VALUES ('rebuild')")
                conn.execute(_FTS_ON_INSERT)

    def _delete_rows(self, where: str, params: tuple[Any, ...]) -> int:
        """Delete the chunks matching ``where`` and their vectors (inside the caller's transaction);
        the bytes of text deleted."""
        rows = self._conn.execute(
            f"SELECT id, dimensions, length(CAST(text AS BLOB)) FROM knowledge_chunks WHERE {where}", params
        ).fetchall()
        for chunk_id, dimensions, _ in rows:
            if dimensions and self.vectors:
                self._conn.execute(
                    f"DELETE FROM knowledge_vec_{int(dimensions)} WHERE rowid = ?", (chunk_id,)
                )
        self._conn.execute(f"DELETE FROM knowledge_chunks WHERE {where}", params)
        return sum(size for _, _, size in rows)

    async def search_words(
        self, owner: str, resource: str, version: str, query: str, limit: int
    ) -> list[KnowledgeHit]:
        words = match_expression(query)
        if words is None or limit < 1:
            return []
        scope = scope_of(owner, resource, version)
        rows = self._conn.execute(
            f"SELECT c.document_id, c.title, c.heading_path, c.location, c.ordinal, c.text,"
            f" bm25(knowledge_fts, {_WEIGHTS}) AS rank"
            " FROM knowledge_fts JOIN knowledge_chunks c ON c.id = knowledge_fts.rowid"
            " WHERE knowledge_fts MATCH ? AND c.owner = ? AND c.resource = ? AND c.version = ?"
            " ORDER BY rank, c.document_id, c.ordinal LIMIT ?",
            (f'scope:"{scope}" AND ({words})', owner, resource, version, limit),
        ).fetchall()
        # bm25() is lower-is-better (negative); a hit's score is higher-is-better
        return [KnowledgeHit(KnowledgeChunk.from_row(row), -float(row[6])) for row in rows]

    async def search_vectors(
        self, owner: str, resource: str, version: str, vector: Sequence[float], limit: int
    ) -> list[KnowledgeHit]:
        if not self.vectors or limit < 1:
            return []
        table = f"knowledge_vec_{len(vector)}"
        exists = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        if exists is None:
            return []
        scope = scope_of(owner, resource, version)
        rows = self._conn.execute(
            f"SELECT {', '.join('c.' + c.strip() for c in _COLUMNS.split(','))}, v.distance"
            f" FROM (SELECT rowid, distance FROM {table}"
            "       WHERE embedding MATCH ? AND k = ? AND scope = ?) v"
            " JOIN knowledge_chunks c ON c.id = v.rowid"
            " WHERE c.owner = ? AND c.resource = ? AND c.version = ?"
            " ORDER BY v.distance, c.document_id, c.ordinal",
            (_floats(vector), limit, scope, owner, resource, version),
        ).fetchall()
        return [
            KnowledgeHit(KnowledgeChunk.from_row(row), 1.0 - float(row[6])) for row in rows
        ]  # cosine similarity

    async def drop_version(self, owner: str, resource: str, version: str) -> None:
        with self._transaction():
            self._delete_rows("owner = ? AND resource = ? AND version = ?", (owner, resource, version))

    async def drop_document(self, owner: str, resource: str, version: str, document_id: str) -> int:
        with self._transaction():
            return self._delete_rows(
                "owner = ? AND resource = ? AND version = ? AND document_id = ?",
                (owner, resource, version, document_id),
            )

    async def drop_owner(self, owner: str) -> None:
        with self._transaction():
            self._delete_rows("owner = ?", (owner,))

    async def stats(self, owner: str, resource: str) -> tuple[int, int, int]:
        row = self._conn.execute(
            "SELECT count(DISTINCT version || char(0) || document_id), count(*),"
            " coalesce(sum(length(CAST(text AS BLOB))), 0)"
            " FROM knowledge_chunks WHERE owner = ? AND resource = ?",
            (owner, resource),
        ).fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    async def documents(self, owner: str, resource: str, version: str) -> list[KnowledgeDocument]:
        rows = self._conn.execute(
            "SELECT document_id, min(title), count(*), sum(length(CAST(text AS BLOB)))"
            " FROM knowledge_chunks WHERE owner = ? AND resource = ? AND version = ?"
            " GROUP BY document_id ORDER BY document_id",
            (owner, resource, version),
        ).fetchall()
        return [KnowledgeDocument(r[0], r[1], int(r[2]), int(r[3])) for r in rows]

    async def chunks(self, owner: str, resource: str, version: str) -> list[KnowledgeChunk]:
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM knowledge_chunks WHERE owner = ? AND resource = ? AND version = ?"
            " ORDER BY document_id, ordinal",
            (owner, resource, version),
        ).fetchall()
        return [KnowledgeChunk.from_row(row) for row in rows]


def _floats(vector: Sequence[float]) -> bytes:
    """A vector as sqlite-vec reads it: little-endian float32s."""
    return struct.pack(f"<{len(vector)}f", *vector)


__all__ = ["BULK_LOAD", "MAX_QUERY_TERMS", "SqliteKnowledgeIndex", "match_expression", "scope_of"]
