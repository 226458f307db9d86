"""The store port: durable state of containers, images, sessions, messages, turns and usage.

``Store`` is the one every turn and request reads and writes; ``AppendResult`` and ``SeqMessage``
are what its message appends and reads return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentvm.messages import Message
    from agentvm.records import (
        ContainerRecord,
        ImageRecord,
        SessionRecord,
        SessionSummary,
        TurnRecord,
        UsageRecord,
    )


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Outcome of an idempotent append: the stored message and whether this call created it."""

    message: Message
    seq: int
    created: bool


@dataclass(frozen=True, slots=True)
class SeqMessage:
    """A stored message with its per-session sequence number."""

    seq: int
    message: Message


class Store(Protocol):
    """Durable state: containers, images + sessions, messages, turns, usage.

    Reads are always scoped by tenant; an id of another tenant reads as absent.
    """

    # containers
    async def put_container(self, record: ContainerRecord) -> bool:
        """Create if absent. True if this call created it."""
        ...

    async def get_container(self, tenant_id: str, container_id: str) -> ContainerRecord | None: ...
    async def list_containers(self, tenant_id: str) -> list[ContainerRecord]: ...

    # images (each with its one session)
    async def create_image(self, image: ImageRecord, session: SessionRecord) -> None: ...
    async def get_image(self, tenant_id: str, image_id: str) -> ImageRecord | None: ...
    async def list_images(self, tenant_id: str, container_id: str | None = None) -> list[ImageRecord]:
        """Newest first. ``container_id=None`` lists every image of the tenant."""
        ...

    async def put_image(self, image: ImageRecord) -> None:
        """Overwrite an existing image record (update, run, stop)."""
        ...

    async def delete_image(self, tenant_id: str, image_id: str) -> None:
        """Delete the image, its session and all its messages."""
        ...

    async def get_session(self, tenant_id: str, session_id: str) -> SessionRecord | None: ...

    # messages: one item per message, a per-session sequence
    async def append_message(
        self, session_id: str, message: Message, *, idempotency_key: str | None = None
    ) -> AppendResult:
        """Append at the next sequence number. With a key, a repeated call returns the first result."""
        ...

    async def list_messages(self, session_id: str) -> list[Message]:
        """The whole history, oldest first (for ``image_messages_request``)."""
        ...

    async def recent_messages(self, session_id: str, limit: int) -> list[Message]:
        """The last ``limit`` messages, oldest first."""
        ...

    async def recent_messages_after(
        self, session_id: str, after_seq: int, limit: int, *, fresh: bool = True
    ) -> list[SeqMessage]:
        """The last ``limit`` messages whose seq is above ``after_seq``, oldest first, with their seqs.

        What a turn reads (``after_seq``: what the session's compaction summary covers): one
        bounded read, whatever the length of the history. ``fresh=False``: the newest messages
        may be missing for a moment (on DynamoDB an eventually consistent read, half the price);
        the caller checks what it needs is there (``agent.context.load_context``).
        """
        ...

    # compaction summaries: one per session, only ever replaced by one covering more messages
    async def put_summary(self, summary: SessionSummary) -> bool:
        """Store unless the session's summary covers as much already (``upToSeq``). True if stored."""
        ...

    async def get_summary(self, session_id: str) -> SessionSummary | None: ...

    # turns and usage
    async def put_turn(self, turn: TurnRecord) -> None: ...
    async def get_turn(self, turn_id: str) -> TurnRecord | None: ...
    async def put_usage(self, usage: UsageRecord) -> bool:
        """Idempotent by ``turnId`` (first write wins). True if this call stored it: only then is
        the usage counted against budgets, so a retried turn never counts twice."""
        ...

    async def list_usage(
        self, tenant_id: str, container_id: str | None = None, *, since_ms: int = 0
    ) -> list[UsageRecord]:
        """The tenant's usage records (of one container), oldest first; with ``since_ms``, only
        those created at or after it (a session export reads from its session's creation on, not
        the tenant's whole history)."""
        ...

    # interrupt marks: set by the gateway, checked by the worker (turns/cancel_poll.py)
    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        """Mark the turn cancelled; then, if its record (read after the mark is written) says it
        is ``running`` under a poller, make it one of that poller's ``cancel_requests``."""
        ...

    async def is_cancel_requested(self, session_id: str, turn_id: str, *, fresh: bool = True) -> bool:
        """``fresh=False``: a poll that looks again soon may read a mark a moment late (on
        DynamoDB an eventually consistent read, half the price)."""
        ...

    async def cancel_requests(self, poller: str) -> set[str]:
        """The turns ``request_cancel`` found running under ``poller`` (its running record named
        it): one read for all of them, which may be a moment late (a poll that looks again soon; on
        DynamoDB an eventually consistent Query). A turn cancelled before its running record named
        the poller may be missing: its attempt reads ``is_cancel_requested`` after that write."""
        ...


Json = dict[str, Any]  # a JSON object as adapters store and return it

__all__ = [
    "AppendResult",
    "Json",
    "SeqMessage",
    "Store",
]
