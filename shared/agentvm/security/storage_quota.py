"""One storage account per tenant: the bytes it stores, whatever path writes them (issue 25).

The limit is ``AVM_TENANT_STORAGE_BYTES`` (1 GiB; 0 = no quota), or the platform's ``storageBytes``
for that tenant (``security/tenant_limits.py``: ``PATCH /v1/tenants/{id}`` ``limits``). A tenant
whose limit is 0 is not counted at all (no request). One ``Counters`` item per tenant
(``storage#<tenant>``, field ``bytes``, never expiring) holds what it has stored.

Reserve, then commit. A write a tenant asks for first *reserves* its size: a ``whole`` lease of the
counter (``Counters.lease``: add all of it if the total stays within the limit, else nothing), so
concurrent writers can never pass the quota together: the storage they are granted adds up to at
most the limit (a check-then-add, as before, let 50 racing sends store 150 %). The write itself is
the commit; a write that fails, or stores nothing (a retried request), gives its reservation back
(a negative increment). A refusal is ``storage_quota_exceeded`` (HTTP 507; ``limit``, ``used``),
before anything is stored; another tenant is not affected.

=========================  ==================================  ====================================
path                       counted                             given back
=========================  ==================================  ====================================
user messages              reserved by ``message_send``        no: messages are never deleted one by
(``turns/submit.py``)      (its JSON size)                     one; an image's delete frees its
                                                               record, not its session's history
session imports            reserved (every message)            as above
(``sessions/writer.py``)
replies and tool calls and charged once per turn after they    as above
results (``turns/finish``) are written (the turn was accepted;
                           each is bounded: output tokens,
                           ``AVM_TOOL_MAX_OUTPUT_CHARS``)
images (create, update,    reserved: the record's JSON size    on delete, the record's size (read
build)                     (config); an update reserves its    anyway to delete it)
                           growth and gives back its shrink
resources and the          reserved per version (its JSON      on delete, each version's size
registry, knowledge        size, the knowledge index           (computed from the versions the
versions included          included; ``resources/centre.py``)  delete reads anyway)
sandbox workspaces         charged after each mutating call:   a call that deletes files gives
                           the workspace's bytes after minus   back what they held (a negative
                           before (``WorkspaceScan.bytes``);   delta)
                           a tenant over its account is
                           refused the call
=========================  ==================================  ====================================

What a job will write cannot be reserved, so the workspace is charged after the call: one call can
take the tenant past its account by what it wrote, which the per-container workspace quota bounds
(``LocalSandbox``, the worker's sync limit on AWS), and the next mutating call is refused. A walk
cut short by its bounds (``WorkspaceScan.complete`` False) is not charged; the container's own
quota is then the bound.

Not counted, because each is bounded per tenant elsewhere and counting would cost a request per
write: log lines (the log store keeps a fixed retention, and refusal lines are rate-limited), session
exports (written to the caller, never stored), usage records and turn records (fixed-size, one per
turn), budgets, keys and the tenant's registry record (capped in number), and images' cached
replies (bounded per tenant and self-evicting; a put that would pass the quota is skipped instead:
``turns/reply_cache.py``, SECURITY.md "Storage quotas").

A give-back that takes the account below zero (deleting what was written before it was counted)
sets it back to zero with one more increment; racing give-backs may leave it a little below zero
for an instant, never above what is stored.

Cost on AWS (each counter operation one DynamoDB request, 1 write unit under 1 KB): a standard turn
(no tools) is one conditional UpdateItem to reserve the user's message and one UpdateItem for the
reply, as before the reservation (about $2.5 per million turns at on-demand prices); a turn with
tools adds nothing (its calls and results go with the reply's charge); a mutating sandbox call adds
one GetItem (is the tenant over?) and, when the workspace changed, one UpdateItem. A refused
reservation is one failed conditional update (billed as a write).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.errors import StorageQuotaExceeded

if TYPE_CHECKING:
    from agentvm.ports import Counters
    from agentvm.records import ImageRecord
    from agentvm.security.tenant_limits import TenantLimits

_NEVER = 253_402_300_799  # 9999-12-31T23:59:59Z: the item never expires
_FIELD = "bytes"


class StorageQuota:
    """The tenants' storage accounts: reserve before a write, give back after a failed one or a
    delete, charge what could not be reserved."""

    def __init__(
        self, counters: Counters, *, limit_bytes: int, tenant_limits: TenantLimits | None = None
    ) -> None:
        self._counters = counters
        self.limit_bytes = limit_bytes  # the server's (used when there are no per-tenant limits)
        self._tenant_limits = tenant_limits

    async def limit_of(self, tenant_id: str) -> int:
        """The tenant's limit in bytes (0: none): the platform's override, else the server's."""
        if self._tenant_limits is None:
            return self.limit_bytes
        return (await self._tenant_limits.of(tenant_id)).storage_bytes

    async def reserve(self, tenant_id: str, size: int) -> int:
        """Take ``size`` bytes of the tenant's account before writing them; returns what was taken
        (0 when the tenant has no quota: give back exactly that). Raises ``StorageQuotaExceeded``,
        taking nothing, when they do not all fit."""
        limit = await self.limit_of(tenant_id)
        if limit <= 0 or size <= 0:
            return 0
        lease = await self._counters.lease(
            _key(tenant_id), _FIELD, size, limit=limit, expires_at=_NEVER, whole=True
        )
        if lease.granted == 0:
            raise _exceeded(lease.total, limit)
        return lease.granted

    async def give_back(self, tenant_id: str, size: int) -> None:
        """Return ``size`` bytes to the account: a reservation whose write failed, or what a deleted
        thing had been charged."""
        if size <= 0 or await self.limit_of(tenant_id) <= 0:
            return
        left = (await self._counters.incr(_key(tenant_id), {_FIELD: -size}, expires_at=_NEVER))[_FIELD]
        if left < 0:  # it held bytes written before they were counted: the account starts at zero
            await self._counters.incr(_key(tenant_id), {_FIELD: -left}, expires_at=_NEVER)

    async def charge(self, tenant_id: str, delta: int) -> None:
        """Count bytes already written (a reply, a workspace's growth), whether or not they fit;
        a negative ``delta`` gives back."""
        if delta < 0:
            await self.give_back(tenant_id, -delta)
        elif delta > 0 and await self.limit_of(tenant_id) > 0:
            await self._counters.incr(_key(tenant_id), {_FIELD: delta}, expires_at=_NEVER)

    async def refuse_if_full(self, tenant_id: str) -> None:
        """Raises ``StorageQuotaExceeded`` if the tenant has used all of its account (before a
        write whose size cannot be known first: a sandbox job)."""
        limit = await self.limit_of(tenant_id)
        if limit <= 0:
            return
        used = await self.used(tenant_id)
        if used >= limit:
            raise _exceeded(used, limit)

    async def used(self, tenant_id: str) -> int:
        return max(0, (await self._counters.get(_key(tenant_id))).get(_FIELD, 0))


def image_size(image: ImageRecord) -> int:
    """The bytes an image is charged: its record's JSON without what changes on its own (whether
    it runs, when it changed, its name, which a title may set, and the MCP tool catalog, a cache
    replaced in place), so create, update and delete agree on the size whatever happened between."""
    return len(image.model_dump_json(exclude=_IMAGE_UNCHARGED))


_IMAGE_UNCHARGED = {"agentId", "createdAt", "updatedAt", "name", "toolCatalog"}


def _exceeded(used: int, limit: int) -> StorageQuotaExceeded:
    return StorageQuotaExceeded(
        f"storage quota reached: this tenant has stored {used} of its {limit} bytes "
        "(AVM_TENANT_STORAGE_BYTES, or the platform's storageBytes for this tenant); "
        "delete images, resources or workspace files, or ask the operator to raise it",
        limit=limit,
        used=used,
    )


def _key(tenant_id: str) -> str:
    return f"storage#{tenant_id}"


__all__ = ["StorageQuota", "image_size"]
