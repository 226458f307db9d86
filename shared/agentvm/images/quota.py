"""Images in the tenant's storage account (``security.storage_quota``): a stored image's config
counts its JSON size; a create or a growing update reserves first (refused past the account:
``storage_quota_exceeded``) and gives back what a failed write did not use; a shrink or a delete
gives back after."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.security.storage_quota import image_size

if TYPE_CHECKING:
    from agentvm.records import ImageRecord, SessionRecord
    from agentvm.runtime import Runtime


async def create_counted(rt: Runtime, tenant_id: str, image: ImageRecord, session: SessionRecord) -> None:
    """Create the image with its config's size reserved in the tenant's storage account first
    (refused past it: ``storage_quota_exceeded``); a failed create gives it back."""
    quota = rt.storage_quota
    reserved = 0 if quota is None else await quota.reserve(tenant_id, image_size(image))
    try:
        await rt.store.create_image(image, session)
    except BaseException:
        if quota is not None:
            await quota.give_back(tenant_id, reserved)
        raise


async def put_counted(rt: Runtime, tenant_id: str, before: ImageRecord, image: ImageRecord) -> None:
    """Store a changed image: its growth reserved first (refused past the account), its shrink
    given back after."""
    quota = rt.storage_quota
    delta = 0 if quota is None else image_size(image) - image_size(before)
    reserved = await quota.reserve(tenant_id, delta) if quota is not None and delta > 0 else 0
    try:
        await rt.store.put_image(image)
    except BaseException:
        if quota is not None:
            await quota.give_back(tenant_id, reserved)
        raise
    if quota is not None and delta < 0:
        await quota.give_back(tenant_id, -delta)


async def give_back_deleted(rt: Runtime, tenant_id: str, image: ImageRecord) -> None:
    """A deleted image's config leaves the account (its session's messages stay counted)."""
    if rt.storage_quota is not None:
        await rt.storage_quota.give_back(tenant_id, image_size(image))


__all__ = ["create_counted", "give_back_deleted", "put_counted"]
