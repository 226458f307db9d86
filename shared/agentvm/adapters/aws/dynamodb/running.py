"""The ``RunningTurns`` port on DynamoDB: one small item per unfinished turn, in its tenant's partition.

=============  ========================  ===============================  ==========================
item           pk                        sk                               attributes
=============  ========================  ===============================  ==========================
running turn   ``RUNNING#<tenant>``      ``<container>#<turn>``           containerId, imageId,
                                                                          sessionId, turnId,
                                                                          queuedAt, model, expiresAt
=============  ========================  ===============================  ==========================

``mark`` is one PutItem (~0.3 KB: 1 WRU) by the gateway, ``unmark`` one DeleteItem (1 WRU) by the
worker: 2 WRU per turn, no index. A listing is one strongly consistent Query on the tenant's
partition (of one container: ``begins_with(<container>#)``, the stored ``containerId``
re-checked, as container ids may hold ``#``). A mark expires (TTL) 30 days after its turn was
queued, should nothing ever unmark it.

A turn's tokens so far are its usage records (``TURN#<turn>``/``USAGE`` for the first model
call, ``TURN#<turn>:step:<n>``/``USAGE`` for the later ones: the layout of ``dynamodb.models``),
read with ``BatchGetItem`` eight steps at a time until one is missing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import USAGE, TableItem, bind_model, bind_models, turn_pk
from agentvm.ports import RunningTurn, TurnTokens
from agentvm.records import UsageRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

PREFIX = "RUNNING#"
TTL_S = 30 * 86_400
_STEP_BATCH = 8


class RunningItem(TableItem):
    containerId = UnicodeAttribute()
    imageId = UnicodeAttribute()
    sessionId = UnicodeAttribute()
    turnId = UnicodeAttribute()
    queuedAt = NumberAttribute()
    model = UnicodeAttribute(null=True)


def running_pk(tenant_id: str) -> str:
    return f"{PREFIX}{tenant_id}"


def running_sk(container_id: str, turn_id: str) -> str:
    return f"{container_id}#{turn_id}"


class DynamoDbRunningTurns:
    """``agentvm.ports.RunningTurns`` on the single table. Blocking calls run in a thread."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(RunningItem, table_name, region, host)
        self._records = bind_models(table_name, region, host).record
        self.table_name = table_name

    async def mark(self, turn: RunningTurn) -> None:
        item = self._item(
            running_pk(turn.tenant_id),
            running_sk(turn.container_id, turn.turn_id),
            containerId=turn.container_id,
            imageId=turn.image_id,
            sessionId=turn.session_id,
            turnId=turn.turn_id,
            queuedAt=turn.queued_at,
            model=turn.model,
            expiresAt=datetime.fromtimestamp(turn.queued_at / 1000 + TTL_S, tz=UTC),
        )
        await asyncio.to_thread(item.save)

    async def unmark(self, tenant_id: str, container_id: str, turn_id: str) -> None:
        item = self._item(running_pk(tenant_id), running_sk(container_id, turn_id))
        await asyncio.to_thread(item.delete)

    async def running(
        self, tenant_id: str, container_id: str | None = None, limit: int = 500
    ) -> list[RunningTurn]:
        condition = None if container_id is None else self._item.sk.startswith(f"{container_id}#")

        def query() -> list[RunningItem]:
            # Strongly consistent: a turn queued a moment ago is listed.
            found = self._item.query(
                running_pk(tenant_id), range_key_condition=condition, consistent_read=True
            )
            return list(found)

        items = await asyncio.to_thread(query)
        turns = [
            RunningTurn(
                tenant_id=tenant_id,
                container_id=i.containerId,
                image_id=i.imageId,
                session_id=i.sessionId,
                turn_id=i.turnId,
                queued_at=int(i.queuedAt),
                model=i.model,
            )
            for i in items
            if container_id is None or i.containerId == container_id
        ]
        return sorted(turns, key=lambda t: (t.queued_at, t.turn_id))[:limit]

    async def tokens(self, turn_ids: Sequence[str]) -> dict[str, TurnTokens]:
        return await asyncio.to_thread(self._tokens, list(turn_ids))

    def _tokens(self, turn_ids: list[str]) -> dict[str, TurnTokens]:
        sums: dict[str, list[int]] = {t: [0, 0, 0, 0, 0] for t in turn_ids}
        pending = {t: 0 for t in turn_ids}  # the next step to read, per turn still being read
        while pending:
            keys = [(t, n) for t, first in pending.items() for n in range(first, first + _STEP_BATCH)]
            found = {(r.turnId): r for r in self._usage([_usage_id(t, n) for t, n in keys])}
            for turn, first in list(pending.items()):
                steps = [found.get(_usage_id(turn, n)) for n in range(first, first + _STEP_BATCH)]
                for record in steps:
                    if record is None:
                        break
                    s = sums[turn]
                    s[0] += 1
                    s[1] += record.inputTokens
                    s[2] += record.outputTokens
                    s[3] += record.cacheReadTokens
                    s[4] += record.cacheWriteTokens
                if all(r is not None for r in steps):
                    pending[turn] = first + _STEP_BATCH
                else:
                    del pending[turn]
        return {t: TurnTokens(*s) for t, s in sums.items()}

    def _usage(self, turn_ids: list[str]) -> list[UsageRecord]:
        keys = [(turn_pk(t), USAGE) for t in turn_ids]
        out: list[UsageRecord] = []
        for first in range(0, len(keys), 100):
            out += [
                UsageRecord.model_validate_json(i.data)
                for i in self._records.batch_get(keys[first : first + 100])
            ]
        return out


def _usage_id(turn_id: str, step: int) -> str:
    """The usage record's id of a turn's model call ``step`` (0: the turn's own record)."""
    return turn_id if step == 0 else f"{turn_id}:step:{step}"


__all__ = ["DynamoDbRunningTurns", "RunningItem", "running_pk", "running_sk"]
