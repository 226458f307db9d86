"""The ``SessionArchive`` port on PostgreSQL: imports and forks in one transaction, and message
search with PostgreSQL's full-text index (``tsvector`` + GIN), built lazily at search time.

**Imports and forks.** The ledger is the table ``session_imports``; ``write_import`` writes the
session, its messages, its summary and the image (the store's tables) and marks the claim done in
one transaction, after checking, with the ledger row locked, that the claim is still this
writer's: all or nothing, whichever node writes.

**Search.** Nothing is done when a message is written. A search first brings the index up to date
for the sessions it covers (the tenant's, or one container's): ``search_sessions`` holds per session
the last seq indexed; the messages after it are tokenized in Python
(``agentvm.sessions.search.tokens``, the one tokenizer of every store) and stored in
``message_search`` as a ``tsvector`` of those tokens taken as they are (``array_to_tsvector``: no
dictionary, no stemming), under a GIN index. Each lexeme starts with its tenant's namespace (8 hex
digits of a hash of the tenant id), so a word's posting list in the index is the tenant's own: a
search costs what the tenant's messages hold, not what every tenant's do. Two nodes catching up
the same session at once insert the same rows; the second's are skipped (``ON CONFLICT DO NOTHING``).

A query becomes a ``tsquery`` of every token of every term (``&``, a prefix term's last token with
``:*``), so the index finds the messages holding them all; each candidate is then checked with
``sessions.search.matches`` (phrases: tokens in a row), the same matcher the scanning stores use.
Positions are not indexed because a ``tsvector`` caps them at 16,383: the phrase operator would
miss phrases deep in a long message, the matcher does not. Candidates come in result order
(conversation newest first, then message newest first) from one statement (one GIN scan, then a
sort of the tenant's matches), a batch at a time: a page costs one query unless many candidates
hold the words but not the phrase. A word in most of a tenant's messages costs a sort of all of
them (BENCHMARKS.md, "Session search"). A deleted image takes its session's index rows with it (a
trigger on ``images``, migration 0002).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from agentvm.adapters.postgres.store import _image_row, _message_json
from agentvm.errors import Conflict
from agentvm.messages import message_from_wire
from agentvm.ports import MessageHit, SearchPage, SearchPosition
from agentvm.records import ImageRecord, SessionImport
from agentvm.sessions.search import matches, searchable_text, tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.adapters.postgres.database import Database
    from agentvm.messages import Message
    from agentvm.ports import SearchTerm
    from agentvm.records import SessionRecord, SessionSummary

_PAGE = 500  # messages per read while indexing
_MAX_BATCH = 2000  # candidates per read while searching: a page's worth first, then more
# A lexeme may hold at most 2,047 bytes: longer tokens are indexed and looked up by their first 500
# characters (the matcher then checks the whole token).
_TOKEN_CHARS = 500


def namespace(tenant_id: str) -> str:
    """The tenant's lexeme prefix: 8 hex digits of its id's hash and a colon."""
    return hashlib.sha256(tenant_id.encode()).hexdigest()[:8] + ":"


def lexemes(tenant_id: str, text: str) -> list[str]:
    """The distinct tokens of ``text`` as the tenant's lexemes."""
    prefix = namespace(tenant_id)
    return sorted({prefix + token[:_TOKEN_CHARS] for token in tokens(text)})


def _quoted(lexeme: str) -> str:
    # Tokens are runs of letters and digits; quoting still escapes what tsquery's syntax reads.
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery(tenant_id: str, terms: Sequence[SearchTerm]) -> str:
    """Every token of every term as the tenant's lexemes, ANDed; a prefix term's last token
    matches by prefix."""
    prefix = namespace(tenant_id)
    parts = []
    for term in terms:
        for i, token in enumerate(term.tokens):
            by_prefix = (term.prefix and i == len(term.tokens) - 1) or len(token) > _TOKEN_CHARS
            parts.append(_quoted(prefix + token[:_TOKEN_CHARS]) + (":*" if by_prefix else ""))
    return " & ".join(parts)


class PostgresSessionArchive:
    """``agentvm.ports.SessionArchive`` on the node's PostgreSQL pool (``PostgresStore``'s tables)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    # -- the ledger and whole-session writes ------------------------------------------------------
    async def claim_import(self, claim: SessionImport) -> SessionImport:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO session_imports (tenant_id, key, record) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id, key) DO NOTHING",
                (claim.tenantId, claim.key, claim.model_dump_json()),
            )
            cursor = await conn.execute(
                "SELECT record FROM session_imports WHERE tenant_id = %s AND key = %s",
                (claim.tenantId, claim.key),
            )
            row = await cursor.fetchone()
        assert row is not None  # inserted, or there before: ledger rows are deleted only by discard
        return SessionImport.model_validate_json(row[0])

    async def replace_import(self, stored: SessionImport, claim: SessionImport) -> bool:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE session_imports SET record = %s WHERE tenant_id = %s AND key = %s AND record = %s",
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
        async with self._db.transaction() as conn:
            # FOR UPDATE: a concurrent replace_import waits for this transaction, then finds the
            # record changed (done) and replaces nothing.
            cursor = await conn.execute(
                "SELECT record FROM session_imports WHERE tenant_id = %s AND key = %s FOR UPDATE",
                (claim.tenantId, claim.key),
            )
            row = await cursor.fetchone()
            if row is None or row[0] != claim.model_dump_json():
                raise Conflict("this import was taken over by another request")
            await conn.execute(
                "INSERT INTO sessions (session_id, tenant_id, record) VALUES (%s, %s, %s)",
                (session.sessionId, session.tenantId, session.model_dump_json()),
            )
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO messages (session_id, seq, idempotency_key, message)"
                    " VALUES (%s, %s, NULL, %s)",
                    [(session.sessionId, seq, _message_json(m)) for seq, m in enumerate(messages, 1)],
                )
            if summary is not None:
                await conn.execute(
                    "INSERT INTO summaries (session_id, up_to_seq, record) VALUES (%s, %s, %s)",
                    (summary.sessionId, summary.upToSeq, summary.model_dump_json()),
                )
            await conn.execute(
                "INSERT INTO images (image_id, tenant_id, container_id, session_id, created_at, record)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                _image_row(image),
            )
            await conn.execute(
                "UPDATE session_imports SET record = %s WHERE tenant_id = %s AND key = %s",
                (done.model_dump_json(), claim.tenantId, claim.key),
            )
        return done

    async def discard_import(self, claim: SessionImport) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                "DELETE FROM images WHERE image_id = %s AND tenant_id = %s", (claim.imageId, claim.tenantId)
            )
            await conn.execute(
                "DELETE FROM sessions WHERE session_id = %s AND tenant_id = %s",
                (claim.sessionId, claim.tenantId),
            )
            for table in ("messages", "summaries", "cancel_marks", "message_search", "search_sessions"):
                await conn.execute(f"DELETE FROM {table} WHERE session_id = %s", (claim.sessionId,))
            await conn.execute(
                "DELETE FROM session_imports WHERE tenant_id = %s AND key = %s AND record = %s",
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
        await self._catch_up(tenant_id, container_id)
        query = tsquery(tenant_id, terms)
        batch = limit + 1
        hits: list[MessageHit] = []
        position = after
        while True:
            rows = await self._candidates(tenant_id, container_id, query, position, batch)
            for record, seq, body in rows:
                image = ImageRecord.model_validate_json(record)
                position = SearchPosition(image.createdAt, image.imageId, seq)
                if not matches(terms, searchable_text(json.loads(body))):
                    continue
                hits.append(MessageHit(image, seq, message_from_wire(body)))
                if len(hits) > limit:
                    last = hits[limit - 1]
                    return SearchPage(
                        hits[:limit], SearchPosition(last.image.createdAt, last.image.imageId, last.seq)
                    )
            if len(rows) < batch:
                return SearchPage(hits, None)
            batch = min(batch * 4, _MAX_BATCH)  # the phrase check rejected some: read further

    async def _candidates(
        self,
        tenant_id: str,
        container_id: str | None,
        query: str,
        after: SearchPosition | None,
        batch: int,
    ) -> list[tuple[Any, ...]]:
        """The messages holding every token, in result order, after ``after``."""
        sql = (
            "SELECT i.record, s.seq, m.message FROM images i"
            " JOIN message_search s ON s.session_id = i.session_id"
            " JOIN messages m ON m.session_id = s.session_id AND m.seq = s.seq"
            " WHERE i.tenant_id = %s AND s.doc @@ %s::tsquery"
        )
        params: list[Any] = [tenant_id, query]
        if container_id is not None:
            sql += " AND i.container_id = %s"
            params.append(container_id)
        if after is not None:
            sql += " AND (i.created_at, i.image_id, s.seq) < (%s, %s, %s)"
            params += [after.created_at, after.image_id, after.seq]
        sql += " ORDER BY i.created_at DESC, i.image_id DESC, s.seq DESC LIMIT %s"
        params.append(batch)
        async with self._db.connection() as conn:
            # Never prepared: a prepared statement soon runs a generic plan, blind to how rare the
            # words are (measured: 168 ms instead of 9 ms for a rare phrase at 10,000 messages).
            cursor = await conn.execute(sql.encode(), params, prepare=False)
            return await cursor.fetchall()

    async def _catch_up(self, tenant_id: str, container_id: str | None) -> None:
        """Index the messages written since the last search of these sessions."""
        sql = (
            "SELECT i.session_id, COALESCE(s.indexed_seq, 0),"
            " (SELECT MAX(seq) FROM messages m WHERE m.session_id = i.session_id)"
            " FROM images i LEFT JOIN search_sessions s ON s.session_id = i.session_id"
            " WHERE i.tenant_id = %s"
        )
        params: tuple[Any, ...] = (tenant_id,)
        if container_id is not None:
            sql += " AND i.container_id = %s"
            params += (container_id,)
        async with self._db.connection() as conn:
            behind = await (await conn.execute(sql.encode(), params)).fetchall()
        for session_id, indexed, last in behind:
            if last is not None and last > indexed:
                await self._index(tenant_id, session_id, indexed, last)

    async def _index(self, tenant_id: str, session_id: str, indexed: int, last: int) -> None:
        seq = indexed
        while seq < last:
            async with self._db.transaction() as conn:
                cursor = await conn.execute(
                    "SELECT seq, message FROM messages WHERE session_id = %s AND seq > %s AND seq <= %s"
                    " ORDER BY seq LIMIT %s",
                    (session_id, seq, last, _PAGE),
                )
                page = await cursor.fetchall()
                if not page:
                    return
                rows = []
                for n, body in page:
                    words = lexemes(tenant_id, searchable_text(json.loads(body)))
                    if words:
                        rows.append((session_id, n, words))
                if rows:
                    async with conn.cursor() as cur:
                        await cur.executemany(
                            "INSERT INTO message_search (session_id, seq, doc)"
                            " VALUES (%s, %s, array_to_tsvector(%s::text[])) ON CONFLICT DO NOTHING",
                            rows,
                        )
                seq = page[-1][0]
                await conn.execute(
                    "INSERT INTO search_sessions (session_id, indexed_seq) VALUES (%s, %s)"
                    " ON CONFLICT (session_id) DO UPDATE"
                    " SET indexed_seq = GREATEST(search_sessions.indexed_seq, excluded.indexed_seq)",
                    (session_id, seq),
                )


__all__ = ["PostgresSessionArchive", "lexemes", "tsquery"]
