"""The ``BudgetStore`` port on DynamoDB (PynamoDB), on AgentVM's single table.

======================  ===========================================  ==============================
item                    pk / sk                                      attributes
======================  ===========================================  ==============================
tenant budget           ``BUDGET#<tenant>`` / ``TENANT``             dailyTokens?, monthlyTokens?
container budget        ``BUDGET#<tenant>`` / ``CONTAINER#<cid>``    containerId, dailyTokens?, ...
======================  ===========================================  ==============================

A turn reads both of its budgets (two GetItems, eventually consistent: 0.5 read units each). Budgets
live in their own partition per tenant, off the tenant's main partition.
"""

from __future__ import annotations

import asyncio

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.records import BudgetRecord


def budget_pk(tenant_id: str) -> str:
    return f"BUDGET#{tenant_id}"


def budget_sk(container_id: str | None) -> str:
    return "TENANT" if container_id is None else f"CONTAINER#{container_id}"


class BudgetItem(TableItem):
    tenantId = UnicodeAttribute()
    containerId = UnicodeAttribute(null=True)
    dailyTokens = NumberAttribute(null=True)
    monthlyTokens = NumberAttribute(null=True)
    updatedAt = NumberAttribute()


class DynamoDbBudgetStore:
    """``agentvm.ports.BudgetStore`` on the single DynamoDB table. Blocking calls run in a thread."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(BudgetItem, table_name, region, host)

    async def put_budget(self, budget: BudgetRecord) -> None:
        item = self._item(
            budget_pk(budget.tenantId),
            budget_sk(budget.containerId),
            tenantId=budget.tenantId,
            containerId=budget.containerId,
            dailyTokens=budget.dailyTokens,
            monthlyTokens=budget.monthlyTokens,
            updatedAt=budget.updatedAt,
        )
        await asyncio.to_thread(item.save)

    async def get_budget(self, tenant_id: str, container_id: str | None = None) -> BudgetRecord | None:
        return await asyncio.to_thread(self._get, tenant_id, container_id)

    async def delete_budgets(self, tenant_id: str) -> int:
        def delete() -> int:
            items = list(self._item.query(budget_pk(tenant_id), consistent_read=True))  # a few small items
            with self._item.batch_write() as batch:
                for item in items:
                    batch.delete(item)
            return len(items)

        return await asyncio.to_thread(delete)

    def _get(self, tenant_id: str, container_id: str | None) -> BudgetRecord | None:
        try:
            item = self._item.get(budget_pk(tenant_id), budget_sk(container_id))
        except self._item.DoesNotExist:
            return None
        return BudgetRecord(
            tenantId=item.tenantId,
            containerId=item.containerId,
            dailyTokens=None if item.dailyTokens is None else int(item.dailyTokens),
            monthlyTokens=None if item.monthlyTokens is None else int(item.monthlyTokens),
            updatedAt=int(item.updatedAt),
        )


__all__ = ["BudgetItem", "DynamoDbBudgetStore"]
