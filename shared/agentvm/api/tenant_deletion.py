"""What deleting a tenant does (``DELETE /v1/tenants/{tenantId}``), in this order:

1. its API keys are revoked (at once in this process; elsewhere within ``AVM_KEY_CACHE_S``), so
   nothing of the tenant can be read or run from then on;
2. its tenant budget is removed;
3. its resources (every version, head and dependency edge) are deleted;
4. its settings in the config centre are removed (the change is audited);
5. the registry record is deleted.

The tenant's conversations (containers, images, sessions, messages, usage records, workspaces)
are **kept**: no key can reach them after step 1, and usage stays for billing. Purging them is an
operator's decision and is not automated yet (docs/tenants.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentvm.runtime import Runtime


async def delete_tenant_data(runtime: Runtime, tenant_id: str, *, by: str | None) -> dict[str, Any]:
    revoked = 0
    if runtime.auth is not None:
        for key in await runtime.auth.keys.list(tenant_id):
            if key.revokedAt is None and await runtime.auth.revoke(key.keyId, tenant_id=tenant_id):
                revoked += 1
    if runtime.budgets is not None and await runtime.budgets.store.get_budget(tenant_id, None) is not None:
        await runtime.budgets.set(tenant_id, None, daily_tokens=None, monthly_tokens=None)
    resources = 0
    if runtime.resources is not None:
        store = runtime.resources.store
        for head in await store.list_heads(tenant_id):
            for version in await store.list_versions(tenant_id, head.kind, head.name):
                await store.remove_edges(f"{tenant_id}|{version.uri}", [tuple(t) for t in version.targets])  # type: ignore[misc]
                await store.delete_version(tenant_id, head.kind, head.name, version.version)
                resources += 1
            await store.delete_head(tenant_id, head.kind, head.name)
    if runtime.config is not None:
        from agentvm.configcentre.centre import tenant_scope

        stored = await runtime.config.store.get_values(tenant_scope(tenant_id))
        if stored is not None and stored.values:
            await runtime.config.set(
                dict.fromkeys(stored.values), tenant_id=tenant_id, by=by, platform_admin=True
            )
    return {"revokedKeys": revoked, "deletedResourceVersions": resources, "conversations": "kept"}


__all__ = ["delete_tenant_data"]
