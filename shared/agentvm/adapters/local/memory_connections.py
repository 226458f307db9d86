"""In-memory connection registry: the local host's live WebSocket connections and subscriptions."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.ports import ConnectionInfo


class InMemoryConnections:
    def __init__(self) -> None:
        self._infos: dict[str, ConnectionInfo] = {}
        # session -> connection -> the cursor it subscribed with (insertion-ordered)
        self._by_session: dict[str, dict[str, int | None]] = {}
        self._by_connection: dict[str, set[str]] = {}

    async def register(self, info: ConnectionInfo) -> None:
        self._infos[info.connection_id] = info

    async def get(self, connection_id: str) -> ConnectionInfo | None:
        return self._infos.get(connection_id)

    async def remove(self, connection_id: str) -> None:
        self._infos.pop(connection_id, None)
        for session_id in self._by_connection.pop(connection_id, ()):
            subs = self._by_session.get(session_id)
            if subs is not None:
                subs.pop(connection_id, None)
                if not subs:
                    del self._by_session[session_id]

    async def subscribe(self, connection_id: str, session_id: str, after_seq: int | None = None) -> None:
        if connection_id not in self._infos:
            return
        subs = self._by_session.setdefault(session_id, {})
        if after_seq is not None or connection_id not in subs:
            subs[connection_id] = after_seq
        self._by_connection.setdefault(connection_id, set()).add(session_id)

    async def subscribers(self, session_id: str) -> Sequence[str]:
        return list(self._by_session.get(session_id, ()))

    async def subscribers_with_cursor(self, session_id: str) -> Sequence[tuple[str, int | None]]:
        return list(self._by_session.get(session_id, {}).items())

    def __len__(self) -> int:
        return len(self._infos)


__all__ = ["InMemoryConnections"]
