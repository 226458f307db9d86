"""Deliver frames to every connection subscribed to a session; prune connections that are gone."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentvm.errors import ConnectionGone
from agentvm.events import dumps
from agentvm.ports import PROTOCOL_V2
from agentvm.streaming.agentx_v2_events import render_frame

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.events import Json
    from agentvm.ports import Connections, Push, Subscription

log = logging.getLogger("agentvm.fanout")


class Fanout:
    """Posts to a session's subscribers. ``$disconnect`` is best-effort, so a 410 prunes too."""

    def __init__(self, connections: Connections, push: Push) -> None:
        self._connections = connections
        self._push = push

    async def subscribers(self, session_id: str) -> list[str]:
        return list(await self._connections.subscribers(session_id))

    async def subscribers_with_cursor(self, session_id: str) -> list[tuple[str, int | None]]:
        return list(await self._connections.subscribers_with_cursor(session_id))

    async def subscriptions(self, session_id: str) -> list[Subscription]:
        return list(await self._connections.subscriptions(session_id))

    async def deliver(self, plan: Sequence[tuple[str, Sequence[str]]]) -> set[str]:
        """Send each connection its payloads, in order. Returns the connections found gone (pruned)."""
        gone: set[str] = set()
        for conn, payloads in plan:
            try:
                for payload in payloads:
                    await self._push.send(conn, payload)
            except ConnectionGone:
                log.info("pruning gone connection", extra={"connection_id": conn})
                await self._connections.remove(conn)
                gone.add(conn)
            except Exception as exc:
                # e.g. API Gateway's LimitExceeded (the client's buffer is full) after the adapter's
                # retries: that client misses these frames (it can resume), the turn and the others go on.
                log.warning(
                    "dropping frames for a connection that cannot take them",
                    extra={"connection_id": conn, "error": type(exc).__name__},
                )
        return gone

    async def send_to(self, connection_ids: Sequence[str], payloads: Sequence[str]) -> list[str]:
        """Send each payload to each connection in order. Returns the connections still alive."""
        gone = await self.deliver([(conn, payloads) for conn in connection_ids])
        return [conn for conn in connection_ids if conn not in gone]

    async def publish(self, session_id: str, payloads: Sequence[str]) -> None:
        await self.send_to(await self.subscribers(session_id), payloads)

    async def publish_frame(self, session_id: str, frame: Json) -> None:
        """One frame outside any turn (``session_destroyed``, a ``system_error``) to the session's
        subscribers, each in its connection's protocol."""
        subs = await self.subscriptions(session_id)
        v1 = [dumps(frame)]
        v2 = render_frame(frame) if any(s.protocol == PROTOCOL_V2 for s in subs) else []
        await self.deliver([(s.connection_id, v2 if s.protocol == PROTOCOL_V2 else v1) for s in subs])


__all__ = ["Fanout"]
