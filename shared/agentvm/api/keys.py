"""API keys over HTTP: ``/v1/auth/keys`` creates, lists and revokes the caller's tenant's keys.

Admin keys only, the caller's tenant only (SECURITY.md, "API keys"). A new key's token is in the
create answer only; a key's rate limit may not exceed the server's (only the operator, with ``avm
keys create --rate-limit``, lifts a key above it).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from agentvm.api import examples as doc
from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import MAX_ID
from agentvm.errors import BadRequest, Forbidden, NotFound

MAX_KEY_RATE_LIMIT = 1_000_000  # requests per minute; above the server's limit is the operator's anyway

router = APIRouter(prefix="/auth/keys", tags=["auth"])


def _client_only() -> list[Literal["admin", "client"]]:
    return ["client"]


class CreateKey(BaseModel):
    # camelCase like every other field of the API; `rate_limit_per_minute` (earlier versions) is
    # still accepted (validate_by_name).
    model_config = ConfigDict(
        extra="forbid",
        validate_by_name=True,
        json_schema_extra=examples({"scopes": ["client"], "name": "web app", "rateLimitPerMinute": 60}, {}),
    )

    scopes: list[Literal["admin", "client"]] = Field(default_factory=_client_only, min_length=1, max_length=2)
    name: str | None = Field(default=None, max_length=200)
    # At least 1 (0 would mean unlimited) and at most the server's limit: only the operator, with
    # `avm keys create --rate-limit`, may lift a key above it. Booleans are not numbers (strict).
    rate_limit_per_minute: StrictInt | None = Field(
        default=None, ge=1, le=MAX_KEY_RATE_LIMIT, alias="rateLimitPerMinute"
    )


@router.post(
    "",
    status_code=201,
    response_model=None,
    responses={**ok(201, "NewKey", doc.NEW_KEY, "the new key and its token"), **error_responses(400, 409)},
)
async def create_key(body: CreateKey, runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    """Create a key for the caller's tenant. The token is in this response only: store it now."""
    principal = admin(caller)
    if runtime.auth is None:
        raise BadRequest("API keys are disabled in the open dev mode")
    ceiling = runtime.rate_limiter.per_minute if runtime.rate_limiter is not None else 0
    if body.rate_limit_per_minute is not None and 0 < ceiling < body.rate_limit_per_minute:
        raise Forbidden(
            f"rateLimitPerMinute above the server's limit ({ceiling}) can only be set by the "
            "operator (avm keys create --rate-limit)"
        )
    from agentvm.security.tenants import refuse_deleted

    await refuse_deleted(runtime, principal.tenant_id)  # a key still cached while it is deleted
    if runtime.tenant_limits is not None:  # keys must not multiply the per-key limits
        await runtime.tenant_limits.check_key_room(runtime.auth.keys, principal.tenant_id)
    record, token = await runtime.auth.keys.create(
        principal.tenant_id, body.scopes, name=body.name, rate_limit_per_minute=body.rate_limit_per_minute
    )
    return {"key": record.to_public(), "token": token}


@router.get(
    "",
    response_model=None,
    responses=ok(200, "KeyList", doc.KEYS, "the tenant's keys, revoked ones included"),
)
async def list_keys(runtime: RuntimeDep, caller: Caller) -> dict[str, Any]:
    principal = admin(caller)
    if runtime.auth is None:
        return {"keys": []}
    return {"keys": [k.to_public() for k in await runtime.auth.keys.list(principal.tenant_id)]}


@router.delete(
    "/{key_id}",
    response_model=None,
    responses={**ok(200, "OneKey", doc.REVOKED_KEY, "the revoked key"), **error_responses(400, 404)},
)
async def revoke_key(
    runtime: RuntimeDep, caller: Caller, key_id: str = Path(min_length=1, max_length=MAX_ID)
) -> dict[str, Any]:
    """Revoke at once in this process; other processes stop accepting it within the cache bound."""
    principal = admin(caller)
    record = None
    if runtime.auth is not None:
        record = await runtime.auth.revoke(key_id, tenant_id=principal.tenant_id)
    if record is None:
        raise NotFound(f"API key not found: {key_id}")
    return {"key": record.to_public()}


__all__ = ["CreateKey", "router"]
