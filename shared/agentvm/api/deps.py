"""The HTTP API's dependencies (FastAPI ``Depends``): who calls, and what the routes run on.

``create_app`` keeps the runtime and the open dev mode's tenant on ``app.state``; routes receive
them through ``RuntimeDep`` and ``Caller``, never through a closure. ``authenticate`` runs before
every ``/v1`` route (a dependency of the ``/v1`` router, with ``bearer_scheme``, which only documents
the scheme); it leaves the caller on ``request.state.principal``.

``admin`` is a check, not a dependency: a route calls it in its body, after FastAPI validated the
request, so a client key with a malformed request is told 400 (as every caller is), not 403.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request  # noqa: TC002 (FastAPI reads annotations)
from fastapi.security import HTTPBearer

from agentvm.errors import Forbidden, RateLimited, Unauthorized
from agentvm.logs import bind
from agentvm.runtime import Runtime  # noqa: TC001 (FastAPI reads annotations)
from agentvm.security.auth import Principal

# Documents the scheme in the OpenAPI; never refuses anything itself (``authenticate`` decides).
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    bearerFormat="avm_<keyId>_<secret>",
    description="An AgentVM API key (SECURITY.md). The /v1 routes need one with the admin scope.",
)


async def get_runtime(request: Request) -> Runtime:
    """The runtime ``create_app`` was given."""
    return request.app.state.runtime


async def get_caller(request: Request) -> Principal:
    """The authenticated caller (``/v1`` routes only: ``authenticate`` ran first)."""
    return request.state.principal


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
Caller = Annotated[Principal, Depends(get_caller)]


def admin(principal: Principal) -> Principal:
    """The caller, if its key has the admin scope."""
    if not principal.allows("admin"):
        raise Forbidden("this route needs an API key with the admin scope")
    return principal


async def principal_of(runtime: Runtime, headers: Any, open_tenant: str | None) -> Principal:
    """Who sends this request: its bearer key, or the open dev mode's tenant."""
    if runtime.auth is None:
        if open_tenant is None:
            raise Unauthorized("authentication is not configured on this server")
        return Principal(tenant_id=open_tenant, key_id=None, scopes=frozenset({"admin", "client"}))
    principal = await runtime.auth.from_headers(headers)
    if principal is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <API key>'")
    return principal


async def authenticate(request: Request, runtime: RuntimeDep) -> None:
    """Runs before every ``/v1`` route (unknown paths are plain 404s, as without a key). An
    address past its minute of 401s is answered 429 before its key is read (ratelimit.py)."""
    await admit(request, runtime, request.headers)


async def admit(request: Request, runtime: Runtime, headers: Any) -> Principal:
    """The caller of ``request`` by these headers (``authenticate``'s, or the Managed Agents API's
    ``x-api-key`` read as a bearer key), rate-limited and left on ``request.state.principal``."""
    limiter = runtime.rate_limiter
    source = request.client.host if request.client else "?"
    if limiter is not None:
        try:
            limiter.check_unauthorized(source)
        except RateLimited:
            if runtime.auth is None or not runtime.auth.recently_verified(request.headers):
                raise
    try:
        principal = await principal_of(runtime, headers, request.app.state.open_tenant)
    except Unauthorized:
        if limiter is not None:
            await limiter.hit_unauthorized(source)  # the one past the limit is answered 429
        raise
    bind(tenant_id=principal.tenant_id)  # the request's log lines carry it (/v1/logs)
    if runtime.rate_limiter is not None:
        await runtime.rate_limiter.hit(principal)
    request.state.principal = principal
    return principal


__all__ = [
    "Caller",
    "RuntimeDep",
    "admin",
    "admit",
    "authenticate",
    "bearer_scheme",
    "get_caller",
    "get_runtime",
    "principal_of",
]
