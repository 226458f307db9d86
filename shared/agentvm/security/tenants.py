"""The tenant registry: platform admins register, rename and delete tenants (docs/tenants.md).

A tenant id is what API keys, budgets, resources, settings and conversations hang off. The
registry lists the tenants registered here (``register``), a new id ``tenant_…`` or one already in
use by keys made with ``avm keys create --tenant X``; it does not gate authentication.

Deleting a tenant, in this order, each step safe to repeat (an interrupted deletion leaves the
tenant ``deleting``, and deleting it again finishes the job):

1. the record is marked ``deleting``: from then on no API key is made for the tenant;
2. its API keys are revoked (at once in this process, elsewhere within ``AVM_KEY_CACHE_S``);
3. its budgets (the tenant's and its containers') are deleted;
4. its resources (every version, head and dependency edge) are deleted;
5. its settings in the config centre are removed (audited);
6. its OAuth records of remote MCP servers (sealed tokens, pending authorizations) are deleted;
7. the tool calls its suspended turns wait on are cancelled (no continuation is queued);
8. its conversations are purged where the host can do that cheaply (``TenantPurge``: the local
   host); elsewhere (AWS) they are kept, unreachable, and the tombstone says so (no ``purgedAt``);
9. its keys are revoked once more (one made while the deletion ran);
10. the record is marked ``deleted``: a tombstone, so the id is never registered again.

Usage records are kept on every host: they are what the tenant is billed for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.errors import BadRequest, Conflict, Forbidden, NotFound
from agentvm.records import TenantRecord

if TYPE_CHECKING:
    from agentvm.ports import TenantStore
    from agentvm.records import TenantStatus
    from agentvm.runtime import Runtime

# Words of the Deepractice routes (/v1/tenants/list ...): as ids they could not be read by path.
RESERVED_IDS = frozenset({"create", "get", "list", "update", "delete"})
LISTED: tuple[TenantStatus, ...] = ("active", "deleting")  # what listings show unless asked
_ATTEMPTS = 5


def registry(runtime: Runtime) -> TenantStore:
    if runtime.tenants is None:
        raise NotFound("this server has no tenant registry")
    return runtime.tenants


def check_new_id(tenant_id: str) -> str:
    from agentvm.security.apikeys import check_tenant_id

    try:
        check_tenant_id(tenant_id)
    except BadRequest as exc:
        raise BadRequest(f"tenantId: {exc.message}") from None
    if tenant_id in RESERVED_IDS:
        raise BadRequest(f"tenantId: {tenant_id!r} is reserved (a route of /v1/tenants)")
    return tenant_id


async def register(
    runtime: Runtime, *, name: str, description: str | None = None, tenant_id: str | None = None
) -> TenantRecord:
    """A new tenant (a new id, or ``tenant_id``); ``Conflict`` if the id is registered already."""
    tenant_id = runtime.ids.new("tenant") if tenant_id is None else check_new_id(tenant_id)
    now = runtime.clock.now_ms()
    tenant = TenantRecord(
        tenantId=tenant_id, name=name, description=description, createdAt=now, updatedAt=now
    )
    if not await registry(runtime).create_tenant(tenant):
        existing = await registry(runtime).get_tenant(tenant_id)
        if existing is not None and existing.status != "active":
            raise Conflict(f"tenant {tenant_id!r} was deleted; a deleted tenant's id is not reused")
        raise Conflict(f"tenant {tenant_id!r} exists already")
    return tenant


async def get(runtime: Runtime, tenant_id: str) -> TenantRecord:
    """An active tenant, or one being deleted; ``NotFound`` for a deleted or unknown one."""
    tenant = await registry(runtime).get_tenant(tenant_id)
    if tenant is None or tenant.status == "deleted":
        raise NotFound("Tenant not found")
    return tenant


async def listing(
    runtime: Runtime,
    *,
    statuses: tuple[TenantStatus, ...] = LISTED,
    limit: int = 100,
    after: str | None = None,
) -> tuple[list[TenantRecord], str | None]:
    return await registry(runtime).list_tenants(statuses=statuses, limit=limit, after=after)


async def every(runtime: Runtime) -> list[TenantRecord]:
    """Every listed tenant (the Deepractice list has no pages), page by page."""
    out: list[TenantRecord] = []
    after: str | None = None
    while True:
        page, after = await listing(runtime, limit=1000, after=after)
        out += page
        if after is None:
            return out


async def update(runtime: Runtime, tenant_id: str, changes: dict[str, Any]) -> TenantRecord:
    """Change ``name``, ``description`` (None removes it) and/or ``limits`` (a platform admin's
    ``TenantLimitOverrides``; None: the server's) of an active tenant."""
    for _ in range(_ATTEMPTS):
        tenant = await get(runtime, tenant_id)
        if tenant.status != "active":
            raise Conflict(f"tenant {tenant_id!r} is being deleted; delete it again to finish")
        changed = tenant.model_copy(update={**changes, "updatedAt": runtime.clock.now_ms()})
        if await registry(runtime).replace_tenant(changed, status="active"):
            return changed
    raise Conflict(f"tenant {tenant_id!r} is being changed by someone else; try again")


async def refuse_deleted(runtime: Runtime, tenant_id: str) -> None:
    """``Forbidden`` if the tenant is being deleted or was: no API key is made for it any more."""
    tenant = None if runtime.tenants is None else await runtime.tenants.get_tenant(tenant_id)
    if tenant is not None and tenant.status != "active":
        raise Forbidden(f"tenant {tenant_id!r} was deleted")


async def delete(runtime: Runtime, tenant_id: str, *, by: str | None) -> dict[str, Any]:
    """Delete the tenant (the module docstring); what was done, for the answer."""
    if tenant_id == runtime.platform_tenant:
        raise Conflict("the platform tenant cannot be deleted")
    store = registry(runtime)
    for _ in range(_ATTEMPTS):
        tenant = await get(runtime, tenant_id)
        if tenant.status == "deleting":
            break
        now = runtime.clock.now_ms()
        marked = tenant.model_copy(update={"status": "deleting", "deletedAt": now, "updatedAt": now})
        if await store.replace_tenant(marked, status="active"):
            tenant = marked
            break
    else:
        raise Conflict(f"tenant {tenant_id!r} is being changed by someone else; try again")

    done: dict[str, Any] = {"deleted": True, "tenantId": tenant_id}
    done["revokedKeys"] = await _revoke_keys(runtime, tenant_id)
    budgets = runtime.budgets
    done["deletedBudgets"] = 0 if budgets is None else await budgets.store.delete_budgets(tenant_id)
    resources = runtime.resources
    done["deletedResourceVersions"] = 0 if resources is None else await resources.delete_tenant(tenant_id)
    done["removedSettings"] = await _remove_settings(runtime, tenant_id, by)
    if runtime.mcp_oauth is not None:
        await runtime.mcp_oauth.delete_tenant(tenant_id)
    done["cancelledToolCalls"] = await _cancel_waits(runtime, tenant_id)
    purged_at = None
    if runtime.tenant_purge is not None:
        done["deletedConversations"] = await runtime.tenant_purge.purge_tenant(tenant_id)
        purged_at = runtime.clock.now_ms()
    done["conversations"] = "kept" if purged_at is None else "purged"
    done["revokedKeys"] += await _revoke_keys(runtime, tenant_id)

    now = runtime.clock.now_ms()
    tombstone = tenant.model_copy(update={"status": "deleted", "updatedAt": now, "purgedAt": purged_at})
    await store.replace_tenant(tombstone, status="deleting")  # False: a concurrent delete finished
    return done


async def _revoke_keys(runtime: Runtime, tenant_id: str) -> int:
    if runtime.auth is None:
        return 0
    revoked = 0
    for key in await runtime.auth.keys.list(tenant_id):
        if key.revokedAt is None and await runtime.auth.revoke(key.keyId, tenant_id=tenant_id):
            revoked += 1
    return revoked


async def _remove_settings(runtime: Runtime, tenant_id: str, by: str | None) -> int:
    if runtime.config is None:
        return 0
    from agentvm.configcentre.centre import tenant_scope
    from agentvm.configcentre.keys import KEYS

    stored = await runtime.config.store.get_values(tenant_scope(tenant_id))
    names = [] if stored is None else [n for n in stored.values if n in KEYS]
    if names:
        await runtime.config.set(dict.fromkeys(names), tenant_id=tenant_id, by=by, platform_admin=True)
    return len(names)


async def _cancel_waits(runtime: Runtime, tenant_id: str) -> int:
    """Cancel (without queueing the continuation) and consume every wait of the tenant, so no
    suspended turn of it runs again: no approval can come, and the sweeper passes them by."""
    if runtime.waits is None:
        return 0
    now = runtime.clock.now_ms()
    cancelled = {
        "status": "cancelled",
        "decidedAt": now,
        "decidedBy": None,
        "reason": "the tenant was deleted",
        "output": None,
        "isError": True,
        "files": [],
        "checkAt": now,
    }
    waits = await runtime.waits.list_waits(tenant_id)
    for wait in waits:
        await runtime.waits.decide(wait.turnId, wait.toolCallId, cancelled)
        await runtime.waits.consume(wait.turnId, wait.toolCallId)
    return len(waits)


__all__ = [
    "LISTED",
    "RESERVED_IDS",
    "check_new_id",
    "delete",
    "every",
    "get",
    "listing",
    "refuse_deleted",
    "register",
    "update",
]
