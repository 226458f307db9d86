"""The ``ConfigStore`` port on DynamoDB (PynamoDB), on AgentVM's single table.

=========  ======================  =====================================
item       pk                      sk
=========  ======================  =====================================
values     ``CFG#<scope>``         ``VALUES``
change     ``CFG#<scope>``         ``LOG#<at, 13 digits>#<version>#<n>``
=========  ======================  =====================================

A write is one transaction: the values item, conditioned on the version read (so two writers
never lose each other's change), and the audit items of the change: both or neither. Reading a
scope's values is one consistent GetItem (the config centre caches it per process for
``AVM_CONFIG_CACHE_S``); the audit log is one Query, newest first. No secrets are stored on AWS:
the config centre refuses them there.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.records import ConfigChange, ConfigValues

if TYPE_CHECKING:
    from collections.abc import Sequence


class ConfigItem(TableItem):
    version = NumberAttribute(null=True)
    data = UnicodeAttribute()


def _pk(scope: str) -> str:
    return f"CFG#{scope}"


class DynamoDbConfigStore:
    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(ConfigItem, table_name, region, host)

    async def get_values(self, scope: str) -> ConfigValues | None:
        def get() -> ConfigItem | None:
            try:
                return self._item.get(_pk(scope), "VALUES", consistent_read=True)
            except self._item.DoesNotExist:
                return None

        item = await asyncio.to_thread(get)
        return None if item is None else ConfigValues.model_validate_json(item.data)

    async def put_values(self, values: ConfigValues, changes: Sequence[ConfigChange]) -> bool:
        item = self._item(_pk(values.scope), "VALUES", version=values.version, data=values.model_dump_json())
        if values.version == 1:
            condition = self._item.pk.does_not_exist()
        else:
            condition = self._item.version == values.version - 1
        logs = [
            self._item(
                _pk(values.scope), f"LOG#{c.at:013d}#{values.version:08d}#{n:03d}", data=c.model_dump_json()
            )
            for n, c in enumerate(changes)
        ]

        def write() -> bool:
            try:
                with TransactWrite(connection=self._item._get_connection().connection) as tx:
                    tx.save(item, condition=condition)
                    for log in logs:
                        tx.save(log)
            except TransactWriteError as exc:
                if exc.cause_response_code == "TransactionCanceledException":
                    return False
                raise
            return True

        return await asyncio.to_thread(write)

    async def list_changes(self, scope: str, limit: int = 100) -> list[ConfigChange]:
        def query() -> list[ConfigChange]:
            items = self._item.query(
                _pk(scope), self._item.sk.startswith("LOG#"), scan_index_forward=False, limit=limit
            )
            return [ConfigChange.model_validate_json(i.data) for i in items]

        return await asyncio.to_thread(query)


__all__ = ["ConfigItem", "DynamoDbConfigStore"]
