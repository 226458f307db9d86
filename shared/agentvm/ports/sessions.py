"""The session centre's port (``agentvm.sessions``): whole sessions written at once, and message search."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.messages import Message
    from agentvm.records import ImageRecord, SessionImport, SessionRecord, SessionSummary


@dataclass(frozen=True, slots=True)
class SearchTerm:
    """A word or a "quoted phrase" of a message search, as tokens (``agentvm.sessions.search``);
    ``prefix``: its last token matches any token that starts with it."""

    tokens: tuple[str, ...]
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class SearchPosition:
    """Where a page of search results ended; the next page continues after it. Results come by
    image (newest first: ``createdAt``, then id), then by message (newest first: ``seq``)."""

    created_at: int
    image_id: str
    seq: int


@dataclass(frozen=True, slots=True)
class MessageHit:
    image: ImageRecord
    seq: int
    message: Message


@dataclass(frozen=True, slots=True)
class SearchPage:
    hits: list[MessageHit]
    next: SearchPosition | None  # None: there is nothing more


class SessionArchive(Protocol):
    """Whole sessions written at once (imports and forks) and message search (``agentvm.sessions``).

    A write is claimed first in a ledger (``SessionImport``, by tenant and key), so a retried one
    returns the first result and a crashed one can be finished or cleaned up; readers never see a
    half-written session: the image, which makes it listed, is written last.
    """

    async def claim_import(self, claim: SessionImport) -> SessionImport:
        """Store ``claim`` if its key is free for its tenant; returns the entry as stored now."""
        ...

    async def replace_import(self, stored: SessionImport, claim: SessionImport) -> bool:
        """Replace the entry by ``claim`` only if it is still exactly ``stored``. True if replaced."""
        ...

    async def write_import(
        self,
        claim: SessionImport,
        image: ImageRecord,
        session: SessionRecord,
        messages: Sequence[Message],
        summary: SessionSummary | None,
    ) -> SessionImport:
        """Write the session, its messages (seqs 1..n), its summary and the image, then mark the claim
        ``done`` (returned). Raises ``Conflict`` if the claim is no longer this writer's."""
        ...

    async def discard_import(self, claim: SessionImport) -> None:
        """Delete what a failed ``write_import`` of ``claim`` left behind, and the claim if it is
        still this writer's (so the key can be imported again)."""
        ...

    async def search_messages(
        self,
        tenant_id: str,
        terms: Sequence[SearchTerm],
        *,
        container_id: str | None,
        limit: int,
        after: SearchPosition | None,
    ) -> SearchPage:
        """Up to ``limit`` user and assistant messages of the tenant (of one container) whose text
        holds every term, after ``after``. A page may hold fewer (even none) and still have a
        ``next``: an adapter that scans stops at its budget per call."""
        ...


__all__ = [
    "MessageHit",
    "SearchPage",
    "SearchPosition",
    "SearchTerm",
    "SessionArchive",
]
