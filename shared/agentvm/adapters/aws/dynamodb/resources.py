"""The ``ResourceStore`` port on DynamoDB (PynamoDB), on AgentVM's single table.

=========  ==================================  ===============================================
item       pk                                  sk
=========  ==================================  ===============================================
head       ``RES#<tenant>``                    ``H#<kind>#<name>``
version    ``RES#<tenant>``                    ``V#<kind>#<name>@<version>``
edge       ``RESDEP#<tenant>#<kind>#<name>``   ``<dependent>|<selector>``
=========  ==================================  ===============================================

A tenant's resources are one partition: a listing is one Query, a name's versions one Query
(``begins_with``; ``@`` never occurs in a name, so ``a`` does not match ``ab``). A version is one
item (at most 400 KB: knowledge resources are capped at 256 KB of text). Creating a version is a
conditional put; a head is written only if no head with a higher ``seq`` is stored.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.adapters.aws.dynamodb.store import conditional_write
from agentvm.records import ResourceHead, ResourceVersion

if TYPE_CHECKING:
    from collections.abc import Sequence


class ResourceItem(TableItem):
    seq = NumberAttribute()
    data = UnicodeAttribute()


class EdgeItem(TableItem):
    dependent = UnicodeAttribute()
    selector = UnicodeAttribute()


def _pk(tenant_id: str) -> str:
    return f"RES#{tenant_id}"


def _edge_pk(tenant_id: str, kind: str, name: str) -> str:
    return f"RESDEP#{tenant_id}#{kind}#{name}"


class DynamoDbResourceStore:
    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(ResourceItem, table_name, region, host)
        self._edge = bind_model(EdgeItem, table_name, region, host)

    async def create_version(self, version: ResourceVersion) -> bool:
        item = self._item(
            _pk(version.tenantId),
            f"V#{version.kind}#{version.name}@{version.version}",
            seq=version.seq,
            data=version.model_dump_json(),
        )
        return await conditional_write(lambda: item.save(condition=self._item.pk.does_not_exist()))

    async def get_version(self, tenant_id: str, kind: str, name: str, version: str) -> ResourceVersion | None:
        item = await self._get(_pk(tenant_id), f"V#{kind}#{name}@{version}")
        return None if item is None else ResourceVersion.model_validate_json(item.data)

    async def list_versions(self, tenant_id: str, kind: str, name: str) -> list[ResourceVersion]:
        items = await self._query(_pk(tenant_id), f"V#{kind}#{name}@")
        return sorted((ResourceVersion.model_validate_json(i.data) for i in items), key=lambda v: v.seq)

    async def delete_version(self, tenant_id: str, kind: str, name: str, version: str) -> None:
        await asyncio.to_thread(self._item(_pk(tenant_id), f"V#{kind}#{name}@{version}").delete)

    async def put_head(self, head: ResourceHead, *, force: bool = False) -> bool:
        item = self._item(
            _pk(head.tenantId), f"H#{head.kind}#{head.name}", seq=head.seq, data=head.model_dump_json()
        )
        if force:
            await asyncio.to_thread(item.save)
            return True
        condition = self._item.pk.does_not_exist() | (self._item.seq <= head.seq)
        return await conditional_write(lambda: item.save(condition=condition))

    async def get_head(self, tenant_id: str, kind: str, name: str) -> ResourceHead | None:
        item = await self._get(_pk(tenant_id), f"H#{kind}#{name}")
        return None if item is None else ResourceHead.model_validate_json(item.data)

    async def delete_head(self, tenant_id: str, kind: str, name: str) -> None:
        await asyncio.to_thread(self._item(_pk(tenant_id), f"H#{kind}#{name}").delete)

    async def list_heads(self, tenant_id: str, kind: str | None = None) -> list[ResourceHead]:
        items = await self._query(_pk(tenant_id), "H#" if kind is None else f"H#{kind}#")
        heads = [ResourceHead.model_validate_json(i.data) for i in items]
        return sorted(heads, key=lambda h: (h.kind, h.name))

    async def add_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        for tenant, kind, name, selector in targets:
            edge = self._edge(
                _edge_pk(tenant, kind, name),
                f"{dependent}|{selector}",
                dependent=dependent,
                selector=selector,
            )
            await asyncio.to_thread(edge.save)

    async def remove_edges(self, dependent: str, targets: Sequence[tuple[str, str, str, str]]) -> None:
        for tenant, kind, name, selector in targets:
            await asyncio.to_thread(
                self._edge(_edge_pk(tenant, kind, name), f"{dependent}|{selector}").delete
            )

    async def dependents(self, tenant_id: str, kind: str, name: str) -> list[tuple[str, str]]:
        def query() -> list[tuple[str, str]]:
            return [(e.dependent, e.selector) for e in self._edge.query(_edge_pk(tenant_id, kind, name))]

        return sorted(await asyncio.to_thread(query))

    async def _get(self, pk: str, sk: str) -> ResourceItem | None:
        def get() -> ResourceItem | None:
            try:
                return self._item.get(pk, sk, consistent_read=True)
            except self._item.DoesNotExist:
                return None

        return await asyncio.to_thread(get)

    async def _query(self, pk: str, prefix: str) -> list[ResourceItem]:
        def query() -> list[ResourceItem]:
            return list(self._item.query(pk, self._item.sk.startswith(prefix), consistent_read=True))

        return await asyncio.to_thread(query)


__all__ = ["DynamoDbResourceStore", "EdgeItem", "ResourceItem"]
