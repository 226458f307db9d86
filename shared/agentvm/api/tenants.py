"""The tenant registry over HTTP: ``/v1/tenants`` (platform admins only), and Deepractice AgentVM's
RPC shapes as aliases (``/v1/tenants/create|get|update|delete|list``). See docs/tenants.md; what
the routes do is in ``agentvm.security.tenants``.

A platform admin is an admin key of the platform tenant (``AVM_PLATFORM_TENANT``), or anyone in the
open dev mode. Every other caller gets ``403 forbidden``, whatever the tenant id it names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from agentvm.api.deps import Caller, RuntimeDep, admin
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok, stated
from agentvm.errors import BadRequest, Forbidden
from agentvm.records import TenantLimitOverrides
from agentvm.security import tenants
from agentvm.security.apikeys import TENANT_RE

if TYPE_CHECKING:
    from agentvm.records import TenantStatus
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

MAX_PAGE = 100
_ACME = {"name": "Acme Corp", "description": "Resells agents to its own customers"}
_TENANT = {
    "tenantId": "tenant_mjw1x2y3_0k4m5n6p7q",
    **_ACME,
    "createdAt": 1767225600000,
    "updatedAt": 1767225600000,
    "status": "active",
}
_DELETED = {
    "deleted": True,
    "tenantId": "acme",
    "revokedKeys": 2,
    "deletedBudgets": 1,
    "deletedResourceVersions": 3,
    "removedSettings": 1,
    "cancelledToolCalls": 0,
    "deletedConversations": 12,
    "conversations": "purged",
}

# On AWS a tenant's conversations are kept and marked for a purge (docs/tenants.md).
_KEPT = {**{k: v for k, v in _DELETED.items() if k != "deletedConversations"}, "conversations": "kept"}


# A tenant id: 1-64 characters of A-Z a-z 0-9 . _ - (security/apikeys.py, TENANT_RE); a new one is
# checked by check_new_id (its own message), so stated; any other longer one names no tenant.
MAX_TENANT_ID = 64
MAX_TENANT_LIMIT = 1_000_000  # connections, keys, requests per minute: far above any real tenant
NewTenantId = Annotated[StrictStr, stated(maxLength=MAX_TENANT_ID, pattern=f"^{TENANT_RE.pattern}$")]
TENANT_ID = Path(min_length=1, max_length=MAX_TENANT_ID)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewTenant(_Body):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra=examples(_ACME, {**_ACME, "tenantId": "acme"})
    )

    name: StrictStr = Field(min_length=1, max_length=200)
    description: StrictStr | None = Field(default=None, max_length=2000)
    tenantId: NewTenantId | None = Field(
        default=None,
        description="register a tenant id in use already (keys made with avm keys); default: a new id",
    )


class TenantLimits(_Body):
    """What the tenant may hold or spend, whatever its number of keys (SECURITY.md, "Per-tenant
    limits"); null keeps the server's setting, 0 = no limit."""

    maxConnections: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_TENANT_LIMIT,
        description="live WebSocket connections (AVM_MAX_CONNECTIONS_PER_TENANT)",
    )
    maxApiKeys: StrictInt | None = Field(
        default=None, ge=0, le=MAX_TENANT_LIMIT, description="active API keys (AVM_MAX_API_KEYS_PER_TENANT)"
    )
    rateLimitPerMinute: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_TENANT_LIMIT,
        description="requests per minute of all its keys (AVM_TENANT_RATE_LIMIT_PER_MINUTE)",
    )
    storageBytes: StrictInt | None = Field(
        default=None,
        ge=0,
        le=1 << 60,
        description="bytes it may store, every write path together (AVM_TENANT_STORAGE_BYTES)",
    )


class TenantChanges(_Body):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples(
            {"name": "Acme"}, {"description": None}, {"limits": {"maxConnections": 5000, "maxApiKeys": None}}
        ),
    )

    name: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    description: StrictStr | None = Field(default=None, max_length=2000, description="null removes it")
    limits: TenantLimits | None = Field(default=None, description="null: the server's limits")


class TenantRef(_Body):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=examples({"tenantId": "acme"}))

    tenantId: StrictStr = Field(min_length=1, max_length=MAX_TENANT_ID)


class AliasUpdate(TenantChanges):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra=examples({"tenantId": "acme", "name": "Acme"})
    )

    tenantId: StrictStr = Field(min_length=1, max_length=MAX_TENANT_ID)


class Tenant(BaseModel):
    """A tenant: Deepractice's ``Tenant`` plus ``status`` (fields left unset are absent)."""

    model_config = ConfigDict(json_schema_extra=examples(_TENANT))

    tenantId: str
    name: str
    description: str | None = None
    createdAt: int = Field(description="epoch milliseconds")
    updatedAt: int = Field(description="epoch milliseconds")
    status: Literal["active", "deleting", "deleted"] = Field(
        description="deleting: a deletion was interrupted, delete again to finish it; deleted: a "
        "tombstone (listed with ?status=deleted)"
    )
    deletedAt: int | None = Field(default=None, description="when its deletion started")
    purgedAt: int | None = Field(
        default=None, description="when its conversations were deleted; absent while they are kept"
    )
    limits: TenantLimits | None = Field(
        default=None, description="a platform admin's limits for this tenant; absent: the server's"
    )


class TenantPage(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples({"tenants": [_TENANT], "next": None}))

    tenants: list[Tenant]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class TenantDeletion(BaseModel):
    model_config = ConfigDict(json_schema_extra=examples(_DELETED))

    deleted: bool
    tenantId: str
    revokedKeys: int
    deletedBudgets: int
    deletedResourceVersions: int
    removedSettings: int
    cancelledToolCalls: int
    deletedConversations: int | None = Field(default=None, description="absent when they are kept")
    conversations: Literal["purged", "kept"] = Field(
        description="purged at once (local host), or kept for a purge (AWS; docs/tenants.md)"
    )


_SHOWN: dict[str | None, tuple[TenantStatus, ...]] = {
    None: tenants.LISTED,
    "all": ("active", "deleting", "deleted"),
    **{s: (s,) for s in ("active", "deleting", "deleted")},
}


router = APIRouter(prefix="/tenants", tags=["tenants"])


def platform(runtime: Runtime, caller: Principal) -> Principal:
    principal = admin(caller)
    if runtime.auth is not None and principal.tenant_id != runtime.platform_tenant:
        raise Forbidden("tenants are managed by platform admins (an admin key of the platform tenant)")
    return principal


async def create(runtime: Runtime, body: NewTenant) -> dict[str, Any]:
    tenant = await tenants.register(
        runtime, name=body.name, description=body.description, tenant_id=body.tenantId
    )
    return tenant.to_wire()


async def update(runtime: Runtime, tenant_id: str, body: TenantChanges) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True, include={"name", "description"})
    if "name" in changes and changes["name"] is None:
        raise BadRequest("name: cannot be null (only description can be removed)")
    if "limits" in body.model_fields_set:
        limits = None if body.limits is None else body.limits.model_dump()
        changes["limits"] = None if limits is None else TenantLimitOverrides(**limits)
    updated = await tenants.update(runtime, tenant_id, changes)
    if runtime.tenant_limits is not None:
        runtime.tenant_limits.forget(tenant_id)  # this process at once; others within its cache
    return updated.to_wire()


_ONE = ok(200, Tenant, _TENANT, "the tenant")
_GONE = ok(200, TenantDeletion, _DELETED, "what was deleted", more={"kept (AWS)": _KEPT})


# -- Deepractice AgentVM's RPC shapes (registered first: "list" is not a tenant id) ------------
@router.post(
    "/create",
    status_code=201,
    response_model=None,
    responses={**ok(201, Tenant, _TENANT, "the new tenant"), **error_responses(400, 409)},
)
async def alias_create(runtime: RuntimeDep, caller: Caller, body: NewTenant) -> dict[str, Any]:
    """Deepractice alias of ``POST /v1/tenants``: the Tenant."""
    platform(runtime, caller)
    return await create(runtime, body)


@router.post("/get", response_model=None, responses={**_ONE, **error_responses(400, 404)})
async def alias_get(runtime: RuntimeDep, caller: Caller, body: TenantRef) -> dict[str, Any]:
    """Deepractice alias of ``GET /v1/tenants/{tenantId}``."""
    platform(runtime, caller)
    return (await tenants.get(runtime, body.tenantId)).to_wire()


@router.get("/list", response_model=None, responses=ok(200, list[Tenant], [_TENANT], "every tenant"))
async def alias_list(runtime: RuntimeDep, caller: Caller) -> list[dict[str, Any]]:
    """Deepractice alias of ``GET /v1/tenants``: every tenant (deleted ones left out), a bare
    array by id."""
    platform(runtime, caller)
    return [t.to_wire() for t in await tenants.every(runtime)]


@router.post("/update", response_model=None, responses={**_ONE, **error_responses(400, 404, 409)})
async def alias_update(runtime: RuntimeDep, caller: Caller, body: AliasUpdate) -> dict[str, Any]:
    """Deepractice alias of ``PATCH /v1/tenants/{tenantId}``."""
    platform(runtime, caller)
    return await update(runtime, body.tenantId, body)


@router.post("/delete", response_model=None, responses={**_GONE, **error_responses(400, 404, 409)})
async def alias_delete(runtime: RuntimeDep, caller: Caller, body: TenantRef) -> dict[str, Any]:
    """Deepractice alias of ``DELETE /v1/tenants/{tenantId}``: ``{"deleted": true, ...}``."""
    return await tenants.delete(runtime, body.tenantId, by=platform(runtime, caller).key_id)


# -- ours ------------------------------------------------------------------------------------
@router.post(
    "",
    status_code=201,
    response_model=None,
    responses={**ok(201, Tenant, _TENANT, "the new tenant"), **error_responses(400, 409)},
)
async def create_tenant(runtime: RuntimeDep, caller: Caller, body: NewTenant) -> dict[str, Any]:
    """Register a tenant: a new id ``tenant_…``, or ``tenantId`` to register one in use already.
    An id registered before (deleted ones included) is ``409 conflict``."""
    platform(runtime, caller)
    return await create(runtime, body)


@router.get(
    "",
    response_model=None,
    responses={**ok(200, TenantPage, {"tenants": [_TENANT], "next": None}, "a page"), **error_responses(400)},
)
async def list_tenants(
    runtime: RuntimeDep,
    caller: Caller,
    status: Literal["active", "deleting", "deleted", "all"] | None = Query(
        default=None, description="default: active and deleting; deleted: the tombstones"
    ),
    limit: int = Query(default=50, ge=1, le=MAX_PAGE),
    cursor: str | None = Query(
        default=None, max_length=MAX_TENANT_ID, description="``next`` of the previous page"
    ),
) -> dict[str, Any]:
    """The registry by tenant id, a page at a time."""
    platform(runtime, caller)
    page, after = await tenants.listing(runtime, statuses=_SHOWN[status], limit=limit, after=cursor)
    return {"tenants": [t.to_wire() for t in page], "next": after}


@router.get("/{tenant_id}", response_model=None, responses={**_ONE, **error_responses(400, 404)})
async def get_tenant(runtime: RuntimeDep, caller: Caller, tenant_id: str = TENANT_ID) -> dict[str, Any]:
    """One tenant (a deleted one is ``404``)."""
    platform(runtime, caller)
    return (await tenants.get(runtime, tenant_id)).to_wire()


@router.patch("/{tenant_id}", response_model=None, responses={**_ONE, **error_responses(400, 404, 409)})
async def update_tenant(
    runtime: RuntimeDep, caller: Caller, body: TenantChanges, tenant_id: str = TENANT_ID
) -> dict[str, Any]:
    """Change the name or the description (``null`` removes it). A tenant being deleted is
    ``409 conflict``."""
    platform(runtime, caller)
    return await update(runtime, tenant_id, body)


@router.delete("/{tenant_id}", response_model=None, responses={**_GONE, **error_responses(400, 404, 409)})
async def delete_tenant(runtime: RuntimeDep, caller: Caller, tenant_id: str = TENANT_ID) -> dict[str, Any]:
    """Delete a tenant: its keys are revoked at once, its budgets, resources and settings
    deleted, its conversations purged or kept (docs/tenants.md). Again: ``404``; the platform
    tenant: ``409``."""
    return await tenants.delete(runtime, tenant_id, by=platform(runtime, caller).key_id)


__all__ = ["router"]
