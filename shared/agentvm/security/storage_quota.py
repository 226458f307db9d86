"""Bytes of history a tenant may store: ``AVM_TENANT_STORAGE_BYTES`` (1 GiB; 0 = no quota).

One ``Counters`` item per tenant (``storage#<tenant>``, field ``bytes``, never expiring) adds the
size of every message a turn stores: the user's message when ``message_send`` appends it, the
reply when the turn appends it. ``message_send`` checks the total first and refuses past the quota
with ``storage_quota_exceeded`` (HTTP 507), before anything is stored; a turn already accepted
finishes (its reply is bounded by the output-token limit).

On AWS that is one GetItem and two UpdateItems per turn (about $2.6 per million turns at
on-demand prices). Deleting images does not give bytes back (the store cannot tell their size
cheaply); the counter measures what a tenant wrote. Tool calls and results are not counted (each
is cut at ``AVM_TOOL_MAX_OUTPUT_CHARS``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.errors import StorageQuotaExceeded

if TYPE_CHECKING:
    from agentvm.ports import Counters

_NEVER = 253_402_300_799  # 9999-12-31T23:59:59Z: the item never expires


class StorageQuota:
    def __init__(self, counters: Counters, *, limit_bytes: int) -> None:
        self._counters = counters
        self.limit_bytes = limit_bytes

    async def check(self, tenant_id: str, adding: int) -> None:
        """Raises ``StorageQuotaExceeded`` if storing ``adding`` more bytes passes the quota."""
        if self.limit_bytes <= 0:
            return
        used = (await self._counters.get(_key(tenant_id))).get("bytes", 0)
        if used + adding > self.limit_bytes:
            raise StorageQuotaExceeded(
                f"storage quota reached: this tenant has stored {used} of its {self.limit_bytes} bytes "
                "(AVM_TENANT_STORAGE_BYTES; the operator can raise it)",
                limit=self.limit_bytes,
                used=used,
            )

    async def add(self, tenant_id: str, stored: int) -> None:
        if self.limit_bytes > 0 and stored > 0:
            await self._counters.incr(_key(tenant_id), {"bytes": stored}, expires_at=_NEVER)

    async def used(self, tenant_id: str) -> int:
        return (await self._counters.get(_key(tenant_id))).get("bytes", 0)


def _key(tenant_id: str) -> str:
    return f"storage#{tenant_id}"


__all__ = ["StorageQuota"]
