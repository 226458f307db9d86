"""The ``BudgetStore`` contract, on SQLite, DynamoDB (moto) and PostgreSQL: one suite, so they cannot
drift."""

from __future__ import annotations

import pytest

from agentvm.adapters.aws.dynamodb.budgets import DynamoDbBudgetStore
from agentvm.adapters.local.sqlite.budgets import SqliteBudgetStore
from agentvm.adapters.postgres.budgets import PostgresBudgetStore
from agentvm.records import BudgetRecord
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteBudgetStore, DynamoDbBudgetStore, postgres=PostgresBudgetStore))
async def budgets(request, tmp_path):
    async with request.param(tmp_path) as store:
        yield store


async def test_tenant_and_container_budgets_are_separate_records(budgets):
    tenant = BudgetRecord(tenantId="acme", dailyTokens=1000, monthlyTokens=None, updatedAt=1)
    container = BudgetRecord(tenantId="acme", containerId="user-alice", monthlyTokens=50, updatedAt=2)
    await budgets.put_budget(tenant)
    await budgets.put_budget(container)
    assert await budgets.get_budget("acme") == tenant
    assert await budgets.get_budget("acme", "user-alice") == container
    assert await budgets.get_budget("acme", "user-bob") is None


async def test_budgets_are_scoped_by_tenant(budgets):
    await budgets.put_budget(BudgetRecord(tenantId="acme", containerId="user-alice", dailyTokens=5))
    assert await budgets.get_budget("other", "user-alice") is None
    assert await budgets.get_budget("other") is None


async def test_put_replaces_the_budget(budgets):
    await budgets.put_budget(BudgetRecord(tenantId="acme", dailyTokens=5, monthlyTokens=9, updatedAt=1))
    replaced = BudgetRecord(tenantId="acme", dailyTokens=None, monthlyTokens=None, updatedAt=2)
    await budgets.put_budget(replaced)
    assert await budgets.get_budget("acme") == replaced


async def test_container_ids_with_separators_do_not_collide(budgets):
    a = BudgetRecord(tenantId="acme", containerId="a#b", dailyTokens=1)
    b = BudgetRecord(tenantId="acme", containerId="a", dailyTokens=2)
    await budgets.put_budget(a)
    await budgets.put_budget(b)
    assert await budgets.get_budget("acme", "a#b") == a
    assert await budgets.get_budget("acme", "a") == b


async def test_a_tenants_budgets_are_deleted_together_and_no_other_tenants(budgets):
    await budgets.put_budget(BudgetRecord(tenantId="acme", dailyTokens=5))
    await budgets.put_budget(BudgetRecord(tenantId="acme", containerId="user-alice", dailyTokens=1))
    await budgets.put_budget(BudgetRecord(tenantId="acme-2", dailyTokens=7))
    assert await budgets.delete_budgets("acme") == 2
    assert await budgets.get_budget("acme") is None
    assert await budgets.get_budget("acme", "user-alice") is None
    assert (await budgets.get_budget("acme-2")).dailyTokens == 7
    assert await budgets.delete_budgets("acme") == 0
