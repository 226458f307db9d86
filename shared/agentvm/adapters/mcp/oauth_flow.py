"""A tenant's authorization of a remote MCP server, in a browser, across processes.

The SDK's ``OAuthClientProvider`` runs the whole OAuth 2.1 flow inside one connection, waiting for
the browser in between; a hosted runtime cannot wait there (the callback may reach another process
or Lambda). So the flow is split at the browser, with the SDK's own building blocks on both sides
(``mcp.client.auth``: discovery URLs and handlers, dynamic client registration, PKCE, the token
request and response):

1. ``start_authorization`` (``POST /v1/mcp/oauth/authorizations``): an unauthenticated request to
   the server for its ``WWW-Authenticate`` challenge, protected resource metadata, authorization
   server metadata, a client registered for the callback URL, PKCE and a random ``state``. What the
   callback needs (server URL, code verifier, redirect URI, client, metadata) is sealed and stored
   as a **pending authorization** under the state's hash, for ``PENDING_TTL_S``; the admin opens the
   returned ``authorization_url``.
2. ``finish_authorization`` (``GET /v1/mcp/oauth/callback``, no API key: the state is a single-use
   capability): the pending record is *taken* (read and deleted at once, so a state works once),
   the code exchanged at the token endpoint, and the tokens, the client and the metadata stored
   through ``oauth.SealedTokenStorage`` for the tenant that started it.

Every URL the flow sends to (the server's, and the ones its metadata names) must be public unless
private networks are allowed (``AVM_TOOL_ALLOW_PRIVATE_NETWORKS``), as MCP server URLs must.
``AuthorizationFailed`` carries a reason safe to show: no token, code, secret or response body.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urljoin, urlparse

from agentvm.adapters.mcp.oauth import SealedTokenStorage
from agentvm.agent.tools.egress import EgressRefused, check_public
from agentvm.configcentre.sealing import is_sealed

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.shared.auth import (
        OAuthClientInformationFull,
        OAuthClientMetadata,
        OAuthMetadata,
        ProtectedResourceMetadata,
    )

    from agentvm.ports import McpOAuthAccess

log = logging.getLogger("agentvm.mcp")

CALLBACK_PATH = "/v1/mcp/oauth/callback"
PENDING_TTL_S = 600.0  # an authorization URL works this long
_GRANT_TYPES = ["authorization_code", "refresh_token"]
_AS_ERROR = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class AuthorizationFailed(Exception):
    """The authorization could not start or finish; the message is safe to show (no secret)."""


@dataclass(frozen=True, slots=True)
class StartedAuthorization:
    authorization_url: str
    expires_at: float  # epoch seconds: the pending authorization is gone after then


@dataclass(frozen=True, slots=True)
class Connection:
    connected: bool
    expires_at: float | None  # when the access token expires (it is refreshed then), if said


def callback_url(public_url: str | None, request_base_url: str) -> str:
    """The redirect URI: ``AVM_PUBLIC_URL`` + the callback path, else the request's own base URL
    (wrong behind a proxy that rewrites the host: set ``AVM_PUBLIC_URL`` there)."""
    return (public_url or request_base_url).rstrip("/") + CALLBACK_PATH


def pending_key(state: str) -> str:
    """Where the pending authorization of ``state`` is kept: under the state's SHA-256, never the
    state itself (a single-use capability; a store's deleted rows and keys may linger at rest)."""
    return f"mcp-oauth-pending/{hashlib.sha256(state.encode()).hexdigest()}"


def _seal_name(tenant_id: str, key: str) -> str:
    """The name a pending record is sealed under: its tenant too, so a record moved under another
    tenant does not open."""
    return f"{tenant_id}/{key}"


async def start_authorization(
    access: McpOAuthAccess,
    tenant_id: str,
    server_url: str,
    redirect_uri: str,
    *,
    allow_private: bool = False,
    clock: Callable[[], float] = time.time,
) -> StartedAuthorization:
    """Discovery, registration and PKCE for ``server_url``; stores the pending authorization and
    returns the URL the admin opens. Raises ``AuthorizationFailed``."""
    from mcp.client.auth import PKCEParameters
    from mcp.client.auth.oauth2 import check_registration_usable
    from mcp.client.auth.utils import (
        build_oauth_authorization_server_metadata_discovery_urls,
        build_protected_resource_metadata_discovery_urls,
        create_client_registration_request,
        create_oauth_metadata_request,
        extract_resource_metadata_from_www_auth,
        extract_scope_from_www_auth,
        get_client_metadata_scopes,
        handle_auth_metadata_response,
        handle_protected_resource_response,
        handle_registration_response,
        validate_metadata_issuer,
    )
    from mcp.shared._httpx_utils import create_mcp_http_client

    origin = _origin(server_url)
    try:
        async with create_mcp_http_client() as http:

            async def send(request: Any) -> Any:
                if not allow_private:
                    await check_public(str(request.url))
                return await http.send(request)

            challenge = await send(
                http.build_request(
                    "POST",
                    server_url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={"accept": "application/json, text/event-stream"},
                )
            )
            if challenge.status_code != 401:
                raise AuthorizationFailed(
                    f"the server did not ask for OAuth authorization (HTTP {challenge.status_code})"
                )
            resource: ProtectedResourceMetadata | None = None
            for url in build_protected_resource_metadata_discovery_urls(
                extract_resource_metadata_from_www_auth(challenge), server_url
            ):
                resource = await handle_protected_resource_response(
                    await send(create_oauth_metadata_request(url))
                )
                if resource is not None:
                    break
            issuer = str(resource.authorization_servers[0]) if resource is not None else None
            metadata: OAuthMetadata | None = None
            for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
                ok, found = await handle_auth_metadata_response(
                    await send(create_oauth_metadata_request(url))
                )
                if not ok:
                    break
                if found is not None:
                    if issuer is not None:
                        validate_metadata_issuer(found, issuer)
                    metadata = found
                    break
            scope = get_client_metadata_scopes(
                extract_scope_from_www_auth(challenge), resource, metadata, _GRANT_TYPES
            )
            stored = SealedTokenStorage(access.records, access.sealer, tenant_id, server_url)
            client = _reusable(await stored.get_client_info(), redirect_uri, metadata, clock())
            if client is None:  # the first time, or the registration no longer fits: register again
                client_metadata = _client_metadata(redirect_uri, scope)
                client = await handle_registration_response(
                    await send(create_client_registration_request(metadata, client_metadata, origin))
                )
                check_registration_usable(client)
                if metadata is not None:
                    client.issuer = str(metadata.issuer)
    except AuthorizationFailed:
        raise
    except EgressRefused as exc:
        raise AuthorizationFailed(str(exc)) from None
    except Exception as exc:  # discovery or registration refused: the kind only (bodies may echo secrets)
        log.warning("MCP OAuth authorization could not start", extra={"error": type(exc).__name__})
        raise AuthorizationFailed(f"discovery or client registration failed ({type(exc).__name__})") from None

    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    endpoint = str(metadata.authorization_endpoint) if metadata is not None else urljoin(origin, "/authorize")
    query = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce.code_challenge,
        "code_challenge_method": "S256",
    }
    if resource is not None:  # RFC 8707, as the SDK sends it (and the token request will too)
        query["resource"] = _resource_url(server_url, resource)
    if scope:
        query["scope"] = scope
    pending = {
        "serverUrl": server_url,
        "redirectUri": redirect_uri,
        "codeVerifier": pkce.code_verifier,
        "scope": scope,
        "client": client.model_dump(mode="json", exclude_none=True),
        "metadata": None if metadata is None else metadata.model_dump(mode="json", exclude_none=True),
        "resource": None if resource is None else resource.model_dump(mode="json", exclude_none=True),
    }
    key = pending_key(state)
    expires_at = clock() + PENDING_TTL_S
    sealed = access.sealer.seal(_seal_name(tenant_id, key), json.dumps(pending))
    await access.records.put(tenant_id, key, sealed, expires_at=expires_at)
    return StartedAuthorization(f"{endpoint}?{urlencode(query)}", expires_at)


def _reusable(
    client: OAuthClientInformationFull | None,
    redirect_uri: str,
    metadata: OAuthMetadata | None,
    now: float,
) -> OAuthClientInformationFull | None:
    """The client this tenant registered with the server before, if it still fits: the same
    redirect URI, the same authorization server, a secret that has not expired. So authorizing a
    server again (new scopes, a revoked token) does not leave a new registration behind each time."""
    if client is None or redirect_uri not in [str(uri) for uri in client.redirect_uris or []]:
        return None
    if metadata is not None and client.issuer != str(metadata.issuer):
        return None
    expires = client.client_secret_expires_at
    if expires and expires <= now:
        return None
    return client


async def finish_authorization(
    access: McpOAuthAccess,
    state: str,
    code: str | None,
    *,
    error: str | None = None,
    iss: str | None = None,
    allow_private: bool = False,
) -> tuple[str, str]:
    """Takes the pending authorization of ``state`` (once) and exchanges ``code`` for tokens, stored
    for its tenant: returns (tenant, server URL). ``error``: the authorization server's refusal (the
    state is used up all the same). Raises ``AuthorizationFailed``; nothing is stored then."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.auth.utils import validate_authorization_response_iss
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, ProtectedResourceMetadata

    key = pending_key(state)
    taken = await access.records.take(key) if 0 < len(state) <= 128 else None
    if taken is None:
        raise AuthorizationFailed("this authorization is unknown, expired or already used; start it again")
    tenant_id, sealed = taken
    if error is not None:
        shown = error if _AS_ERROR.match(error) else "an error"
        raise AuthorizationFailed(f"the authorization server answered {shown}; nothing was stored")
    if not code:
        raise AuthorizationFailed("the authorization server sent no code; nothing was stored")
    try:
        if not is_sealed(sealed):  # AgentVM writes none in plaintext: not its own
            raise ValueError("not sealed")
        pending = json.loads(access.sealer.open(_seal_name(tenant_id, key), sealed))
    except Exception as exc:  # a server secret rotated twice since, or a record not sealed here
        log.warning("MCP OAuth pending authorization unreadable", extra={"error": type(exc).__name__})
        raise AuthorizationFailed("this authorization could not be read; start it again") from None
    server_url = pending["serverUrl"]
    client = OAuthClientInformationFull.model_validate(pending["client"])
    metadata = None if pending["metadata"] is None else OAuthMetadata.model_validate(pending["metadata"])
    resource = (
        None if pending["resource"] is None else ProtectedResourceMetadata.model_validate(pending["resource"])
    )
    storage = SealedTokenStorage(access.records, access.sealer, tenant_id, server_url)
    provider = OAuthClientProvider(
        server_url, _client_metadata(pending["redirectUri"], pending["scope"]), storage
    )
    provider.context.client_info = client
    provider.context.oauth_metadata = metadata
    provider.context.protected_resource_metadata = resource
    try:
        validate_authorization_response_iss(iss, metadata)
        request = await provider._exchange_token_authorization_code(code, pending["codeVerifier"])
        if not allow_private:
            await check_public(str(request.url))
        async with create_mcp_http_client() as http:
            response = await http.send(request)
        await provider._handle_token_response(response)  # writes the tokens through ``storage``
    except EgressRefused as exc:
        raise AuthorizationFailed(str(exc)) from None
    except Exception as exc:  # the kind only: a token endpoint's body may echo the code or a secret
        log.warning("MCP OAuth code exchange failed", extra={"error": type(exc).__name__})
        raise AuthorizationFailed(
            f"the code could not be exchanged for tokens ({type(exc).__name__})"
        ) from None
    await storage.set_client_info(client)
    if metadata is not None:
        await storage.set_metadata(metadata)
    return tenant_id, server_url


async def connection(access: McpOAuthAccess, tenant_id: str, server_url: str) -> Connection:
    storage = SealedTokenStorage(access.records, access.sealer, tenant_id, server_url)
    return Connection(*await storage.expires_at())


async def forget(access: McpOAuthAccess, tenant_id: str, server_url: str) -> None:
    """Forgets the tenant's tokens, client and metadata for the server (its sessions already open
    keep theirs until they close)."""
    await SealedTokenStorage(access.records, access.sealer, tenant_id, server_url).forget()


def _client_metadata(redirect_uri: str, scope: str | None) -> OAuthClientMetadata:
    from mcp.shared.auth import OAuthClientMetadata

    return OAuthClientMetadata.model_validate(
        {
            "client_name": "AgentVM",
            "redirect_uris": [redirect_uri],
            "grant_types": _GRANT_TYPES,
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_post",
            "scope": scope,
        }
    )


def _origin(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}"


def _resource_url(server_url: str, resource: Any) -> str:
    """RFC 8707's resource: the protected resource metadata's when it covers the server, else the
    server URL (the SDK's rule, ``OAuthContext.get_resource_url``)."""
    from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

    url = resource_url_from_server_url(server_url)
    configured = str(resource.resource) if resource is not None and resource.resource else None
    if configured and check_resource_allowed(requested_resource=url, configured_resource=configured):
        return configured
    return url


__all__ = [
    "CALLBACK_PATH",
    "PENDING_TTL_S",
    "AuthorizationFailed",
    "Connection",
    "StartedAuthorization",
    "callback_url",
    "connection",
    "finish_authorization",
    "forget",
    "pending_key",
    "start_authorization",
]
