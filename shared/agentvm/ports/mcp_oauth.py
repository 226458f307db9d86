"""The MCP OAuth records port: what a tenant's authorization of a remote MCP server leaves behind.

A remote MCP server that requires OAuth 2.1 is reached with tokens the tenant obtained once, in a
browser (docs/mcp.md, "OAuth"). The SDK's client auth reads and writes them through
``adapters.mcp.oauth.SealedTokenStorage``, which seals every value with the config centre's sealer
before it reaches this store: values here are opaque text and never plaintext secrets.

Two kinds of record live here:

- **kept records** (tokens, the registered client, the authorization server's metadata), read and
  written by one tenant under keys that bind the tenant and a hash of the server URL;
- **pending authorizations**, written when an admin starts the browser flow and *taken* once by the
  callback, which arrives from the authorization server with only the OAuth ``state`` (no API key):
  the state is the key, the record names its tenant, and a taken or expired record is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentvm.errors import BadRequest

if TYPE_CHECKING:
    from agentvm.ports.centres import Sealer

MCP_OAUTH_MAX_KEY_CHARS = 200
MCP_OAUTH_MAX_VALUE_BYTES = 16 * 1024  # of the sealed value, UTF-8


class McpOAuthRecords(Protocol):
    """Sealed OAuth records of remote MCP servers, per tenant. Keys are at most 200 characters;
    values (sealed text) at most 16 KiB."""

    async def get(self, tenant_id: str, key: str) -> str | None:
        """The value under ``key`` if it belongs to ``tenant_id`` and has not expired, else None."""
        ...

    async def put(self, tenant_id: str, key: str, value: str, *, expires_at: float | None = None) -> None:
        """Writes (or replaces) ``key`` for ``tenant_id``; ``expires_at`` (epoch seconds) makes it
        unreadable after then (and lets the store drop it). A key of another tenant is not replaced:
        the write raises ``agentvm.errors.Conflict``."""
        ...

    async def take(self, key: str) -> tuple[str, str] | None:
        """Reads and deletes ``key`` at once, for one caller only: ``(tenant_id, value)``, or None when
        it is missing, expired or already taken (a pending authorization is used once)."""
        ...

    async def delete(self, tenant_id: str, key: str) -> None:
        """Forgets ``key`` if it belongs to ``tenant_id`` (nothing if it is missing or another's)."""
        ...

    async def delete_tenant(self, tenant_id: str) -> int:
        """Forgets every record of ``tenant_id``; returns how many there were."""
        ...


@dataclass(frozen=True, slots=True)
class McpOAuthAccess:
    """What a turn needs to reach its tenant's OAuth-protected MCP servers: the records and the
    sealer (the config centre's) that opens them."""

    records: McpOAuthRecords
    sealer: Sealer


class McpOAuthAuth(Protocol):
    """Turns a tenant's stored OAuth records into the HTTP auth of a remote MCP server's session
    (``adapters.mcp.oauth.StoredOAuth``)."""

    async def http_auth(self, access: McpOAuthAccess, tenant_id: str, server_url: str) -> Any | None:
        """An ``httpx.Auth`` that attaches (and refreshes, writing back) the tenant's tokens for the
        server; None when the tenant has not authorized it (no tokens stored)."""
        ...


def check_mcp_oauth_record(key: str, value: str) -> None:
    """``BadRequest`` unless ``key`` (1 to ``MCP_OAUTH_MAX_KEY_CHARS`` characters) and ``value``
    (at most ``MCP_OAUTH_MAX_VALUE_BYTES`` bytes) are within the limits every store keeps."""
    if not key or len(key) > MCP_OAUTH_MAX_KEY_CHARS:
        raise BadRequest(f"an MCP OAuth record's key has 1 to {MCP_OAUTH_MAX_KEY_CHARS} characters")
    if len(value.encode()) > MCP_OAUTH_MAX_VALUE_BYTES:
        raise BadRequest(f"an MCP OAuth record's value is at most {MCP_OAUTH_MAX_VALUE_BYTES} bytes")


__all__ = [
    "MCP_OAUTH_MAX_KEY_CHARS",
    "MCP_OAUTH_MAX_VALUE_BYTES",
    "McpOAuthAccess",
    "McpOAuthAuth",
    "McpOAuthRecords",
    "check_mcp_oauth_record",
]
