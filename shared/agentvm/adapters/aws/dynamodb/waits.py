"""The ``ToolWaits`` port on DynamoDB (PynamoDB), on AgentVM's single table.

==========  =====================================  ============  =====================================
item        pk / sk                                gsi1pk        gsi1sk
==========  =====================================  ============  =====================================
wait        ``TURN#<turn>`` / ``WAIT#<call>``      TENANT#<t>    WAIT#<c>#<createdAt:013d>#<turn>#<call>
due mark    ``WAITDUE`` / ``<checkAt:013d>#<turn>#<call>``
==========  =====================================  ============  =====================================

A wait lives in its turn's partition (``turn_waits`` is one Query). Its index keys are removed
when it is consumed, so ``gsi1`` lists only the waits still open (a sparse listing per tenant or
container). The sweeper reads the due marks: one partition, sorted by the time to look at each
wait, so "what is due now" is one Query with a key condition; a mark is deleted when its wait is
consumed or rescheduled. One partition for every tenant's marks: a write per suspension and per
decision, far under a partition's 1,000 writes per second at any volume of approvals a person
can make; shard the key by hour if that ever changes.

``decide`` is a PutItem conditional on ``status = pending``: of two decisions, one wins.
Writes: a suspension 2 (wait + mark), a decision 3 (wait, mark moved), consuming 2.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pynamodb.attributes import UnicodeAttribute

from agentvm.adapters.aws.dynamodb.models import GSI1, TableItem, bind_model, tenant_pk, turn_pk
from agentvm.adapters.aws.dynamodb.store import conditional_write
from agentvm.records import ToolWait

if TYPE_CHECKING:
    from collections.abc import Mapping

WAIT_PREFIX = "WAIT#"
DUE_PK = "WAITDUE"


class WaitItem(TableItem):
    tenantId = UnicodeAttribute()
    status = UnicodeAttribute()
    data = UnicodeAttribute()


class DueItem(TableItem):
    turnId = UnicodeAttribute()
    callId = UnicodeAttribute()


def _due_sk(wait: ToolWait, check_at: int | None = None) -> str:
    return f"{(wait.checkAt if check_at is None else check_at):013d}#{wait.turnId}#{wait.toolCallId}"


class DynamoDbToolWaits:
    """``agentvm.ports.ToolWaits`` on the single DynamoDB table. Blocking calls run in a thread."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._wait = bind_model(WaitItem, table_name, region, host)
        self._due = bind_model(DueItem, table_name, region, host)

    def _item(self, wait: ToolWait) -> WaitItem:
        open_ = not wait.consumed
        return self._wait(
            turn_pk(wait.turnId),
            WAIT_PREFIX + wait.toolCallId,
            tenantId=wait.tenantId,
            status=wait.status,
            data=wait.model_dump_json(),
            gsi1pk=tenant_pk(wait.tenantId) if open_ else None,
            gsi1sk=(
                f"{WAIT_PREFIX}{wait.containerId}#{wait.createdAt:013d}#{wait.turnId}#{wait.toolCallId}"
                if open_
                else None
            ),
        )

    def _due_item(self, wait: ToolWait, check_at: int | None = None) -> DueItem:
        return self._due(DUE_PK, _due_sk(wait, check_at), turnId=wait.turnId, callId=wait.toolCallId)

    async def put_wait(self, wait: ToolWait) -> bool:
        item = self._item(wait)
        created = await conditional_write(lambda: item.save(condition=self._wait.pk.does_not_exist()))
        if created and not wait.consumed:
            await asyncio.to_thread(self._due_item(wait).save)
        return created

    async def get_wait(self, turn_id: str, call_id: str) -> ToolWait | None:
        return await asyncio.to_thread(self._get, turn_id, call_id)

    def _get(self, turn_id: str, call_id: str) -> ToolWait | None:
        try:
            item = self._wait.get(turn_pk(turn_id), WAIT_PREFIX + call_id, consistent_read=True)
        except self._wait.DoesNotExist:
            return None
        return ToolWait.model_validate_json(item.data)

    async def turn_waits(self, turn_id: str) -> list[ToolWait]:
        def query() -> list[ToolWait]:
            items = self._wait.query(
                turn_pk(turn_id), self._wait.sk.startswith(WAIT_PREFIX), consistent_read=True
            )
            return sorted(
                (ToolWait.model_validate_json(i.data) for i in items),
                key=lambda w: (w.createdAt, w.toolCallId),
            )

        return await asyncio.to_thread(query)

    async def decide(self, turn_id: str, call_id: str, changes: Mapping[str, Any]) -> ToolWait | None:
        wait = await self.get_wait(turn_id, call_id)
        if wait is None or wait.status != "pending":
            return None
        decided = wait.model_copy(update=dict(changes))
        item = self._item(decided)
        won = await conditional_write(lambda: item.save(condition=self._wait.status == "pending"))
        if not won:
            return None
        if decided.checkAt != wait.checkAt:
            await self._move_due(wait, decided.checkAt)
        return decided

    async def consume(self, turn_id: str, call_id: str) -> None:
        wait = await self.get_wait(turn_id, call_id)
        if wait is None or wait.consumed:
            return
        item = self._item(wait.model_copy(update={"consumed": True}))
        await asyncio.to_thread(item.save)
        await asyncio.to_thread(self._due_item(wait).delete)

    async def reschedule(self, wait: ToolWait, check_at: int) -> None:
        current = await self.get_wait(wait.turnId, wait.toolCallId)
        if current is None or current.consumed:
            return
        item = self._item(current.model_copy(update={"checkAt": check_at}))
        await asyncio.to_thread(item.save)
        await self._move_due(current, check_at)

    async def _move_due(self, wait: ToolWait, check_at: int) -> None:
        await asyncio.to_thread(self._due_item(wait, check_at).save)
        await asyncio.to_thread(self._due_item(wait).delete)

    async def list_waits(self, tenant_id: str, container_id: str | None = None) -> list[ToolWait]:
        prefix = WAIT_PREFIX if container_id is None else f"{WAIT_PREFIX}{container_id}#"

        def query() -> list[ToolWait]:
            out = []
            items = self._wait.query(
                tenant_pk(tenant_id), self._wait.gsi1sk.startswith(prefix), index_name=GSI1
            )
            for item in items:
                wait = ToolWait.model_validate_json(item.data)
                # A container id may contain '#': re-check what the prefix matched.
                if wait.tenantId == tenant_id and container_id in (None, wait.containerId):
                    out.append(wait)
            return out

        return await asyncio.to_thread(query)

    async def due_waits(self, now_ms: int, limit: int) -> list[ToolWait]:
        def query() -> list[ToolWait]:
            marks = list(self._due.query(DUE_PK, self._due.sk <= f"{now_ms:013d}~", limit=limit))
            out = []
            for mark in marks:
                wait = self._get(mark.turnId, mark.callId)
                if wait is None or wait.consumed or _due_sk(wait) != mark.sk:
                    mark.delete()  # a stale mark (its wait is gone, done or rescheduled)
                    continue
                out.append(wait)
            return out

        return await asyncio.to_thread(query)


__all__ = ["DueItem", "DynamoDbToolWaits", "WaitItem"]
