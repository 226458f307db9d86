"""OAuth tokens of remote MCP servers, kept per tenant and per server URL, sealed at rest.

The official MCP SDK runs the OAuth 2.1 flow (``mcp.client.auth.OAuthClientProvider``: protected
resource metadata, authorization server metadata, dynamic client registration, PKCE, refresh); it
reads and writes what it learns through a ``TokenStorage``. ``SealedTokenStorage`` is that storage
over a plain text record store (``OAuthRecords``): every record is sealed with the config centre's
``SecretSealer`` under a name binding the tenant and the server URL, so a record copied under
another tenant's name does not open, and neither tokens nor client secrets are plaintext at rest.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

    from agentvm.configcentre.sealing import SecretSealer


class OAuthRecords(Protocol):
    """Where sealed OAuth records live (a host's key-value table); values are opaque text."""

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, value: str) -> None: ...


def record_key(tenant_id: str, server_url: str, kind: str) -> str:
    """The key of one record: the tenant, a hash of the server URL (no URL in a key), the kind."""
    digest = hashlib.sha256(server_url.encode()).hexdigest()[:32]
    return f"mcp-oauth/{tenant_id}/{digest}/{kind}"


class SealedTokenStorage:
    """The SDK's ``TokenStorage`` for one tenant and one server URL."""

    def __init__(
        self,
        records: OAuthRecords,
        sealer: SecretSealer,
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
        stored = await self._records.get(key)
        return None if stored is None else self._sealer.open(key, stored)

    async def _put(self, kind: str, value: str) -> None:
        key = record_key(self._tenant_id, self._server_url, kind)
        await self._records.put(key, self._sealer.seal(key, value))

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


class NeedsAuthorization(Exception):
    """A server asks for OAuth and the tenant has no usable tokens: an admin must authorize it first.
    Raised from the SDK's redirect hook, so a turn never waits on a browser."""

    def __init__(self, server_url: str) -> None:
        super().__init__("this MCP server needs OAuth authorization; start it with the authorize route")
        self.server_url = server_url


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
        from a token response), so an expired access token is refreshed before a request."""

        async def _initialize(self) -> None:
            await super()._initialize()
            if self.context.current_tokens is not None and self.context.current_tokens.expires_in is not None:
                self.context.update_token_expiry(self.context.current_tokens)

    return StoredExpiryProvider
