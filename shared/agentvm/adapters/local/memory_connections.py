"""In-memory connection registry: the local host's live WebSocket connections and subscriptions.

A connection's protocol (AgentX v1 or v2) is recorded by its first frame, whichever it is: here it
costs nothing. Subscribers are sent frames in their connection's protocol, batched if the
connection declared it at the upgrade (``ConnectionInfo.batch``).

One API key holds at most ``max_per_key`` live connections (0 = no cap): registering one more,
at the upgrade or by an ``auth`` frame, raises ``RateLimited``. A leaked key spread over many
addresses cannot take every socket the process has. A tenant holds at most the ``tenant_cap``
its caller passes (its keys together: ``security/tenant_limits.py``), refused the same way.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING

from agentvm.errors import RateLimited
from agentvm.ports import PROTOCOL_V1, Subscription

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.ports import ConnectionInfo


class InMemoryConnections:
    def __init__(self, *, max_per_key: int = 0) -> None:
        self.max_per_key = max_per_key
        self._per_key: Counter[str] = Counter()
        self._per_tenant: Counter[str] = Counter()
        self._infos: dict[str, ConnectionInfo] = {}
        # session -> connection -> the cursor it subscribed with (insertion-ordered)
        self._by_session: dict[str, dict[str, int | None]] = {}
        self._by_connection: dict[str, set[str]] = {}

    async def register(self, info: ConnectionInfo, *, tenant_cap: int = 0) -> None:
        old = self._infos.get(info.connection_id)
        old_key = old.key_id if old is not None else None
        old_tenant = old.tenant_id if old is not None else None
        tenant = info.tenant_id
        if tenant is not None and tenant != old_tenant and 0 < tenant_cap <= self._per_tenant[tenant]:
            raise RateLimited(
                f"too many connections for this tenant (at most {tenant_cap})",
                limit=tenant_cap,
                reset_at_ms=info.connected_at,  # a slot frees as soon as one of them closes
            )
        if info.key_id is not None and info.key_id != old_key:
            if 0 < self.max_per_key <= self._per_key[info.key_id]:
                raise RateLimited(
                    f"too many connections for this API key (at most {self.max_per_key})",
                    limit=self.max_per_key,
                    reset_at_ms=info.connected_at,  # a slot frees as soon as one of them closes
                )
            self._per_key[info.key_id] += 1
        if old_key is not None and old_key != info.key_id:
            self._release(old_key)
        if tenant != old_tenant:
            if tenant is not None:
                self._per_tenant[tenant] += 1
            if old_tenant is not None:
                _decrement(self._per_tenant, old_tenant)
        if old is not None and info.protocol is None and old.protocol is not None:
            info = dataclasses.replace(info, protocol=old.protocol)  # re-registered by an auth frame
        if old is not None and old.batch and not info.batch:
            info = dataclasses.replace(info, batch=True, cadence=old.cadence)  # declared at the upgrade, kept
        self._infos[info.connection_id] = info

    def _release(self, key_id: str) -> None:
        _decrement(self._per_key, key_id)

    async def get(self, connection_id: str) -> ConnectionInfo | None:
        return self._infos.get(connection_id)

    async def remove(self, connection_id: str) -> None:
        info = self._infos.pop(connection_id, None)
        if info is not None and info.key_id is not None:
            self._release(info.key_id)
        if info is not None and info.tenant_id is not None:
            _decrement(self._per_tenant, info.tenant_id)
        for session_id in self._by_connection.pop(connection_id, ()):
            subs = self._by_session.get(session_id)
            if subs is not None:
                subs.pop(connection_id, None)
                if not subs:
                    del self._by_session[session_id]

    async def subscribe(
        self,
        connection_id: str,
        session_id: str,
        after_seq: int | None = None,
        *,
        known: ConnectionInfo | None = None,
    ) -> None:
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

    async def subscriptions(self, session_id: str) -> Sequence[Subscription]:
        out = []
        for conn, cursor in self._by_session.get(session_id, {}).items():
            info = self._infos.get(conn)
            protocol = info.protocol if info is not None and info.protocol else PROTOCOL_V1
            batch = info is not None and info.batch
            out.append(
                Subscription(conn, cursor, protocol, batch, info.cadence if info is not None else None)
            )
        return out

    async def claim_protocol(self, connection_id: str, protocol: str) -> str:
        info = self._infos.get(connection_id)
        if info is None:
            return protocol
        if info.protocol is None:
            self._infos[connection_id] = dataclasses.replace(info, protocol=protocol)
            return protocol
        return info.protocol

    def __len__(self) -> int:
        return len(self._infos)

    def by_tenant(self) -> Counter[str | None]:
        """Live connections by tenant (None: not authenticated yet), for ``/v1/metrics``."""
        return Counter(info.tenant_id for info in self._infos.values())


def _decrement(counts: Counter[str], name: str) -> None:
    counts[name] -= 1
    if counts[name] <= 0:
        del counts[name]


__all__ = ["InMemoryConnections"]
