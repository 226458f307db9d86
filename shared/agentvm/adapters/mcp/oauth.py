"""OAuth tokens of remote MCP servers, kept per tenant and per server URL, sealed at rest.

The official MCP SDK runs the OAuth 2.1 flow (``mcp.client.auth.OAuthClientProvider``: protected
resource metadata, authorization server metadata, dynamic client registration, PKCE, refresh); it
reads and writes what it learns through a ``TokenStorage``. ``SealedTokenStorage`` is that storage
over the host's ``McpOAuthRecords`` (``ports/mcp_oauth.py``): every record is sealed with the config
centre's sealer under a name binding the tenant and the server URL, so a record copied under
another tenant's name does not open, and neither tokens nor client secrets are plaintext at rest.
Besides the SDK's tokens and client it keeps the authorization server's metadata, so a turn's
refresh goes to the real token endpoint. The browser flow that first fills them is
``adapters.mcp.oauth_flow``.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from agentvm.agent.tools.reports import MCP_NEEDS_AUTHORIZATION
from agentvm.configcentre.sealing import is_sealed

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

    from agentvm.ports import McpOAuthAccess, McpOAuthRecords, Sealer

KINDS = ("tokens", "client", "metadata")  # what one tenant keeps for one server URL


def record_key(tenant_id: str, server_url: str, kind: str) -> str:
    """The key of one record: the tenant, a hash of the server URL (no URL in a key), the kind."""
    digest = hashlib.sha256(server_url.encode()).hexdigest()[:32]
    return f"mcp-oauth/{tenant_id}/{digest}/{kind}"


class SealedTokenStorage:
    """The SDK's ``TokenStorage`` for one tenant and one server URL."""

    def __init__(
        self,
        records: McpOAuthRecords,
        sealer: Sealer,
        tenant_id: str,
        server_url: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._records = records
        self._clock = clock
        self._sealer = sealer
        self._tenant_id = tenant_id
        self._server_url = server_url

    def __repr__(self) -> str:
        return f"SealedTokenStorage(tenant={self._tenant_id!r})"

    async def _get(self, kind: str) -> str | None:
        key = record_key(self._tenant_id, self._server_url, kind)
        stored = await self._records.get(self._tenant_id, key)
        if stored is None or not is_sealed(stored):  # AgentVM writes none in plaintext: not its own
            return None
        return self._sealer.open(key, stored)

    async def _put(self, kind: str, value: str) -> None:
        key = record_key(self._tenant_id, self._server_url, kind)
        await self._records.put(self._tenant_id, key, self._sealer.seal(key, value))

    async def forget(self) -> None:
        """Deletes the tenant's tokens, client and metadata for this server."""
        for kind in KINDS:
            await self._records.delete(self._tenant_id, record_key(self._tenant_id, self._server_url, kind))

    async def expires_at(self) -> tuple[bool, float | None]:
        """Whether tokens are stored, and when the access token expires (epoch seconds; None: not said)."""
        raw = await self._get("tokens")
        if raw is None:
            return False, None
        expires_at = json.loads(raw).get("expiresAt")
        return True, None if expires_at is None else float(expires_at)

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        raw = await self._get("tokens")
        if raw is None:
            return None
        record = json.loads(raw)
        expires_at = record.pop("expiresAt", None)
        if expires_at is not None:  # what is left of the lifetime, so the SDK refreshes an expired one
            record["expires_in"] = int(expires_at - self._clock())
        return OAuthToken.model_validate(record)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = tokens.model_dump(mode="json", exclude_none=True)
        expires_in = record.pop("expires_in", None)
        if expires_in is not None:
            record["expiresAt"] = self._clock() + expires_in
        await self._put("tokens", json.dumps(record))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        raw = await self._get("client")
        return None if raw is None else OAuthClientInformationFull.model_validate_json(raw)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._put("client", client_info.model_dump_json(exclude_none=True))

    async def get_metadata(self) -> OAuthMetadata | None:
        """The authorization server's metadata (RFC 8414) found when the tenant authorized."""
        from mcp.shared.auth import OAuthMetadata

        raw = await self._get("metadata")
        return None if raw is None else OAuthMetadata.model_validate_json(raw)

    async def set_metadata(self, metadata: OAuthMetadata) -> None:
        await self._put("metadata", metadata.model_dump_json(exclude_none=True))


class NeedsAuthorization(Exception):
    """A server asks for OAuth and the tenant has no usable tokens: an admin must authorize it first.
    Raised from the SDK's redirect hook, so a turn never waits on a browser."""

    def __init__(self, server_url: str) -> None:
        super().__init__(MCP_NEEDS_AUTHORIZATION)
        self.server_url = server_url


class StoredOAuth:
    """``ports.McpOAuthAuth``: the SDK's provider over a tenant's stored tokens, or None without
    them (no discovery, no registration: a turn without tokens costs one record read).
    ``redirect_uri``: the callback route's URL, named in a registration a turn would make."""

    def __init__(self, redirect_uri: str) -> None:
        self.redirect_uri = redirect_uri

    async def http_auth(self, access: McpOAuthAccess, tenant_id: str, server_url: str) -> Any | None:
        storage = SealedTokenStorage(access.records, access.sealer, tenant_id, server_url)
        if await storage.get_tokens() is None:
            return None
        return turn_auth(storage, server_url, self.redirect_uri)


def turn_auth(storage: SealedTokenStorage, server_url: str, redirect_uri: str) -> Any:
    """The SDK's ``OAuthClientProvider`` (an ``httpx.Auth``) for a turn: it attaches the stored
    tokens and refreshes them (writing the new ones back); with none it raises ``NeedsAuthorization``
    instead of starting a browser flow."""
    from mcp.shared.auth import OAuthClientMetadata

    provider_class = _stored_expiry_provider_class()

    async def refuse(_authorization_url: str) -> None:
        raise NeedsAuthorization(server_url)

    async def no_callback() -> Any:
        raise NeedsAuthorization(server_url)

    metadata = OAuthClientMetadata.model_validate(
        {
            "client_name": "AgentVM",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_post",
        }
    )
    return provider_class(
        server_url, metadata, storage, redirect_handler=refuse, callback_handler=no_callback
    )


def _stored_expiry_provider_class() -> type:
    from mcp.client.auth import OAuthClientProvider

    class StoredExpiryProvider(OAuthClientProvider):
        """The SDK's provider, which also knows when loaded tokens expire (it learns an expiry only
        from a token response), so an expired access token is refreshed before a request, and
        where to refresh it (the stored metadata's token endpoint, not ``<server origin>/token``)."""

        async def _initialize(self) -> None:
            await super()._initialize()
            if self.context.current_tokens is not None and self.context.current_tokens.expires_in is not None:
                self.context.update_token_expiry(self.context.current_tokens)
            if self.context.oauth_metadata is None and isinstance(self.context.storage, SealedTokenStorage):
                self.context.oauth_metadata = await self.context.storage.get_metadata()

    return StoredExpiryProvider
