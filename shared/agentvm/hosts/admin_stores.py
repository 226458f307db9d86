"""The stores ``avm keys``, ``avm budgets`` and ``avm tenants`` reach without a server: this
machine's data dir, or with ``--table`` a deployed stack's DynamoDB table (the CLI builds no
adapter of its own; it asks here, as the servers ask ``hosts/local.py`` and ``hosts/aws.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from agentvm.ports import TenantStore, UsageRollups


def usage_rollups(table: str | None, data_dir: Path) -> UsageRollups:
    """The usage sums of the stack's table, else of the data dir's database."""
    if table:
        from agentvm.adapters.aws.dynamodb.usage import DynamoDbUsageRollups

        return DynamoDbUsageRollups(table)
    from agentvm.adapters.local.sqlite.store import SqliteStore
    from agentvm.adapters.local.sqlite.usage import SqliteUsageRollups

    return SqliteUsageRollups(SqliteStore(data_dir / "agentvm.db"))


def tenant_store(table: str | None, data_dir: Path) -> TenantStore:
    """The tenant registry of the stack's table, else of the data dir's database."""
    if table:
        from agentvm.adapters.aws.dynamodb.tenants import DynamoDbTenantStore

        return DynamoDbTenantStore(table)
    from agentvm.adapters.local.sqlite.tenants import SqliteTenantStore

    return SqliteTenantStore(data_dir / "agentvm.db")


__all__ = ["tenant_store", "usage_rollups"]
