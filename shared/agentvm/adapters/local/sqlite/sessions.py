"""The ``SessionArchive`` port on SQLite: imports and forks in one transaction, and message search
with an FTS5 index built lazily, at search time.

**Imports and forks.** The ledger is the table ``session_imports``; ``write_import`` writes the
session, its messages, its summary and the image into the store's own tables (on the store's
connection) and marks the claim done, in one ``BEGIN IMMEDIATE`` transaction: all or nothing.

**Search.** Nothing is done when a message is written. A search first brings the index up to
date for the sessions it covers (the caller's tenant, or one container): ``search_sessions``
holds, per session, the last seq indexed; the messages after it are tokenized
(``agentvm.sessions.search.tokens``, the one tokenizer both stores use) and added to the FTS5
table ``message_fts`` (``tokenize='ascii'`` over the already normalised tokens, so FTS5 and the
Python matcher agree exactly). A row's id is ``sid << 32 | seq``: one session's rows are one id
range. A search walks the caller's conversations (of the tenant, or of one container) in result
order and reads each one's range newest first, only as far as the page needs. Deleting an image
marks its session (a trigger on ``images``, plain SQL, so deleting never needs FTS5); the next
search, or the next start, deletes its rows. The first search of a container of 10,000 messages
indexes them all (about half a second; BENCHMARKS.md, "Session search"); later ones only what
was written since. Prefixes of 2 and 3 characters have their own index (``prefix='2 3'``), so a
short prefix* stays fast.

**Without FTS5** (a Python whose SQLite lacks it: logged once at start) search reads the messages
and matches them in Python (``sessions.search.scan``), as the DynamoDB adapter does: the same
results, slower on long histories.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.sqlite.store import _image_row, _message_json, transaction
from agentvm.errors import Conflict
from agentvm.messages import message_from_wire
from agentvm.ports import MessageHit, SearchPage, SearchPosition
from agentvm.records import ImageRecord, SessionImport
from agentvm.sessions.search import scan, searchable_text, tokens

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Sequence

    from agentvm.adapters.local.sqlite.store import SqliteStore
    from agentvm.messages import Message
    from agentvm.ports import SearchTerm
    from agentvm.records import SessionRecord, SessionSummary

log = logging.getLogger("agentvm.sessions")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_imports (
    tenant_id TEXT NOT NULL,
    key       TEXT NOT NULL,
    record    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE TABLE IF NOT EXISTS search_sessions (
    sid         INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL UNIQUE,
    tenant_id   TEXT NOT NULL,
    indexed_seq INTEGER NOT NULL DEFAULT 0,
    deleted     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS search_sessions_deleted ON search_sessions (deleted) WHERE deleted = 1;
CREATE INDEX IF NOT EXISTS images_by_session ON images (session_id);
CREATE TRIGGER IF NOT EXISTS search_sessions_forget AFTER DELETE ON images BEGIN
    UPDATE search_sessions SET deleted = 1 WHERE session_id = OLD.session_id;
END;
"""
_FTS = "CREATE VIRTUAL TABLE IF NOT EXISTS message_fts USING fts5(text, tokenize='ascii', prefix='2 3')"
_SEQ_MASK = 0xFFFFFFFF
_PAGE = 500  # messages per read while indexing or scanning


def _phrase(term: SearchTerm) -> str:
    # Tokens are runs of letters and digits (``sessions.search.tokens``): nothing in them can be
    # FTS5 syntax, so quoting them is enough.
    return 'text : "' + " ".join(term.tokens) + '"' + (" *" if term.prefix else "")


class SqliteSessionArchive:
    """``agentvm.ports.SessionArchive`` on the ``SqliteStore``'s own database and connection."""

    def __init__(self, store: SqliteStore, *, fts: bool | None = None) -> None:
        """``fts``: None uses FTS5 when this Python's SQLite has it; False never (the fallback)."""
        self._store = store
        self._conn = store.connection
        self._conn.executescript(_SCHEMA)
        self.fts = fts is not False and self._create_fts()
        if fts is None and not self.fts:
            log.warning(
                "this Python's SQLite has no FTS5: session search reads messages instead of an index "
                "(same results, slower on long histories)"
            )
        if self.fts:
            with transaction(self._conn):
                self._sweep()

    def _create_fts(self) -> bool:
        try:
            self._conn.execute(_FTS)
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc).lower():
                return False
            raise
        return True

    # -- the ledger and whole-session writes ------------------------------------------------------
    async def claim_import(self, claim: SessionImport) -> SessionImport:
        self._conn.execute(
            "INSERT INTO session_imports (tenant_id, key, record) VALUES (?, ?, ?)"
            " ON CONFLICT (tenant_id, key) DO NOTHING",
            (claim.tenantId, claim.key, claim.model_dump_json()),
        )
        row = self._conn.execute(
            "SELECT record FROM session_imports WHERE tenant_id = ? AND key = ?", (claim.tenantId, claim.key)
        ).fetchone()
        return SessionImport.model_validate_json(row[0])

    async def replace_import(self, stored: SessionImport, claim: SessionImport) -> bool:
        cursor = self._conn.execute(
            "UPDATE session_imports SET record = ? WHERE tenant_id = ? AND key = ? AND record = ?",
            (claim.model_dump_json(), stored.tenantId, stored.key, stored.model_dump_json()),
        )
        return cursor.rowcount == 1

    async def write_import(
        self,
        claim: SessionImport,
        image: ImageRecord,
        session: SessionRecord,
        messages: Sequence[Message],
        summary: SessionSummary | None,
    ) -> SessionImport:
        done = claim.model_copy(update={"status": "done"})
        conn = self._conn
        with transaction(conn):
            if not self._holds(claim):
                raise Conflict("this import was taken over by another request")
            conn.execute(
                "INSERT INTO sessions (session_id, tenant_id, record) VALUES (?, ?, ?)",
                (session.sessionId, session.tenantId, session.model_dump_json()),
            )
            conn.executemany(
                "INSERT INTO messages (session_id, seq, idempotency_key, message) VALUES (?, ?, NULL, ?)",
                ((session.sessionId, seq, _message_json(m)) for seq, m in enumerate(messages, 1)),
            )
            if summary is not None:
                conn.execute(
                    "INSERT INTO summaries (session_id, up_to_seq, record) VALUES (?, ?, ?)",
                    (summary.sessionId, summary.upToSeq, summary.model_dump_json()),
                )
            conn.execute(
                "INSERT INTO images (image_id, tenant_id, container_id, session_id, created_at, record)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                _image_row(image),
            )
            conn.execute(
                "UPDATE session_imports SET record = ? WHERE tenant_id = ? AND key = ?",
                (done.model_dump_json(), claim.tenantId, claim.key),
            )
        return done

    def _holds(self, claim: SessionImport) -> bool:
        row = self._conn.execute(
            "SELECT record FROM session_imports WHERE tenant_id = ? AND key = ?", (claim.tenantId, claim.key)
        ).fetchone()
        return row is not None and row[0] == claim.model_dump_json()

    async def discard_import(self, claim: SessionImport) -> None:
        conn = self._conn
        with transaction(conn):
            conn.execute(
                "DELETE FROM images WHERE image_id = ? AND tenant_id = ?", (claim.imageId, claim.tenantId)
            )
            conn.execute(
                "DELETE FROM sessions WHERE session_id = ? AND tenant_id = ?",
                (claim.sessionId, claim.tenantId),
            )
            for table in ("messages", "summaries", "cancels"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (claim.sessionId,))
            conn.execute(
                "DELETE FROM session_imports WHERE tenant_id = ? AND key = ? AND record = ?",
                (claim.tenantId, claim.key, claim.model_dump_json()),
            )

    # -- search ---------------------------------------------------------------------------------------
    async def search_messages(
        self,
        tenant_id: str,
        terms: Sequence[SearchTerm],
        *,
        container_id: str | None,
        limit: int,
        after: SearchPosition | None,
    ) -> SearchPage:
        if not self.fts:
            images = await self._store.list_images(tenant_id, container_id)
            return await scan(images, self._pages, terms, limit=limit, after=after)
        with transaction(self._conn):
            self._sweep()
            self._catch_up(tenant_id, container_id)
        match = " AND ".join(_phrase(t) for t in terms)
        # The conversations in result order; each one's hits are one rowid range of the index,
        # read newest first and only as far as the page needs (a frequent word stops early).
        sql = (
            "SELECT s.sid, i.record FROM images i JOIN search_sessions s ON s.session_id = i.session_id"
            " WHERE i.tenant_id = ?"
        )
        params: list[Any] = [tenant_id]
        if container_id is not None:
            sql += " AND i.container_id = ?"
            params.append(container_id)
        if after is not None:
            sql += " AND (i.created_at, i.image_id) <= (?, ?)"
            params += [after.created_at, after.image_id]
        sql += " ORDER BY i.created_at DESC, i.image_id DESC"
        self._store.queries += 1
        hits: list[MessageHit] = []
        for sid, record in self._conn.execute(sql, params).fetchall():
            image = ImageRecord.model_validate_json(record)
            top = _SEQ_MASK
            if after is not None and (image.createdAt, image.imageId) == (after.created_at, after.image_id):
                top = after.seq - 1
            self._store.queries += 1
            rows = self._conn.execute(
                "SELECT f.rowid & ?, m.message FROM message_fts f"
                " JOIN messages m ON m.session_id = ? AND m.seq = (f.rowid & ?)"
                " WHERE message_fts MATCH ? AND f.rowid BETWEEN ? AND ? ORDER BY f.rowid DESC LIMIT ?",
                (
                    _SEQ_MASK,
                    image.sessionId,
                    _SEQ_MASK,
                    match,
                    sid << 32,
                    (sid << 32) | top,
                    limit + 1 - len(hits),
                ),
            ).fetchall()
            hits += [MessageHit(image, seq, message_from_wire(body)) for seq, body in rows]
            if len(hits) > limit:
                last = hits[limit - 1]
                return SearchPage(
                    hits[:limit], SearchPosition(last.image.createdAt, last.image.imageId, last.seq)
                )
        return SearchPage(hits, None)

    def _sweep(self) -> None:
        """Delete the index rows of sessions whose image was deleted (marked by the trigger)."""
        for (sid,) in self._conn.execute("SELECT sid FROM search_sessions WHERE deleted = 1").fetchall():
            self._conn.execute(
                "DELETE FROM message_fts WHERE rowid BETWEEN ? AND ?", (sid << 32, (sid << 32) | _SEQ_MASK)
            )
            self._conn.execute("DELETE FROM search_sessions WHERE sid = ?", (sid,))

    def _catch_up(self, tenant_id: str, container_id: str | None) -> None:
        """Index the messages written since the last search of these sessions."""
        sql = (
            "SELECT i.session_id, s.sid, COALESCE(s.indexed_seq, 0),"
            " (SELECT MAX(seq) FROM messages m WHERE m.session_id = i.session_id)"
            " FROM images i LEFT JOIN search_sessions s ON s.session_id = i.session_id WHERE i.tenant_id = ?"
        )
        params: tuple[Any, ...] = (tenant_id,)
        if container_id is not None:
            sql += " AND i.container_id = ?"
            params += (container_id,)
        for session_id, sid, indexed, last in self._conn.execute(sql, params).fetchall():
            if last is None or last <= indexed:
                continue
            if sid is None:
                sid = self._conn.execute(
                    "INSERT INTO search_sessions (session_id, tenant_id) VALUES (?, ?) RETURNING sid",
                    (session_id, tenant_id),
                ).fetchone()[0]
            seq = indexed
            while seq < last:
                batch = self._conn.execute(
                    "SELECT seq, message FROM messages WHERE session_id = ? AND seq > ? AND seq <= ?"
                    " ORDER BY seq LIMIT ?",
                    (session_id, seq, last, _PAGE),
                ).fetchall()
                if not batch:
                    break
                rows = []
                for n, body in batch:
                    text = searchable_text(json.loads(body))
                    if text:
                        rows.append(((sid << 32) | n, " ".join(tokens(text))))
                self._conn.executemany("INSERT INTO message_fts (rowid, text) VALUES (?, ?)", rows)
                seq = batch[-1][0]
            self._conn.execute("UPDATE search_sessions SET indexed_seq = ? WHERE sid = ?", (last, sid))

    async def _pages(self, image: ImageRecord, below: int | None) -> AsyncGenerator[list[tuple[int, str]]]:
        """The fallback's reads: the session's messages, newest first, a page at a time."""
        upper = below if below is not None else 1 << 62
        while True:
            self._store.queries += 1
            page = self._conn.execute(
                "SELECT seq, message FROM messages WHERE session_id = ? AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (image.sessionId, upper, _PAGE),
            ).fetchall()
            if not page:
                return
            yield page
            upper = page[-1][0]


__all__ = ["SqliteSessionArchive"]
