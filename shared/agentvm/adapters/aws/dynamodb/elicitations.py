"""The ``ElicitationStore`` port on DynamoDB (PynamoDB): the open MCP questions of AWS's turns.

============  =======================  =====================  ==================================
item          pk                       sk                     attributes
============  =======================  =====================  ==================================
question      ``ELICIT#<tenant>``      ``<elicitationId>``    deadlineAt, question, answer?,
                                                              finished?, expiresAt
============  =======================  =====================  ==================================

The turn worker Lambda whose MCP call waits puts the item and reads it (a strongly consistent
GetItem, 1 RRU) every ``POLL_S`` until it holds an answer; the HTTP API or ``$default`` Lambda that
receives the answer writes it with one conditional UpdateItem (the item exists, is neither answered
nor finished, and its deadline is ahead: of two answers, one is taken). The tenant is the partition
key, so another tenant's id is simply not found. ``finish`` is an UpdateItem setting ``finished``
that returns the item, so an answer given before it is used and one after it is refused. Items
expire (TTL) an hour after their deadline. ``open_count`` is one Query of the tenant's partition.
Per question: 2 WRU (put, finish), 1 per answer, and about 2 RRU per second of waiting.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PynamoDBException

from agentvm.adapters.aws.dynamodb.models import TableItem, bind_model
from agentvm.adapters.aws.dynamodb.store import conditional_write
from agentvm.ports import ElicitationAnswer, PendingElicitation

PREFIX = "ELICIT#"
POLL_S = 0.5  # the waiting worker's reads: ~2 RRU a second, a small share of the Lambda's wait
KEEP_S = 3600  # after its deadline, until TTL deletes it


class ElicitationItem(TableItem):
    deadlineAt = NumberAttribute()
    question = UnicodeAttribute()
    answer = UnicodeAttribute(null=True)
    finished = BooleanAttribute(null=True)


def _answer(item: ElicitationItem) -> ElicitationAnswer | None:
    return None if item.answer is None else ElicitationAnswer.from_json(item.answer)


class DynamoDbElicitations:
    """``agentvm.ports.ElicitationStore`` on the single table. Blocking calls run in a thread."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(ElicitationItem, table_name, region, host)

    def _key(self, tenant_id: str, elicitation_id: str) -> ElicitationItem:
        return self._item(PREFIX + tenant_id, elicitation_id)

    async def put(self, pending: PendingElicitation) -> None:
        item = self._item(
            PREFIX + pending.owner.tenant_id,
            pending.elicitation_id,
            deadlineAt=pending.deadline_at,
            question=pending.to_json(),
            expiresAt=datetime.fromtimestamp(pending.deadline_at // 1000 + KEEP_S, tz=UTC),
        )
        await asyncio.to_thread(item.save)

    async def open_count(self, tenant_id: str, now_ms: int) -> int:
        model = self._item
        condition = (
            (model.deadlineAt > now_ms) & model.answer.does_not_exist() & model.finished.does_not_exist()
        )
        return await asyncio.to_thread(
            lambda: model.count(PREFIX + tenant_id, filter_condition=condition, consistent_read=True)
        )

    async def _read(self, tenant_id: str, elicitation_id: str) -> ElicitationItem | None:
        def read() -> ElicitationItem | None:
            try:
                return self._item.get(PREFIX + tenant_id, elicitation_id, consistent_read=True)
            except self._item.DoesNotExist:
                return None

        return await asyncio.to_thread(read)

    async def get(self, tenant_id: str, elicitation_id: str, now_ms: int) -> PendingElicitation | None:
        item = await self._read(tenant_id, elicitation_id)
        if item is None or item.answer is not None or item.finished or item.deadlineAt <= now_ms:
            return None
        return PendingElicitation.from_json(elicitation_id, int(item.deadlineAt), item.question)

    async def answer(
        self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer, now_ms: int
    ) -> bool:
        model, item = self._item, self._key(tenant_id, elicitation_id)
        condition = (
            model.pk.exists()
            & (model.deadlineAt > now_ms)
            & model.answer.does_not_exist()
            & model.finished.does_not_exist()
        )
        return await conditional_write(lambda: item.update([model.answer.set(answer.to_json())], condition))

    async def answer_of(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        item = await self._read(tenant_id, elicitation_id)
        return None if item is None else _answer(item)

    async def finish(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        model, item = self._item, self._key(tenant_id, elicitation_id)
        try:  # UpdateItem returns the item as updated (ALL_NEW): its answer, if one came first
            await asyncio.to_thread(item.update, [model.finished.set(True)], model.pk.exists())
        except PynamoDBException as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return None
            raise
        return _answer(item)


__all__ = ["POLL_S", "DynamoDbElicitations"]
