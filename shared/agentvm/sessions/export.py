"""Export a session: ``GET /v1/sessions/{sessionId}/export`` (format: ``sessions.jsonl``).

An export holds the session's whole history, the image's pinned config (the fields a build from
an agent resource resolved, and the build record: what it was pinned to), the compaction summary
and the session's usage records, and its container's agent memory (docs/memory.md). It carries
the image's tool declarations and MCP server configs as stored (secret header values stay
``{"secret": NAME}`` references; plain values are stored with the image, which the docs say is not
for secrets): the route is for admin keys only.

**Size.** An export is at most ``MAX_EXPORT_BYTES`` (4 MiB): what one Lambda answer can carry once
API Gateway base64-encodes it (Lambda caps answers at 6 MB). A larger session is refused with
``export_too_large`` before anything is sent, on both hosts alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.agent.memory import memory_of
from agentvm.errors import ExportTooLarge, NotFound
from agentvm.ports import container_scope
from agentvm.sessions.jsonl import write_export

if TYPE_CHECKING:
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime

MAX_EXPORT_BYTES = 4 * 1024 * 1024
EXPORT_SKEW_MS = 5 * 60_000  # how far the clocks of the hosts that wrote a session may disagree


async def session_image(rt: Runtime, tenant_id: str, session_id: str) -> ImageRecord:
    """The image owning ``session_id`` in the caller's tenant (another tenant's reads as absent)."""
    session = await rt.store.get_session(tenant_id, session_id)
    image = await rt.store.get_image(tenant_id, session.imageId) if session is not None else None
    if image is None:
        raise NotFound(f"Session not found: {session_id}")
    return image


async def export_session(rt: Runtime, tenant_id: str, session_id: str) -> bytes:
    """The session as JSON Lines."""
    image = await session_image(rt, tenant_id, session_id)
    messages = await rt.store.list_messages(session_id)
    summary = await rt.store.get_summary(session_id)
    # Its records come after its image was made: read from then (minus any clock skew between the
    # host that made the image and the workers that ran its turns), not the tenant's whole history.
    since = max(0, image.createdAt - EXPORT_SKEW_MS)
    records = await rt.store.list_usage(tenant_id, image.containerId, since_ms=since)
    usage = [u for u in records if u.sessionId == session_id]
    memory = memory_of(rt)
    remembered = [] if memory is None else await memory.items(tenant_id, container_scope(image.containerId))
    body = write_export(
        export_id=rt.ids.new("exp"),
        exported_at=rt.clock.now_ms(),
        image=image,
        messages=messages,
        summary=summary,
        usage=usage,
        memory=[m.to_wire() for m in remembered],
    )
    if len(body) > MAX_EXPORT_BYTES:
        raise ExportTooLarge(
            f"this session's export would be {len(body)} bytes; at most {MAX_EXPORT_BYTES} can be exported "
            "in one answer (fork it at an earlier message to export a part)"
        )
    return body


__all__ = ["MAX_EXPORT_BYTES", "export_session", "session_image"]
