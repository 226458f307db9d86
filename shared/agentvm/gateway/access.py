"""Who may send a frame, for both protocols (AgentX v1 ``dispatch``, v2 ``agentx_v2``).

A connection is authenticated by its upgrade (the host registers it with the key's tenant) or by
an ``auth`` frame; every frame of an authenticated connection re-checks its key (cached: a revoked
key stops within the revocation bound) and counts against the key's rate limit; before it has a
key, a connection counts against its small unauthenticated allowance.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentvm.errors import AgentVMError, Unauthorized
from agentvm.logs import client_source, log_refusal
from agentvm.ports import ConnectionInfo
from agentvm.security.tenant_limits import connection_cap

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.runtime import Runtime


async def admit(rt: Runtime, connection_id: str, conn: ConnectionInfo | None) -> None:
    """The frame is within the rate limit of the connection's key (re-checked: revocation), or of
    the unauthenticated allowance. Raises ``Unauthorized`` or ``RateLimited``."""
    if conn is not None and conn.tenant_id is not None:
        if rt.auth is None or conn.key_id is None:
            return
        principal = await rt.auth.principal(conn.key_id)
        if principal.tenant_id != conn.tenant_id:
            raise Unauthorized("connection is not authenticated")
        if rt.rate_limiter is not None:
            await rt.rate_limiter.hit(principal)
    elif rt.rate_limiter is not None:
        await rt.rate_limiter.hit_unauthenticated(connection_id)  # auth attempts included


async def authenticate(
    rt: Runtime,
    connection_id: str,
    conn: ConnectionInfo | None,
    headers: Mapping[str, str],
    *,
    protocol: str | None = None,
) -> str | None:
    """An ``auth`` frame: its ``Authorization: Bearer`` key authenticates the connection (registered
    again with the key's tenant, keeping its protocol). Raises an ``AgentVMError`` if it may not;
    the connection is then as it was. Without an authenticator (the open dev mode) it is a no-op.
    Returns the key's tenant (None in the open mode)."""
    if rt.auth is None:
        return None
    principal = await rt.auth.from_headers(dict(headers))
    if principal is None:
        raise Unauthorized("the auth frame has no 'Authorization: Bearer <API key>' header")
    if not principal.allows("client"):
        raise Unauthorized("this API key may not use the WebSocket protocol")
    if conn is not None and conn.tenant_id not in (None, principal.tenant_id):
        raise Unauthorized("this connection is authenticated for another tenant; open a new one")
    info = ConnectionInfo(
        connection_id=connection_id,
        tenant_id=principal.tenant_id,
        connected_at=conn.connected_at if conn is not None else rt.clock.now_ms(),
        key_id=principal.key_id,
        protocol=protocol if protocol is not None else conn.protocol if conn is not None else None,
        batch=conn is not None and conn.batch,
        cadence=conn.cadence if conn is not None else None,  # both declared at the upgrade
    )
    # may refuse: too many connections for this key, or for its tenant
    await rt.connections.register(info, tenant_cap=await connection_cap(rt.tenant_limits, info.tenant_id))
    return principal.tenant_id


async def is_admin(rt: Runtime, conn: ConnectionInfo) -> bool:
    """Whether the connection's key has the admin scope (the open dev mode: the machine's owner)."""
    if rt.auth is None or conn.key_id is None:
        return True
    try:
        return (await rt.auth.principal(conn.key_id)).allows("admin")  # cached: no extra read
    except AgentVMError:
        return False


def log_refused_frame(log: logging.Logger, connection_id: str, exc: AgentVMError) -> None:
    """One line about a frame refused before any command ran (either protocol), rate-limited per
    client address (``logs.log_refusal``)."""
    log_refusal(
        log,
        "frame refused",
        source=client_source.get() or connection_id,
        level=logging.WARNING if isinstance(exc, Unauthorized) else logging.INFO,
        connection_id=connection_id,
        code=exc.code,
        reason=exc.message,
    )


__all__ = ["admit", "authenticate", "is_admin", "log_refused_frame"]
