"""Connection ports: live WebSocket connections, their subscriptions, and pushing frames to them.

Also the protocol names a connection speaks (AgentX v1 frames, v2 JSON-RPC).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    connection_id: str
    tenant_id: str | None  # None until authenticated
    connected_at: int
    key_id: str | None = None  # the API key that authenticated it (None: open mode, or not yet)
    # The protocol its first frame chose (``PROTOCOLS``); None: no frame yet, or (AWS) v1, which
    # is never recorded (docs/protocol.md, "AgentX v2").
    protocol: str | None = None
    # Declared at the upgrade (``?frames=batch``, streaming/batching.py): one WebSocket message may
    # carry several frames (a JSON array). False: one frame per message, as AgentX clients expect.
    batch: bool = False
    # The text cadence it asked for at the upgrade (``?cadence=live|economy``, streaming/batch_cadence.py);
    # None: the turn's (its image's, else its tenant's ``streaming.cadence``). Batched connections only.
    cadence: str | None = None
    # When the adapter forgets it (epoch seconds; None: never, e.g. in memory). Read with the
    # connection, so that ``subscribe(..., known=info)`` need not read it again.
    expires_at: int | None = field(default=None, compare=False)
    # The sessions it was subscribed to when read, each with its stored cursor (None: none), as far
    # as the adapter read them in the same request (AWS: the first few); a session not in it may
    # still be subscribed. ``subscribe(..., known=info)`` skips a write that would change nothing.
    subscribed: Mapping[str, int | None] = field(default_factory=dict, compare=False)


PROTOCOL_V1 = "v1"  # AgentX 1.x SystemEvent frames


PROTOCOL_V2 = "v2"  # AgentX 2.x JSON-RPC 2.0 frames


PROTOCOLS = (PROTOCOL_V1, PROTOCOL_V2)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscriber of a session: its cursor (``after_seq``) and the protocol it is sent frames in."""

    connection_id: str
    after_seq: int | None = None
    protocol: str = PROTOCOL_V1
    batch: bool = False  # its connection takes batched frames (ConnectionInfo.batch)
    cadence: str | None = None  # the cadence its connection asked for (ConnectionInfo.cadence)
    # When it was first made (epoch ms), where the adapter records it (AWS; None: not recorded). A
    # turn whose user message was saved after it sends it the turn from its first frame even if its
    # worker finds it late (the AWS index lags), as a cursor of 0 would (``streaming.sink``).
    subscribed_at: int | None = field(default=None, compare=False)


class Connections(Protocol):
    """Live WebSocket connections, who they are, and which sessions they subscribed to."""

    async def register(self, info: ConnectionInfo, *, tenant_cap: int = 0) -> None:
        """Record the connection (again, after an ``auth`` frame). ``tenant_cap`` > 0: raises
        ``RateLimited`` instead if its tenant already holds that many live connections and this
        one is not one of them (``security/tenant_limits.py``)."""
        ...

    async def get(self, connection_id: str) -> ConnectionInfo | None: ...
    async def remove(self, connection_id: str) -> None: ...
    async def subscribe(
        self,
        connection_id: str,
        session_id: str,
        after_seq: int | None = None,
        *,
        known: ConnectionInfo | None = None,
    ) -> None:
        """Subscribe (idempotent). ``after_seq``: the last frame seq the connection has of the session,
        so the running turn's worker sends it what came after (resume). Subscribing again without
        one keeps the cursor a previous call stored; with one, replaces it. ``known``: the
        connection as ``get`` returned it for this very frame (an adapter need not read it again)."""
        ...

    async def subscribers(self, session_id: str) -> Sequence[str]: ...
    async def subscribers_with_cursor(self, session_id: str) -> Sequence[tuple[str, int | None]]:
        """``subscribers``, each with the ``after_seq`` it subscribed with (None: none given)."""
        ...

    async def subscriptions(self, session_id: str) -> Sequence[Subscription]:
        """The subscribers with their cursors and protocols: the one lookup a turn's worker makes."""
        ...

    async def claim_protocol(self, connection_id: str, protocol: str) -> str:
        """Record ``protocol`` as the connection's unless one is recorded; returns the connection's.
        Called for a connection whose ``get`` shows none. A subscription carries the protocol its
        connection had when it was made. An adapter may leave v1 unrecorded (the default) when
        recording costs a write: then a connection that subscribed before its first v2 frame is v1."""
        ...


class Push(Protocol):
    """Deliver one serialised frame to one connection. Raises ``ConnectionGone`` (HTTP 410)."""

    async def send(self, connection_id: str, payload: str) -> None: ...


__all__ = [
    "ConnectionInfo",
    "Connections",
    "PROTOCOLS",
    "PROTOCOL_V1",
    "PROTOCOL_V2",
    "Push",
    "Subscription",
]
