"""The ``Store`` port on SQLite: the local host's durable state (``avm serve``) and the test double.

One connection, used directly on the event loop: every statement here is an indexed point read or
a small write (sub-millisecond), so a thread hop would cost more than it saves. Because nothing
awaits between the statements of a method, methods never interleave on this connection; explicit
``BEGIN IMMEDIATE`` transactions still make multi-statement writes atomic on disk and safe against
another connection (the turn queue) writing the same file.

``share_connections(path)`` (the local host, for its ``agentvm.db``): from then on every adapter of
this process that opens that file (store, counters, keys, budgets, running turns, waits, config,
...) gets the same connection. A transaction that begins after another connection wrote the file
starts with an empty page cache (SQLite cannot tell which of its cached pages changed), so with a
connection per adapter, a turn's writes through five adapters each began by reading their pages
again. Measured (``local_load`` at 300 streams, the statements timed in the server, six
alternating pairs): the SQLite statements' CPU per turn 0.85-1.08 ms with a connection per
adapter, 0.71-0.96 ms shared (median -11.5 %). The rule
above (no ``await`` between a method's statements) is what makes sharing safe: the adapters'
methods still never interleave, and ``close()`` of a shared connection does nothing (it lives as
long as the process).

Records are stored as their JSON, with the columns needed for keys, scoping and ordering copied
out next to it.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.sqlite.checkpoint import in_background
from agentvm.errors import StorageUnavailable
from agentvm.messages import message_from_wire, message_to_wire
from agentvm.ports import AppendResult, SeqMessage
from agentvm.records import (
    ContainerRecord,
    ImageRecord,
    SessionRecord,
    SessionSummary,
    TurnRecord,
    UsageRecord,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agentvm.messages import Message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS containers (
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    record       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, container_id)
);
CREATE TABLE IF NOT EXISTS images (
    image_id     TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    record       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS images_by_tenant ON images (tenant_id, created_at, image_id);
CREATE INDEX IF NOT EXISTS images_by_container ON images (tenant_id, container_id, created_at, image_id);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    record     TEXT NOT NULL
);
-- NULL keys never collide in a UNIQUE constraint, so unkeyed appends are unconstrained.
CREATE TABLE IF NOT EXISTS messages (
    session_id      TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    idempotency_key TEXT,
    message         TEXT NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, idempotency_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turns (
    turn_id TEXT PRIMARY KEY,
    record  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
    turn_id      TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    record       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS usage_by_tenant ON usage (tenant_id, created_at);
CREATE INDEX IF NOT EXISTS usage_by_container ON usage (tenant_id, container_id, created_at);
CREATE TABLE IF NOT EXISTS cancels (
    session_id TEXT PRIMARY KEY,
    turn_id    TEXT NOT NULL
);
-- One interrupt mark per cancelled turn (several turns of a session can be cancelled at once);
-- ``cancels`` held one per session before and is still read for marks written then.
CREATE TABLE IF NOT EXISTS cancel_marks (
    session_id TEXT NOT NULL,
    turn_id    TEXT NOT NULL,
    PRIMARY KEY (session_id, turn_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summaries (
    session_id TEXT PRIMARY KEY,
    up_to_seq  INTEGER NOT NULL,
    record     TEXT NOT NULL
);
"""


_UNWRITABLE = ("database or disk is full", "disk i/o error", "attempt to write a readonly database")


def _translated(exc: sqlite3.OperationalError) -> Exception:
    """A write that failed for lack of space (or a dying disk) as the error the core knows."""
    if any(reason in str(exc).lower() for reason in _UNWRITABLE):
        error = StorageUnavailable()
        error.__cause__ = exc
        return error
    return exc


class _Connection(sqlite3.Connection):
    """Raises ``StorageUnavailable`` for a full or failing disk, wherever a statement runs, so the
    gateway answers ``storage_unavailable`` and the turn fails cleanly instead of crashing."""

    shared = False  # one of share_connections' connections: its adapters' close() leaves it open

    def close(self) -> None:
        if not self.shared:
            super().close()

    def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            raise _translated(exc) from exc

    def executescript(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().executescript(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            raise _translated(exc) from exc


_shared_paths: set[Path] = set()
_shared: dict[Path, sqlite3.Connection] = {}


def share_connections(*paths: str | Path) -> None:
    """From now on, ``connect`` returns one connection per file of ``paths`` for this whole process
    (see the module's docstring). Files not named here get a new connection per ``connect``."""
    _shared_paths.update(Path(p).resolve() for p in paths if str(p) != ":memory:")


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating parent directories) a WAL-mode connection in autocommit mode, or return the
    process's one connection to a file registered with ``share_connections``.

    Shared with the local turn queue, which may live in the same file. A file the local host
    registered with ``sqlite.checkpoint`` is checkpointed by its thread, not by these commits.
    """
    if str(path) == ":memory:" or not _shared_paths:
        return _open(path)
    key = Path(path).resolve()
    if key not in _shared_paths:
        return _open(path)
    conn = _shared.get(key)
    if conn is None:
        conn = _shared[key] = _open(path)
        conn.shared = True  # type: ignore[attr-defined]
    return conn


def _open(path: str | Path) -> sqlite3.Connection:
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: the sqlite3 module must not open transactions behind our back; the
    # methods that need one say BEGIN themselves.
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, factory=_Connection)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL is durable across application crashes in WAL mode (only an OS crash can lose the
    # last commits), and avoids an fsync per commit.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=5000")
    if in_background(path):  # a thread copies the log back, not a commit on the event loop
        conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE``: take the write lock up front, so read-then-write sequences are atomic."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # some errors make SQLite roll back by itself
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def add_column(conn: sqlite3.Connection, table: str, column: str, declaration: str) -> None:
    """Add ``column`` to ``table`` unless it has it (a file made before the column existed)."""
    if not any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})")):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


def _image_row(image: ImageRecord) -> tuple[Any, ...]:
    return (
        image.imageId,
        image.tenantId,
        image.containerId,
        image.sessionId,
        image.createdAt,
        image.model_dump_json(),
    )


def _message_json(message: Message) -> str:
    return json.dumps(message_to_wire(message), separators=(",", ":"), ensure_ascii=False)


class SqliteStore:
    """``agentvm.ports.Store`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)
        # SELECT statements executed since construction: lets tests bound the reads of a turn.
        self.queries = 0

    def close(self) -> None:
        self._conn.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for adapters that write its tables in their own transactions
        (``sqlite.sessions``: a whole imported session at once)."""
        return self._conn

    # reads go through these two so that ``queries`` counts every one of them

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        self.queries += 1
        row: tuple[Any, ...] | None = self._conn.execute(sql, params).fetchone()
        return row

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        self.queries += 1
        return self._conn.execute(sql, params).fetchall()

    def read_all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """A read of these tables by another adapter of this file (``sqlite.usage``), counted too."""
        return self._all(sql, params)

    # containers

    async def put_container(self, record: ContainerRecord) -> bool:
        cursor = self._conn.execute(
            "INSERT INTO containers (tenant_id, container_id, record) VALUES (?, ?, ?)"
            " ON CONFLICT (tenant_id, container_id) DO NOTHING",
            (record.tenantId, record.containerId, record.model_dump_json()),
        )
        return cursor.rowcount == 1

    async def get_container(self, tenant_id: str, container_id: str) -> ContainerRecord | None:
        row = self._one(
            "SELECT record FROM containers WHERE tenant_id = ? AND container_id = ?",
            (tenant_id, container_id),
        )
        return None if row is None else ContainerRecord.model_validate_json(row[0])

    async def list_containers(self, tenant_id: str) -> list[ContainerRecord]:
        rows = self._all(
            "SELECT record FROM containers WHERE tenant_id = ? ORDER BY container_id", (tenant_id,)
        )
        return [ContainerRecord.model_validate_json(r[0]) for r in rows]

    # images and sessions

    async def create_image(self, image: ImageRecord, session: SessionRecord) -> None:
        with transaction(self._conn):
            self._conn.execute(
                "INSERT INTO images (image_id, tenant_id, container_id, session_id, created_at, record)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                _image_row(image),
            )
            self._conn.execute(
                "INSERT INTO sessions (session_id, tenant_id, record) VALUES (?, ?, ?)",
                (session.sessionId, session.tenantId, session.model_dump_json()),
            )

    async def get_image(self, tenant_id: str, image_id: str) -> ImageRecord | None:
        row = self._one(
            "SELECT record FROM images WHERE image_id = ? AND tenant_id = ?", (image_id, tenant_id)
        )
        return None if row is None else ImageRecord.model_validate_json(row[0])

    async def list_images(self, tenant_id: str, container_id: str | None = None) -> list[ImageRecord]:
        if container_id is None:
            rows = self._all(
                "SELECT record FROM images WHERE tenant_id = ? ORDER BY created_at DESC, image_id DESC",
                (tenant_id,),
            )
        else:
            rows = self._all(
                "SELECT record FROM images WHERE tenant_id = ? AND container_id = ?"
                " ORDER BY created_at DESC, image_id DESC",
                (tenant_id, container_id),
            )
        return [ImageRecord.model_validate_json(r[0]) for r in rows]

    async def put_image(self, image: ImageRecord) -> None:
        # An upsert, but the WHERE keeps another tenant from overwriting an image it does not own.
        self._conn.execute(
            "INSERT INTO images (image_id, tenant_id, container_id, session_id, created_at, record)"
            " VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (image_id) DO UPDATE SET container_id = excluded.container_id,"
            " session_id = excluded.session_id, created_at = excluded.created_at, record = excluded.record"
            " WHERE images.tenant_id = excluded.tenant_id",
            _image_row(image),
        )

    async def delete_image(self, tenant_id: str, image_id: str) -> None:
        with transaction(self._conn):
            row = self._one(
                "SELECT session_id FROM images WHERE image_id = ? AND tenant_id = ?",
                (image_id, tenant_id),
            )
            if row is None:
                return
            session_id = row[0]
            self._conn.execute("DELETE FROM images WHERE image_id = ?", (image_id,))
            self._conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            self._conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            self._conn.execute("DELETE FROM cancels WHERE session_id = ?", (session_id,))
            self._conn.execute("DELETE FROM cancel_marks WHERE session_id = ?", (session_id,))
            self._conn.execute("DELETE FROM summaries WHERE session_id = ?", (session_id,))

    async def get_session(self, tenant_id: str, session_id: str) -> SessionRecord | None:
        row = self._one(
            "SELECT record FROM sessions WHERE session_id = ? AND tenant_id = ?", (session_id, tenant_id)
        )
        return None if row is None else SessionRecord.model_validate_json(row[0])

    # messages

    async def append_message(
        self, session_id: str, message: Message, *, idempotency_key: str | None = None
    ) -> AppendResult:
        with transaction(self._conn):
            # The next seq is computed inside the INSERT; a repeated key hits the UNIQUE
            # constraint, inserts nothing and so returns no row.
            inserted = self._conn.execute(
                "INSERT INTO messages (session_id, seq, idempotency_key, message)"
                " SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ? FROM messages WHERE session_id = ?"
                " ON CONFLICT (session_id, idempotency_key) DO NOTHING RETURNING seq",
                (session_id, idempotency_key, _message_json(message), session_id),
            ).fetchone()
            if inserted is not None:
                return AppendResult(message=message, seq=inserted[0], created=True)
            existing = self._one(
                "SELECT seq, message FROM messages WHERE session_id = ? AND idempotency_key = ?",
                (session_id, idempotency_key),
            )
        assert existing is not None  # the conflict that skipped the insert is this very row
        return AppendResult(message=message_from_wire(existing[1]), seq=existing[0], created=False)

    async def list_messages(self, session_id: str) -> list[Message]:
        rows = self._all("SELECT message FROM messages WHERE session_id = ? ORDER BY seq", (session_id,))
        return [message_from_wire(r[0]) for r in rows]

    async def recent_messages(self, session_id: str, limit: int) -> list[Message]:
        if limit <= 0:  # SQLite reads a negative LIMIT as "no limit"
            return []
        rows = self._all(
            "SELECT message FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
            (session_id, limit),
        )
        return [message_from_wire(r[0]) for r in reversed(rows)]

    async def recent_messages_after(
        self, session_id: str, after_seq: int, limit: int, *, fresh: bool = True
    ) -> list[SeqMessage]:
        if limit <= 0:
            return []
        rows = self._all(
            "SELECT seq, message FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq DESC LIMIT ?",
            (session_id, after_seq, limit),
        )
        return [SeqMessage(seq, message_from_wire(body)) for seq, body in reversed(rows)]

    # compaction summaries

    async def put_summary(self, summary: SessionSummary) -> bool:
        # Only ever forward: a slower compaction finishing late never replaces a newer summary.
        cursor = self._conn.execute(
            "INSERT INTO summaries (session_id, up_to_seq, record) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET up_to_seq = excluded.up_to_seq,"
            " record = excluded.record WHERE excluded.up_to_seq > summaries.up_to_seq",
            (summary.sessionId, summary.upToSeq, summary.model_dump_json()),
        )
        return cursor.rowcount == 1

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        row = self._one("SELECT record FROM summaries WHERE session_id = ?", (session_id,))
        return None if row is None else SessionSummary.model_validate_json(row[0])

    # turns and usage

    async def put_turn(self, turn: TurnRecord) -> None:
        self._conn.execute(
            "INSERT INTO turns (turn_id, record) VALUES (?, ?)"
            " ON CONFLICT (turn_id) DO UPDATE SET record = excluded.record",
            (turn.turnId, turn.model_dump_json()),
        )

    async def get_turn(self, turn_id: str) -> TurnRecord | None:
        row = self._one("SELECT record FROM turns WHERE turn_id = ?", (turn_id,))
        return None if row is None else TurnRecord.model_validate_json(row[0])

    async def put_usage(self, usage: UsageRecord) -> bool:
        # First write wins: a retried turn must not bill twice or rewrite what was billed.
        cursor = self._conn.execute(
            "INSERT INTO usage (turn_id, tenant_id, container_id, created_at, record)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (turn_id) DO NOTHING",
            (usage.turnId, usage.tenantId, usage.containerId, usage.createdAt, usage.model_dump_json()),
        )
        return cursor.rowcount == 1

    async def list_usage(
        self, tenant_id: str, container_id: str | None = None, *, since_ms: int = 0
    ) -> list[UsageRecord]:
        if container_id is None:
            rows = self._all(
                "SELECT record FROM usage WHERE tenant_id = ? AND created_at >= ?"
                " ORDER BY created_at, turn_id",
                (tenant_id, since_ms),
            )
        else:
            rows = self._all(
                "SELECT record FROM usage WHERE tenant_id = ? AND container_id = ? AND created_at >= ?"
                " ORDER BY created_at, turn_id",
                (tenant_id, container_id, since_ms),
            )
        return [UsageRecord.model_validate_json(r[0]) for r in rows]

    # interrupt marks: one per cancelled turn

    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        self._conn.execute(
            "INSERT INTO cancel_marks (session_id, turn_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (session_id, turn_id),
        )

    async def cancel_requests(self, poller: str) -> set[str]:
        # The local host never polls (in-process signals); this serves a store shared by processes
        # that poll, and the tests. One transaction: whatever is running under ``poller`` and marked.
        rows = self._all(
            "SELECT c.turn_id FROM cancel_marks c JOIN turns t ON t.turn_id = c.turn_id WHERE"
            " json_extract(t.record, '$.poller') = ? AND json_extract(t.record, '$.status') = 'running'",
            (poller,),
        )
        return {r[0] for r in rows}

    async def is_cancel_requested(self, session_id: str, turn_id: str, *, fresh: bool = True) -> bool:
        row = self._one(
            "SELECT 1 FROM cancel_marks WHERE session_id = ? AND turn_id = ?"
            " UNION ALL SELECT 1 FROM cancels WHERE session_id = ? AND turn_id = ? LIMIT 1",
            (session_id, turn_id, session_id, turn_id),
        )
        return row is not None

    # a deleted tenant's conversations (with the workspaces: adapters/local/sqlite/tenant_purge.py)

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete the tenant's containers, images, sessions, messages, summaries, cancel marks and
        turns, in one transaction; its usage records stay (billing). Returns how many images."""
        sessions = "SELECT session_id FROM sessions WHERE tenant_id = ?"
        with transaction(self._conn):
            images = self._conn.execute("DELETE FROM images WHERE tenant_id = ?", (tenant_id,)).rowcount
            for table in ("messages", "cancels", "cancel_marks", "summaries"):
                self._conn.execute(f"DELETE FROM {table} WHERE session_id IN ({sessions})", (tenant_id,))
            self._conn.execute(
                f"DELETE FROM turns WHERE json_extract(record, '$.sessionId') IN ({sessions})", (tenant_id,)
            )
            self._conn.execute("DELETE FROM sessions WHERE tenant_id = ?", (tenant_id,))
            self._conn.execute("DELETE FROM containers WHERE tenant_id = ?", (tenant_id,))
        return images


__all__ = ["SqliteStore", "add_column", "connect", "share_connections", "transaction"]
