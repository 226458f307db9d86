"""The ``Store`` port on PostgreSQL: the cluster host's durable state, shared by every node.

The tables are migration ``0001_store.sql``. Each method borrows one connection of the node's pool
(``Database``) for its statements; multi-statement writes run in one transaction.

Message sequence numbers: an append takes a transaction-scoped advisory lock on its session
(``pg_advisory_xact_lock(SEQ_LOCK_CLASS, hashtext(session_id))``: the two-integer key space, apart
from the migrations' one-bigint key), then inserts at ``MAX(seq) + 1``. Appends to one session thus
queue on the lock, whichever node makes them, and never fail on a duplicate seq; appends to
different sessions never wait for each other (a hash collision only makes two sessions queue
together). A repeated idempotency key inserts nothing (the UNIQUE constraint) and returns the first
append's message and seq.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

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
    from agentvm.adapters.postgres.database import Database
    from agentvm.messages import Message

# The first key of the session locks that order appends (b"seq\0" as a signed 32-bit integer).
SEQ_LOCK_CLASS = int.from_bytes(b"seq\0", "big", signed=True)


def _message_json(message: Message) -> str:
    return json.dumps(message_to_wire(message), separators=(",", ":"), ensure_ascii=False)


def _image_row(image: ImageRecord) -> tuple[str, str, str, str, int, str]:
    return (
        image.imageId,
        image.tenantId,
        image.containerId,
        image.sessionId,
        image.createdAt,
        image.model_dump_json(),
    )


class PostgresStore:
    """``agentvm.ports.Store`` on the node's PostgreSQL pool."""

    def __init__(self, database: Database) -> None:
        self._db = database

    # containers

    async def put_container(self, record: ContainerRecord) -> bool:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO containers (tenant_id, container_id, record) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id, container_id) DO NOTHING",
                (record.tenantId, record.containerId, record.model_dump_json()),
            )
            return cursor.rowcount == 1

    async def get_container(self, tenant_id: str, container_id: str) -> ContainerRecord | None:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT record FROM containers WHERE tenant_id = %s AND container_id = %s",
                (tenant_id, container_id),
            )
            row = await cursor.fetchone()
        return None if row is None else ContainerRecord.model_validate_json(row[0])

    async def list_containers(self, tenant_id: str) -> list[ContainerRecord]:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT record FROM containers WHERE tenant_id = %s ORDER BY container_id", (tenant_id,)
            )
            rows = await cursor.fetchall()
        return [ContainerRecord.model_validate_json(r[0]) for r in rows]

    # images and sessions

    async def create_image(self, image: ImageRecord, session: SessionRecord) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO images (image_id, tenant_id, container_id, session_id, created_at, record)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                _image_row(image),
            )
            await conn.execute(
                "INSERT INTO sessions (session_id, tenant_id, record) VALUES (%s, %s, %s)",
                (session.sessionId, session.tenantId, session.model_dump_json()),
            )

    async def get_image(self, tenant_id: str, image_id: str) -> ImageRecord | None:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT record FROM images WHERE image_id = %s AND tenant_id = %s", (image_id, tenant_id)
            )
            row = await cursor.fetchone()
        return None if row is None else ImageRecord.model_validate_json(row[0])

    async def list_images(self, tenant_id: str, container_id: str | None = None) -> list[ImageRecord]:
        async with self._db.connection() as conn:
            if container_id is None:
                cursor = await conn.execute(
                    "SELECT record FROM images WHERE tenant_id = %s ORDER BY created_at DESC, image_id DESC",
                    (tenant_id,),
                )
            else:
                cursor = await conn.execute(
                    "SELECT record FROM images WHERE tenant_id = %s AND container_id = %s"
                    " ORDER BY created_at DESC, image_id DESC",
                    (tenant_id, container_id),
                )
            rows = await cursor.fetchall()
        return [ImageRecord.model_validate_json(r[0]) for r in rows]

    async def put_image(self, image: ImageRecord) -> None:
        # An upsert, but the WHERE keeps another tenant from overwriting an image it does not own.
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO images (image_id, tenant_id, container_id, session_id, created_at, record)"
                " VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (image_id) DO UPDATE SET container_id = excluded.container_id,"
                " session_id = excluded.session_id, created_at = excluded.created_at,"
                " record = excluded.record WHERE images.tenant_id = excluded.tenant_id",
                _image_row(image),
            )

    async def delete_image(self, tenant_id: str, image_id: str) -> None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM images WHERE image_id = %s AND tenant_id = %s RETURNING session_id",
                (image_id, tenant_id),
            )
            row = await cursor.fetchone()
            if row is None:
                return
            session_id = row[0]
            for table in ("sessions", "messages", "cancel_marks", "summaries"):
                await conn.execute(f"DELETE FROM {table} WHERE session_id = %s", (session_id,))

    async def get_session(self, tenant_id: str, session_id: str) -> SessionRecord | None:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT record FROM sessions WHERE session_id = %s AND tenant_id = %s",
                (session_id, tenant_id),
            )
            row = await cursor.fetchone()
        return None if row is None else SessionRecord.model_validate_json(row[0])

    # messages

    async def append_message(
        self, session_id: str, message: Message, *, idempotency_key: str | None = None
    ) -> AppendResult:
        async with self._db.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (SEQ_LOCK_CLASS, session_id))
            # After the lock: this statement's snapshot sees every append committed before it.
            cursor = await conn.execute(
                "INSERT INTO messages (session_id, seq, idempotency_key, message)"
                " SELECT %s, COALESCE(MAX(seq), 0) + 1, %s, %s FROM messages WHERE session_id = %s"
                " ON CONFLICT (session_id, idempotency_key) DO NOTHING RETURNING seq",
                (session_id, idempotency_key, _message_json(message), session_id),
            )
            inserted = await cursor.fetchone()
            if inserted is not None:
                return AppendResult(message=message, seq=inserted[0], created=True)
            cursor = await conn.execute(
                "SELECT seq, message FROM messages WHERE session_id = %s AND idempotency_key = %s",
                (session_id, idempotency_key),
            )
            existing = await cursor.fetchone()
        assert existing is not None  # the conflict that skipped the insert is this very row
        return AppendResult(message=message_from_wire(existing[1]), seq=existing[0], created=False)

    async def list_messages(self, session_id: str) -> list[Message]:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT message FROM messages WHERE session_id = %s ORDER BY seq", (session_id,)
            )
            rows = await cursor.fetchall()
        return [message_from_wire(r[0]) for r in rows]

    async def recent_messages(self, session_id: str, limit: int) -> list[Message]:
        return [m.message for m in await self.recent_messages_after(session_id, 0, limit)]

    async def recent_messages_after(
        self, session_id: str, after_seq: int, limit: int, *, fresh: bool = True
    ) -> list[SeqMessage]:
        if limit <= 0:
            return []
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT seq, message FROM messages WHERE session_id = %s AND seq > %s"
                " ORDER BY seq DESC LIMIT %s",
                (session_id, after_seq, limit),
            )
            rows = await cursor.fetchall()
        return [SeqMessage(seq, message_from_wire(body)) for seq, body in reversed(rows)]

    # compaction summaries

    async def put_summary(self, summary: SessionSummary) -> bool:
        # Only ever forward: a slower compaction finishing late never replaces a newer summary.
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO summaries (session_id, up_to_seq, record) VALUES (%s, %s, %s)"
                " ON CONFLICT (session_id) DO UPDATE SET up_to_seq = excluded.up_to_seq,"
                " record = excluded.record WHERE excluded.up_to_seq > summaries.up_to_seq",
                (summary.sessionId, summary.upToSeq, summary.model_dump_json()),
            )
            return cursor.rowcount == 1

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        async with self._db.connection() as conn:
            cursor = await conn.execute("SELECT record FROM summaries WHERE session_id = %s", (session_id,))
            row = await cursor.fetchone()
        return None if row is None else SessionSummary.model_validate_json(row[0])

    # turns and usage

    async def put_turn(self, turn: TurnRecord) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO turns (turn_id, session_id, status, poller, record) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (turn_id) DO UPDATE SET session_id = excluded.session_id,"
                " status = excluded.status, poller = excluded.poller, record = excluded.record",
                (turn.turnId, turn.sessionId, turn.status, turn.poller, turn.model_dump_json()),
            )

    async def get_turn(self, turn_id: str) -> TurnRecord | None:
        async with self._db.connection() as conn:
            cursor = await conn.execute("SELECT record FROM turns WHERE turn_id = %s", (turn_id,))
            row = await cursor.fetchone()
        return None if row is None else TurnRecord.model_validate_json(row[0])

    async def put_usage(self, usage: UsageRecord) -> bool:
        # First write wins: a retried turn must not bill twice or rewrite what was billed.
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO usage (turn_id, tenant_id, container_id, created_at, record)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (turn_id) DO NOTHING",
                (usage.turnId, usage.tenantId, usage.containerId, usage.createdAt, usage.model_dump_json()),
            )
            return cursor.rowcount == 1

    async def list_usage(
        self, tenant_id: str, container_id: str | None = None, *, since_ms: int = 0
    ) -> list[UsageRecord]:
        async with self._db.connection() as conn:
            if container_id is None:
                cursor = await conn.execute(
                    "SELECT record FROM usage WHERE tenant_id = %s AND created_at >= %s"
                    " ORDER BY created_at, turn_id",
                    (tenant_id, since_ms),
                )
            else:
                cursor = await conn.execute(
                    "SELECT record FROM usage WHERE tenant_id = %s AND container_id = %s"
                    " AND created_at >= %s ORDER BY created_at, turn_id",
                    (tenant_id, container_id, since_ms),
                )
            rows = await cursor.fetchall()
        return [UsageRecord.model_validate_json(r[0]) for r in rows]

    # interrupt marks: one per cancelled turn

    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO cancel_marks (session_id, turn_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (session_id, turn_id),
            )

    async def cancel_requests(self, poller: str) -> set[str]:
        # One statement: the marked turns whose record says running under this poller.
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT c.turn_id FROM cancel_marks c JOIN turns t ON t.turn_id = c.turn_id"
                " WHERE t.poller = %s AND t.status = 'running'",
                (poller,),
            )
            rows = await cursor.fetchall()
        return {r[0] for r in rows}

    async def is_cancel_requested(self, session_id: str, turn_id: str, *, fresh: bool = True) -> bool:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT 1 FROM cancel_marks WHERE session_id = %s AND turn_id = %s", (session_id, turn_id)
            )
            return await cursor.fetchone() is not None

    # a deleted tenant's conversations

    async def purge_tenant(self, tenant_id: str) -> int:
        """Delete the tenant's containers, images, sessions, messages, summaries, cancel marks and
        turns, in one transaction; its usage records stay (billing). Returns how many images."""
        sessions = "SELECT session_id FROM sessions WHERE tenant_id = %s"
        async with self._db.transaction() as conn:
            cursor = await conn.execute("DELETE FROM images WHERE tenant_id = %s", (tenant_id,))
            images = cursor.rowcount
            for table in ("messages", "cancel_marks", "summaries", "turns"):
                await conn.execute(
                    f"DELETE FROM {table} WHERE session_id IN ({sessions})",
                    (tenant_id,),
                )
            await conn.execute("DELETE FROM sessions WHERE tenant_id = %s", (tenant_id,))
            await conn.execute("DELETE FROM containers WHERE tenant_id = %s", (tenant_id,))
        return images


__all__ = ["PostgresStore"]
