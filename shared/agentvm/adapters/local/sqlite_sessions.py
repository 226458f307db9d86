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
range. Each row's ``scope`` holds a token for its tenant and one for its container, so the FTS
query itself narrows to the caller's tenant. Deleting an image marks its session (a trigger on
``images``, plain SQL, so deleting never needs FTS5); the next search, or the next start, deletes
its rows. The first search of a container of 10,000 messages indexes them all (BENCHMARKS.md,
"Session search"); later ones only what was written since.

**Without FTS5** (a Python whose SQLite lacks it: logged once at start) search reads the messages
and matches them in Python (``sessions.search.scan``), as the DynamoDB adapter does: the same
results, slower on long histories.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.sqlite_store import _image_row, _message_json, transaction
from agentvm.errors import Conflict
from agentvm.messages import message_from_wire
from agentvm.ports import MessageHit, SearchPage, SearchPosition
from agentvm.records import ImageRecord, SessionImport
from agentvm.sessions.search import scan, searchable_text, tokens

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Sequence

    from agentvm.adapters.local.sqlite_store import SqliteStore
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
_FTS = "CREATE VIRTUAL TABLE IF NOT EXISTS message_fts USING fts5(scope, text, tokenize='ascii')"
_SEQ_MASK = 0xFFFFFFFF
_PAGE = 500  # messages per read while indexing or scanning


def _scope_token(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def tenant_token(tenant_id: str) -> str:
    return "t" + _scope_token(tenant_id)


def container_token(tenant_id: str, container_id: str) -> str:
    return "c" + _scope_token(tenant_id, container_id)


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
        scope = container_token(tenant_id, container_id) if container_id else tenant_token(tenant_id)
        match = " AND ".join([f'scope : "{scope}"', *(_phrase(t) for t in terms)])
        sql = (
            "SELECT i.record, f.rowid & ?, m.message FROM message_fts f"
            " JOIN search_sessions s ON s.sid = (f.rowid >> 32)"
            " JOIN images i ON i.session_id = s.session_id AND i.tenant_id = ?"
            " JOIN messages m ON m.session_id = s.session_id AND m.seq = (f.rowid & ?)"
            " WHERE message_fts MATCH ?"
        )
        params: list[Any] = [_SEQ_MASK, tenant_id, _SEQ_MASK, match]
        if container_id is not None:
            sql += " AND i.container_id = ?"
            params.append(container_id)
        if after is not None:
            sql += " AND (i.created_at, i.image_id, f.rowid & ?) < (?, ?, ?)"
            params += [_SEQ_MASK, after.created_at, after.image_id, after.seq]
        sql += " ORDER BY i.created_at DESC, i.image_id DESC, f.rowid & ? DESC LIMIT ?"
        params += [_SEQ_MASK, limit + 1]
        self._store.queries += 1
        rows = self._conn.execute(sql, params).fetchall()
        hits = [
            MessageHit(ImageRecord.model_validate_json(record), seq, message_from_wire(body))
            for record, seq, body in rows[:limit]
        ]
        more = len(rows) > limit
        last = hits[-1] if hits else None
        next_ = SearchPosition(last.image.createdAt, last.image.imageId, last.seq) if more and last else None
        return SearchPage(hits, next_)

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
            "SELECT i.session_id, i.container_id, s.sid, COALESCE(s.indexed_seq, 0),"
            " (SELECT MAX(seq) FROM messages m WHERE m.session_id = i.session_id)"
            " FROM images i LEFT JOIN search_sessions s ON s.session_id = i.session_id WHERE i.tenant_id = ?"
        )
        params: tuple[Any, ...] = (tenant_id,)
        if container_id is not None:
            sql += " AND i.container_id = ?"
            params += (container_id,)
        tenant = tenant_token(tenant_id)
        for session_id, container, sid, indexed, last in self._conn.execute(sql, params).fetchall():
            if last is None or last <= indexed:
                continue
            if sid is None:
                sid = self._conn.execute(
                    "INSERT INTO search_sessions (session_id, tenant_id) VALUES (?, ?) RETURNING sid",
                    (session_id, tenant_id),
                ).fetchone()[0]
            scope = f"{tenant} {container_token(tenant_id, container)}"
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
                        rows.append(((sid << 32) | n, scope, " ".join(tokens(text))))
                self._conn.executemany("INSERT INTO message_fts (rowid, scope, text) VALUES (?, ?, ?)", rows)
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


__all__ = ["SqliteSessionArchive", "container_token", "tenant_token"]
