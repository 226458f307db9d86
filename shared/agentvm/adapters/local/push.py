"""Push for the local host: each live WebSocket registers a send function under its id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.errors import ConnectionGone

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class LocalPush:
    def __init__(self) -> None:
        self._senders: dict[str, Callable[[str], Awaitable[None]]] = {}

    def attach(self, connection_id: str, send: Callable[[str], Awaitable[None]]) -> None:
        self._senders[connection_id] = send

    def detach(self, connection_id: str) -> None:
        self._senders.pop(connection_id, None)

    async def send(self, connection_id: str, payload: str) -> None:
        send = self._senders.get(connection_id)
        if send is None:
            raise ConnectionGone(f"connection {connection_id} is gone")
        try:
            await send(payload)
        except Exception as exc:  # the socket closed under us: same as API Gateway's 410
            self._senders.pop(connection_id, None)
            raise ConnectionGone(f"connection {connection_id} is gone") from exc


__all__ = ["LocalPush"]
