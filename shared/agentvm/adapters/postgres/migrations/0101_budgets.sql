-- The BudgetStore (adapters/postgres/budgets.py): a tenant's budget has container_id '' (a container
-- id has at least one character), each container's its own row.
CREATE TABLE budgets (
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    record       JSONB NOT NULL,
    PRIMARY KEY (tenant_id, container_id)
);
