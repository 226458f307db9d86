"""The ``Counters`` port on DynamoDB (PynamoDB), on AgentVM's single table.

=====================  ========================  ===============================================
item                   pk / sk                   attributes
=====================  ========================  ===============================================
counter                ``COUNTER#<key>`` /       ``c_<field>`` (Number) per field, ``expiresAt``
                       ``META``                  (the table's TTL attribute: end of the window)
=====================  ========================  ===============================================

``incr`` is one ``UpdateItem`` (``ADD c_<f> :n ... SET expiresAt = :e``, ``ReturnValues=UPDATED_NEW``),
atomic across concurrent writers; an item under 1 KB costs 1 write unit. ``get`` is one eventually
consistent GetItem (0.5 read units). TTL deletion is lazy (typically within two days), so an item
past ``expiresAt`` is treated as absent here: ``get`` ignores it, and ``incr`` replaces it (a
conditional update, and on a failed condition one conditional put: only when a key is reused after
its window, which AgentVM's keys, carrying their window, never are).

``lease`` (add up to ``amount`` without going over ``limit``: the per-key rate limit's leases) is
one conditional ``UpdateItem``, ``ADD c_<f> :a SET expiresAt = :e`` if ``attribute_not_exists(c_<f>)
OR c_<f> <= :limit_minus_a`` (and the window is live), with ``ReturnValuesOnConditionCheckFailure=
ALL_OLD``: 1 write unit. When the condition fails (the failed write is billed too: 1 WRU) the
returned item tells what is left: nothing left grants 0 with no further request; else the update
is tried again for what is left (a second write, only in a window's last requests; never for a
``whole`` lease, all or nothing, whose failed condition is its answer: 0 granted); a window that
is over is restarted with the same conditional put as ``incr``'s. DynamoDB applies each update
atomically, so the grants of concurrent lessees never add up past ``limit``.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, cast

from botocore.exceptions import ClientError
from pynamodb.exceptions import PutError, UpdateError
from pynamodb.expressions.operand import Path

from agentvm.adapters.aws.dynamodb.models import META, TTL_ATTRIBUTE, bind_models
from agentvm.ports import CounterLease

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from mypy_boto3_dynamodb.client import DynamoDBClient

FIELD_RE = re.compile(r"[a-z0-9]{1,16}")
_PREFIX = "c_"
_CONDITION_FAILED = "ConditionalCheckFailedException"


def counter_pk(key: str) -> str:
    return f"COUNTER#{key}"


class DynamoDbCounters:
    """``agentvm.ports.Counters`` on the single DynamoDB table. Blocking calls run in a thread."""

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        host: str | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        # The table's base model: a counter's fields are dynamic attributes (c_<field>) and its window
        # end is plain epoch seconds, so both are written and compared as raw paths.
        self._table = bind_models(table_name, region, host).base
        self._now = now

    async def incr(self, key: str, amounts: Mapping[str, int], *, expires_at: int) -> dict[str, int]:
        if not amounts or not all(FIELD_RE.fullmatch(f) for f in amounts):
            raise ValueError("counter field names are 1-16 characters of [a-z0-9] (at least one)")
        return await asyncio.to_thread(self._incr, key, dict(amounts), expires_at)

    async def lease(
        self, key: str, field: str, amount: int, *, limit: int, expires_at: int, whole: bool = False
    ) -> CounterLease:
        if not FIELD_RE.fullmatch(field):
            raise ValueError("counter field names are 1-16 characters of [a-z0-9]")
        if amount < 1 or limit < 1:
            raise ValueError(f"a lease needs amount >= 1 and limit >= 1, got {amount} and {limit}")
        if whole and amount > limit:  # never fits: no write, only the value to report
            return CounterLease(0, (await self.get(key)).get(field, 0))
        amount = min(amount, limit)
        return await asyncio.to_thread(self._lease, key, field, amount, limit, expires_at, whole)

    async def get(self, key: str) -> dict[str, int]:
        return await asyncio.to_thread(self._get, key)

    # blocking parts

    def _incr(self, key: str, amounts: dict[str, int], expires_at: int) -> dict[str, int]:
        connection = self._table._get_connection()
        pk = counter_pk(key)
        for _ in range(3):
            now = int(self._now())
            try:
                data = connection.update_item(
                    pk,
                    META,
                    actions=[
                        *(Path(_PREFIX + f).add(int(n)) for f, n in amounts.items()),
                        Path(TTL_ATTRIBUTE).set(expires_at),
                    ],
                    condition=self._table.pk.does_not_exist() | (Path(TTL_ATTRIBUTE) > now),
                    return_values="UPDATED_NEW",
                )
                attributes = data["Attributes"]
                return {f: int(attributes[_PREFIX + f]["N"]) for f in amounts}
            except UpdateError as exc:
                if exc.cause_response_code != _CONDITION_FAILED:
                    raise
            # The item exists but its window is over (TTL has not deleted it yet): start it over.
            if self._restart(key, amounts, expires_at, now):
                return {f: int(n) for f, n in amounts.items()}
            # another writer restarted it between our two calls: add to theirs
        raise RuntimeError(f"counter {key!r} kept changing under concurrent restarts")

    def _lease(
        self, key: str, field: str, amount: int, limit: int, expires_at: int, whole: bool
    ) -> CounterLease:
        # PynamoDB types its client as a bare botocore client; it is DynamoDB's.
        client = cast("DynamoDBClient", self._table._get_connection().connection.client)
        table = self._table.Meta.table_name
        item_key = {"pk": {"S": counter_pk(key)}, "sk": {"S": META}}
        for _ in range(8):
            now = int(self._now())
            try:
                data = client.update_item(
                    TableName=table,
                    Key=item_key,
                    UpdateExpression="ADD #f :a SET #e = :e",
                    ConditionExpression=(
                        "(attribute_not_exists(pk) OR #e > :now) AND (attribute_not_exists(#f) OR #f <= :m)"
                    ),
                    ExpressionAttributeNames={"#f": _PREFIX + field, "#e": TTL_ATTRIBUTE},
                    ExpressionAttributeValues={
                        ":a": {"N": str(amount)},
                        ":e": {"N": str(expires_at)},
                        ":now": {"N": str(now)},
                        ":m": {"N": str(limit - amount)},
                    },
                    ReturnValues="UPDATED_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return CounterLease(amount, int(data["Attributes"][_PREFIX + field]["N"]))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != _CONDITION_FAILED:
                    raise
                # ReturnValuesOnConditionCheckFailure's item (botocore-stubs' error response lacks it)
                old = cast("dict[str, Any] | None", exc.response.get("Item"))
            if old is None:  # not every DynamoDB look-alike returns the item: read it
                old = client.get_item(TableName=table, Key=item_key, ConsistentRead=True).get("Item", {})
            if _expired(old, now):
                # The item exists but its window is over (TTL has not deleted it yet): start it over.
                if self._restart(key, {field: amount}, expires_at, now):
                    return CounterLease(amount, amount)
                continue
            value = int(old.get(_PREFIX + field, {}).get("N", "0"))
            if value >= limit or whole:  # whole: the condition failed, so it does not all fit
                return CounterLease(0, value)
            amount = min(amount, limit - value)  # what is left; another lessee may take it first
        raise RuntimeError(f"counter {key!r} kept changing under concurrent leases")

    def _restart(self, key: str, amounts: Mapping[str, int], expires_at: int, now: int) -> bool:
        """Start a counter whose window is over afresh at ``amounts`` (one conditional put); False
        if another writer restarted it first (its window is live again: add to it instead)."""
        try:
            self._table._get_connection().put_item(
                counter_pk(key),
                META,
                attributes={
                    **{_PREFIX + f: {"N": str(int(n))} for f, n in amounts.items()},
                    TTL_ATTRIBUTE: {"N": str(expires_at)},
                },
                condition=Path(TTL_ATTRIBUTE) <= now,
            )
        except PutError as exc:
            if exc.cause_response_code != _CONDITION_FAILED:
                raise
            return False
        return True

    def _get(self, key: str) -> dict[str, int]:
        item = self._table._get_connection().get_item(counter_pk(key), META).get("Item")
        if not item:
            return {}
        expires_at = item.get(TTL_ATTRIBUTE)
        if expires_at is not None and int(expires_at["N"]) <= int(self._now()):
            return {}
        return {
            name.removeprefix(_PREFIX): int(value["N"])
            for name, value in item.items()
            if name.startswith(_PREFIX) and "N" in value
        }


def _expired(item: dict[str, Any], now: int) -> bool:
    expires_at = item.get(TTL_ATTRIBUTE)
    return bool(item) and expires_at is not None and int(expires_at["N"]) <= now


__all__ = ["DynamoDbCounters"]
