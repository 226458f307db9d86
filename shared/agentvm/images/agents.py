"""An image's agent: one per image, started when the image runs (or is sent a message) and stopped
on request or when the image is deleted.

The caller's own frames (``agent_registered``, ``agent_unregistered``) are appended to ``notices``,
which the protocol sends to the caller before its answer; stopping also tells the session's
subscribers (``session_destroyed``, outside any turn: no seq, not part of the resumable stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.events import EventContext, event
from agentvm.streaming.fanout import Fanout

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime


async def start_agent(rt: Runtime, image: ImageRecord, *, notices: list[Json]) -> tuple[ImageRecord, bool]:
    """One agent per image: reuse the running one, else register a new one. Returns the image as
    stored and whether its agent was reused."""
    if image.agentId:
        return image, True
    now = rt.clock.now_ms()
    image = image.model_copy(update={"agentId": rt.ids.new("agent"), "updatedAt": now})
    await rt.store.put_image(image)
    notices.append(
        event(
            "agent_registered",
            {
                "containerId": image.containerId,
                "agentId": image.agentId,
                "definitionName": image.name,
                "registeredAt": now,
            },
            now_ms=now,
            source="container",
            category="lifecycle",
        )
    )
    return image, False


async def stop_agent(rt: Runtime, image: ImageRecord, *, notices: list[Json]) -> bool:
    """Unregister the image's agent; False if it had none."""
    if not image.agentId:
        return False
    agent_id, now = image.agentId, rt.clock.now_ms()
    await rt.store.put_image(image.model_copy(update={"agentId": None, "updatedAt": now}))
    # Outside any turn: no seq, not part of the resumable stream (docs/protocol.md, Resume).
    destroyed = event(
        "session_destroyed",
        {"sessionId": image.sessionId, "agentId": agent_id, "containerId": image.containerId},
        now_ms=now,
        source="session",
        category="lifecycle",
        context=_context(image, agent_id).to_wire(),
    )
    await Fanout(rt.connections, rt.push).publish_frame(image.sessionId, destroyed)
    notices.append(
        event(
            "agent_unregistered",
            {"containerId": image.containerId, "agentId": agent_id, "reason": "stopped"},
            now_ms=now,
            source="container",
            category="lifecycle",
        )
    )
    return True


def _context(image: ImageRecord, agent_id: str | None = None) -> EventContext:
    return EventContext(
        containerId=image.containerId,
        imageId=image.imageId,
        agentId=agent_id or image.agentId or "",
        sessionId=image.sessionId,
    )


__all__ = ["start_agent", "stop_agent"]
