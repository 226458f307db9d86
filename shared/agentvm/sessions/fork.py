"""Fork a session at a message: ``POST /v1/sessions/{sessionId}/fork {messageId}``.

The fork is a new image in the same container, with the source image's config (a built image
stays pinned to the same resource versions, and holds them too) and, as its session's history,
copies of the source's messages up to and including ``messageId`` (new ids: ``sessions.writer``).
A turn on the fork sees only that prefix. The compaction summary comes along when it covers no
message past the fork point; otherwise the fork starts without one (and summarises again when
its history grows). Forking at a message in the middle of a turn keeps what that turn had stored
up to there: a tool call without its result reads to the model as "no result was recorded".

The fork takes the source's name unless ``name`` is given. With ``requestId``, a retried fork
returns the first one (``created: false``); without, each call forks again. Usage records stay
with the source: the fork's own turns are billed as they run.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from agentvm.errors import MessageNotFound
from agentvm.sessions.export import session_image
from agentvm.sessions.writer import archive_of, fresh_copies, write_session

if TYPE_CHECKING:
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime


async def fork_session(
    rt: Runtime,
    tenant_id: str,
    session_id: str,
    message_id: str,
    *,
    name: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    archive_of(rt)
    source = await session_image(rt, tenant_id, session_id)
    history = await rt.store.list_messages(session_id)
    cut = next((i for i, m in enumerate(history) if m.id == message_id), None)
    if cut is None:
        raise MessageNotFound(f"Message not found in session {session_id}: {message_id}")
    prefix = history[: cut + 1]
    summary = await rt.store.get_summary(session_id)
    if summary is not None and summary.upToSeq > len(prefix):
        summary = None

    def make_image(image_id: str, new_session_id: str, now: int) -> ImageRecord:
        return source.model_copy(
            update={
                "imageId": image_id,
                "sessionId": new_session_id,
                "name": name or source.name,
                "agentId": None,
                "createdAt": now,
                "updatedAt": now,
            }
        )

    image, created = await write_session(
        rt,
        tenant_id=tenant_id,
        container_id=source.containerId,
        key=f"fork:{session_id}:{request_id or uuid.uuid4().hex}",
        make_image=make_image,
        messages=fresh_copies(prefix, rt.ids),
        summary=summary,
        source={"forkedFrom": session_id, "messageId": message_id, "seq": len(prefix)},
    )
    if created and image.build is not None and rt.resources is not None:
        from agentvm.resources.build import move_edges

        await move_edges(rt.resources, image, None)  # the fork holds its pinned versions too
    return {
        "created": created,
        "messages": len(prefix),
        "forkedFrom": {"sessionId": session_id, "messageId": message_id, "seq": len(prefix)},
        "record": image.to_wire(),
    }


__all__ = ["fork_session"]
