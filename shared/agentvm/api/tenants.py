"""The tenant registry over HTTP: ``/v1/tenants`` (platform admins only), and Deepractice AgentVM's
RPC shapes as aliases (``/v1/tenants/create|get|update|delete|list``). See docs/tenants.md.

A platform admin is an admin key of the platform tenant (``AVM_PLATFORM_TENANT``), or anyone in the
open dev mode. Every other caller gets ``403 forbidden``, whatever the tenant id it names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.errors import BadRequest, Conflict, Forbidden, NotFound
from agentvm.records import TenantRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentvm.ports import TenantStore
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

MAX_PAGE = 100
_ACME = {"name": "Acme Corp", "description": "Resells agents to its own customers"}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewTenant(_Body):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [_ACME, {**_ACME, "tenantId": "acme"}]}
    )

    name: StrictStr = Field(min_length=1, max_length=200)
    description: StrictStr | None = Field(default=None, max_length=2000)
    tenantId: StrictStr | None = Field(
        default=None, description="register an existing tenant id (keys made with avm keys); default: new"
    )


class TenantChanges(_Body):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{"name": "Acme"}]})

    name: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    description: StrictStr | None = Field(default=None, max_length=2000)


class TenantRef(_Body):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"tenantId": "acme"}]}
    )

    tenantId: StrictStr = Field(min_length=1)


class AliasUpdate(TenantChanges):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"tenantId": "acme", "name": "Acme"}]}
    )

    tenantId: StrictStr = Field(min_length=1)


def tenant_routes(
    runtime: Runtime,
    errors: Callable[..., dict[int | str, dict[str, Any]]],
    admin: Callable[[Request], Principal],
) -> APIRouter:
    router = APIRouter(prefix="/tenants", tags=["tenants"])

    def platform(request: Request) -> Principal:
        principal = admin(request)
        if runtime.auth is not None and principal.tenant_id != runtime.platform_tenant:
            raise Forbidden("tenants are managed by platform admins (an admin key of the platform tenant)")
        return principal

    def store() -> TenantStore:
        if runtime.tenants is None:
            raise NotFound("this server has no tenant registry")
        return runtime.tenants

    async def found(tenant_id: str) -> TenantRecord:
        tenant = await store().get_tenant(tenant_id)
        if tenant is None:
            raise NotFound("Tenant not found")
        return tenant

    async def create(body: NewTenant) -> dict[str, Any]:
        from agentvm.security.apikeys import check_tenant_id

        now = runtime.clock.now_ms()
        try:
            tenant_id = check_tenant_id(body.tenantId) if body.tenantId else runtime.ids.new("tenant")
        except BadRequest as exc:
            raise BadRequest(f"tenantId: {exc.message}") from None
        tenant = TenantRecord(
            tenantId=tenant_id, name=body.name, description=body.description, createdAt=now, updatedAt=now
        )
        if not await store().create_tenant(tenant):
            raise Conflict(f"tenant {tenant_id!r} exists already")
        return tenant.to_wire()

    async def update(tenant_id: str, body: TenantChanges) -> dict[str, Any]:
        tenant = await found(tenant_id)
        changes = body.model_dump(exclude_unset=True)
        if changes.get("name", "") is None:
            raise BadRequest("name: cannot be null")
        tenant = tenant.model_copy(update={**changes, "updatedAt": runtime.clock.now_ms()})
        await store().put_tenant(tenant)
        return tenant.to_wire()

    async def delete(tenant_id: str, by: str | None) -> dict[str, Any]:
        from agentvm.api.tenant_deletion import delete_tenant_data

        if tenant_id == runtime.platform_tenant:
            raise Conflict("the platform tenant cannot be deleted")
        await found(tenant_id)
        done = await delete_tenant_data(runtime, tenant_id, by=by)
        await store().delete_tenant(tenant_id)
        return {"deleted": True, **done}

    # -- Deepractice AgentVM's RPC shapes (registered first: "list" is not a tenant id) ------------
    @router.post("/create", status_code=201, responses=errors(400, 409))
    async def alias_create(request: Request, body: NewTenant) -> dict[str, Any]:
        """Deepractice alias of ``POST /v1/tenants``: the Tenant."""
        platform(request)
        return await create(body)

    @router.post("/get", responses=errors(400, 404))
    async def alias_get(request: Request, body: TenantRef) -> dict[str, Any]:
        """Deepractice alias of ``GET /v1/tenants/{tenantId}``."""
        platform(request)
        return (await found(body.tenantId)).to_wire()

    @router.get("/list")
    async def alias_list(request: Request) -> list[dict[str, Any]]:
        """Deepractice alias of ``GET /v1/tenants``: every tenant, a bare array, oldest first."""
        platform(request)
        return [t.to_wire() for t in await store().list_tenants()]

    @router.post("/update", responses=errors(400, 404))
    async def alias_update(request: Request, body: AliasUpdate) -> dict[str, Any]:
        """Deepractice alias of ``PATCH /v1/tenants/{tenantId}``."""
        platform(request)
        return await update(
            body.tenantId, TenantChanges(**body.model_dump(exclude={"tenantId"}, exclude_unset=True))
        )

    @router.post("/delete", responses=errors(400, 404, 409))
    async def alias_delete(request: Request, body: TenantRef) -> dict[str, Any]:
        """Deepractice alias of ``DELETE /v1/tenants/{tenantId}``: ``{"deleted": true, ...}``."""
        return await delete(body.tenantId, platform(request).key_id)

    # -- ours ------------------------------------------------------------------------------------
    @router.post("", status_code=201, responses=errors(400, 409))
    async def create_tenant(request: Request, body: NewTenant) -> dict[str, Any]:
        """Register a tenant (a new id ``tenant_…``, or ``tenantId`` to register an existing one)."""
        platform(request)
        return await create(body)

    @router.get("")
    async def list_tenants(
        request: Request,
        limit: int = Query(default=50, ge=1, le=MAX_PAGE),
        cursor: int = Query(default=0, ge=0),
    ) -> dict[str, Any]:
        """The registry, oldest first; ``next`` pages on."""
        platform(request)
        tenants = await store().list_tenants()
        more = cursor + limit < len(tenants)
        return {
            "tenants": [t.to_wire() for t in tenants[cursor : cursor + limit]],
            "next": cursor + limit if more else None,
        }

    @router.get("/{tenant_id}", responses=errors(404))
    async def get_tenant(request: Request, tenant_id: str) -> dict[str, Any]:
        platform(request)
        return (await found(tenant_id)).to_wire()

    @router.patch("/{tenant_id}", responses=errors(400, 404))
    async def update_tenant(request: Request, tenant_id: str, body: TenantChanges) -> dict[str, Any]:
        """Change the name or description."""
        platform(request)
        return await update(tenant_id, body)

    @router.delete("/{tenant_id}", responses=errors(404, 409))
    async def delete_tenant(request: Request, tenant_id: str) -> dict[str, Any]:
        """Delete a tenant: its keys are revoked at once, its budgets, resources and settings deleted
        (docs/tenants.md says what happens to its conversations)."""
        return await delete(tenant_id, platform(request).key_id)

    return router


__all__ = ["tenant_routes"]
