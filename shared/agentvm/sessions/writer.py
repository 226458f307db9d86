"""Writing a whole session at once (an import, a fork): fresh ids, a ledger claim, all or nothing.

**Fresh ids.** Every message gets a new id and ``parentId`` follows it (``fresh_copies``): a turn's
id is derived from its user message's id, so a copy that kept the ids would share turns and usage
records with its original. Tool call ids (the model's) are kept: they pair calls with results
inside the history.

**Idempotent, never half-written.** The write is claimed first in the ledger under a key (an
import: its export id and container; a fork: its session and request id). A second write with
the key finds the first one's image and returns it (``created: False``). The claim names the
image and session ids; the store writes the session, the messages and the image (last: what
makes it listed) and marks the claim done. A write that fails is discarded: its messages,
session and image are deleted and the claim released, so a retry starts clean. If the writer
died instead, the claim stays ``importing``: within ``LEASE_MS`` a retry is told
``import_in_progress``; after it, a retry finishes the job (the image was written: it is
complete) or clears what was left and writes again.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Any

from agentvm.errors import BadRequest, ImportInProgress
from agentvm.records import ContainerRecord, SessionImport, SessionRecord
from agentvm.security.storage_quota import image_size

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agentvm.messages import Message
    from agentvm.ports import Ids, SessionArchive
    from agentvm.records import ImageRecord, SessionSummary
    from agentvm.runtime import Runtime

# Longer than any write takes (10,000 messages on DynamoDB: a few hundred batch requests), so a
# live writer is never taken over; a dead one's claim is finished or cleared after it.
LEASE_MS = 120_000
_ATTEMPTS = 5


def fresh_copies(messages: Sequence[Message], ids: Ids) -> list[Message]:
    """``messages`` with new ids, ``parentId`` mapped to the new id of the message it names."""
    renamed = {m.id: ids.new("msg") for m in messages}
    out: list[Message] = []
    for m in messages:
        update: dict[str, Any] = {"id": renamed[m.id]}
        parent = getattr(m, "parentId", None)
        if parent is not None:
            update["parentId"] = renamed.get(parent)
        out.append(m.model_copy(update=update))
    return out


def archive_of(rt: Runtime) -> SessionArchive:
    if rt.sessions is None:
        raise BadRequest("this server has no session centre (imports, forks, search)")
    return rt.sessions


async def write_session(
    rt: Runtime,
    *,
    tenant_id: str,
    container_id: str,
    key: str,
    make_image: Callable[[str, str, int], ImageRecord],
    messages: Sequence[Message],
    summary: SessionSummary | None,
    source: dict[str, Any],
) -> tuple[ImageRecord, bool]:
    """Write a new image with ``messages`` as its session's history, once per ``key``.

    ``make_image(image_id, session_id, now_ms)`` builds the image record for the claimed ids.
    Returns the image and whether this call created it (False: an earlier write with ``key``).
    """
    archive = archive_of(rt)
    now = rt.clock.now_ms()
    claim = SessionImport(
        tenantId=tenant_id,
        key=key,
        containerId=container_id,
        imageId=rt.ids.new("img"),
        sessionId=rt.ids.new("sess"),
        owner=uuid.uuid4().hex,
        claimedAt=now,
        messages=len(messages),
        source=source,
    )
    for _ in range(_ATTEMPTS):
        stored = await archive.claim_import(claim)
        if stored.owner == claim.owner:
            break
        earlier = await _earlier(rt, archive, stored, now)
        if earlier is not None:
            await _ensure_container(rt, tenant_id, earlier.containerId, now)
            return earlier, False
    else:
        raise ImportInProgress("this import is being written by another request; try again")

    image = make_image(claim.imageId, claim.sessionId, now)
    size = image_size(image) + sum(len(m.model_dump_json()) for m in messages)
    session = SessionRecord(
        tenantId=tenant_id,
        sessionId=claim.sessionId,
        imageId=claim.imageId,
        containerId=container_id,
        createdAt=now,
        updatedAt=now,
    )
    copied = summary.model_copy(update={"sessionId": claim.sessionId}) if summary is not None else None
    quota = rt.storage_quota
    reserved = 0 if quota is None else await quota.reserve(tenant_id, size)  # refused before any write
    try:
        await archive.write_import(claim, image, session, messages, copied)
    except Exception:
        with contextlib.suppress(Exception):  # what is left is cleared by the next try (the lease)
            await archive.discard_import(claim)
        if quota is not None:
            await quota.give_back(tenant_id, reserved)
        raise
    await _ensure_container(rt, tenant_id, container_id, now)
    return image, True


async def _earlier(
    rt: Runtime, archive: SessionArchive, stored: SessionImport, now: int
) -> ImageRecord | None:
    """What an earlier claim of the key means: its image (done), or None once it is cleared so the
    key can be claimed again. Raises ``ImportInProgress`` while its writer may still be at work."""
    image = await rt.store.get_image(stored.tenantId, stored.imageId)
    if stored.status == "done":
        if image is not None:
            return image
        await archive.discard_import(stored)  # its image was deleted since: import afresh
        return None
    if now - stored.claimedAt < LEASE_MS:
        raise ImportInProgress("this import is being written by another request; try again in a minute")
    if image is not None:  # its writer died after writing the image, its last write: complete
        if await archive.replace_import(stored, stored.model_copy(update={"status": "done"})):
            return image
        return None
    await archive.discard_import(stored)  # a dead writer's leftovers, and its claim
    return None


async def _ensure_container(rt: Runtime, tenant_id: str, container_id: str, now: int) -> None:
    await rt.store.put_container(
        ContainerRecord(tenantId=tenant_id, containerId=container_id, createdAt=now, updatedAt=now)
    )


__all__ = ["LEASE_MS", "archive_of", "fresh_copies", "write_session"]
