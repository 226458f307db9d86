"""Usage rollups on DynamoDB: per-hour and per-day sums written in the same transaction as each
usage record, so that ``/v1/usage`` never reads every record.

Items (the one table; nothing here has ``gsi1`` keys, so no index write):

==================  ======================  ===============================  =======================
item                pk                      sk                               one cell per
==================  ======================  ===============================  =======================
tenant hour shard   ``USAGEAGG#<t>``        ``H#<YYYY-MM-DDTHH>#<shard>``    model, kind
container day       ``USAGEAGG#<t>``        ``D#<YYYY-MM-DD>#<container>``   image, model, kind
tenant directory    ``USAGEDIR#<YYYY-MM>``  ``<t>``                          (none)
==================  ======================  ===============================  =======================

A cell is a handful of attributes named after a digest of its key: ``c<digest>_k`` (the key, a
JSON list, set once), ``_n`` records, ``_i`` input, ``_o`` output, ``_r`` cache-read and ``_w``
cache-write tokens, ``_e`` estimated records (a zero is simply not added). The hour item of a
tenant is split in ``HOUR_SHARDS`` shards (by the turn id), so concurrent turns of one tenant
rarely touch the same item (two transactions on one item at once: one is refused and retried).

**Exactly the records.** ``write_usage`` is one ``TransactWriteItems``: the record's put, guarded
by ``attribute_not_exists(sk)`` (a turn's usage is written once), and the ``ADD``s to its hour and
day cells. DynamoDB applies all three or none: a retried turn's second write fails its condition,
which cancels the whole transaction, so nothing is counted twice; a failed transaction (throttled,
conflicting, the process dying) writes neither the record nor the sums, and the turn's retry
writes both. There is no state in which the record exists without its sums or the reverse, so the
sums equal the records by construction (tests/contract/test_usage_rollups_contract.py checks
it by every grouping). Cost: a transaction bills each item twice, so a usage record is 2 WRU
(record) + 1 WRU (its ``gsi1`` entry) + 2 x 2 WRU (sums, items under 1 KB) = 7 WRU instead of 2:
+5 WRU, $3.13 per million records (``benchmarks/cost_meter.py`` measures it per standard turn).

The directory item (which tenants had usage in a month, for the platform's all-tenant view) is an
idempotent put written before the transaction, at most once per tenant and month per process: it
may name a tenant whose transaction then failed (a superset is harmless), never miss one.

Reads: the hour items of a range are one ``Query`` per 1 MB (eventually consistent: a sum written
a moment ago may show a moment later); the day items of the whole tenant likewise; the day items
of one container are ``BatchGetItem``s of the days' keys (100 per request).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
from typing import TYPE_CHECKING, Any

from pynamodb.exceptions import TransactWriteError
from pynamodb.expressions.operand import Path
from pynamodb.transactions import TransactWrite

from agentvm.adapters.aws.dynamodb_models import TableItem, bind_model, bind_models
from agentvm.observability.periods import (
    DAY_MS,
    HOUR_MS,
    day_key,
    hour_key,
    month_key,
    next_month,
    parse_instant,
)
from agentvm.ports import UsageCell

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agentvm.adapters.aws.dynamodb_models import RecordItem
    from agentvm.records import UsageRecord

log = logging.getLogger("agentvm.adapters.aws.usage")

AGG_PREFIX = "USAGEAGG#"
DIR_PREFIX = "USAGEDIR#"
HOUR_SHARDS = 4
_TOP = "\U0010ffff"  # sorts after any character a container id may hold
_METRICS = {
    "n": "records",
    "i": "input",
    "o": "output",
    "r": "cache_read",
    "w": "cache_write",
    "e": "estimated",
}
_ATTEMPTS = 8  # transaction conflicts are retried this often (jittered backoff from 20 ms)


class UsageAggItem(TableItem):
    """A sums item or a directory item: keys only; the cells are attributes written by name."""


def agg_pk(tenant_id: str) -> str:
    return f"{AGG_PREFIX}{tenant_id}"


def hour_sk(start_ms: int, shard: int) -> str:
    return f"H#{hour_key(start_ms)}#{shard}"


def day_sk(start_ms: int, container_id: str) -> str:
    return f"D#{day_key(start_ms)}#{container_id}"


def shard_of(turn_id: str) -> int:
    return int(hashlib.sha256(turn_id.encode()).hexdigest()[:8], 16) % HOUR_SHARDS


def _cell_name(key: list[str]) -> str:
    return "c" + hashlib.sha256(json.dumps(key).encode()).hexdigest()[:10]


def _amounts(usage: UsageRecord) -> dict[str, int]:
    values = {
        "n": 1,
        "i": usage.inputTokens,
        "o": usage.outputTokens,
        "r": usage.cacheReadTokens,
        "w": usage.cacheWriteTokens,
        "e": int(usage.estimated),
    }
    return {m: v for m, v in values.items() if v}


def _cell_actions(key: list[str], amounts: dict[str, int]) -> list[Any]:
    name = _cell_name(key)
    label = Path(f"{name}_k")
    return [label.set(label | json.dumps(key)), *(Path(f"{name}_{m}").add(v) for m, v in amounts.items())]


class DynamoUsageWriter:
    """Writes a usage record with its sums (``DynamoStore.put_usage`` delegates here)."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._models = bind_models(table_name, region, host)
        self._agg = bind_model(UsageAggItem, table_name, region, host)
        self._directory: set[tuple[str, str]] = set()  # (tenant, month) written by this process

    async def write(self, record_item: RecordItem, usage: UsageRecord) -> bool:
        """The record and its sums, all or nothing. False if the record was stored already."""
        month = month_key(usage.createdAt)
        if (usage.tenantId, month) not in self._directory:
            await asyncio.to_thread(self._agg(f"{DIR_PREFIX}{month}", usage.tenantId).save)
            self._directory.add((usage.tenantId, month))
        amounts = _amounts(usage)
        hour = self._agg(agg_pk(usage.tenantId), hour_sk(usage.createdAt, shard_of(usage.turnId)))
        day = self._agg(agg_pk(usage.tenantId), day_sk(usage.createdAt, usage.containerId))
        hour_actions = _cell_actions([usage.model, usage.kind], amounts)
        day_actions = _cell_actions([usage.imageId, usage.model, usage.kind], amounts)
        condition = self._models.record.sk.does_not_exist()
        connection = self._models.base._get_connection().connection

        def commit() -> None:
            with TransactWrite(connection=connection) as transaction:
                transaction.save(record_item, condition=condition)
                transaction.update(hour, actions=hour_actions)
                transaction.update(day, actions=day_actions)

        delay = 0.02
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                await asyncio.to_thread(commit)
                return True
            except TransactWriteError as exc:
                codes = [r.code if r is not None else "None" for r in (exc.cancellation_reasons or [])]
                if codes and codes[0] == "ConditionalCheckFailed":
                    return False  # the record exists: it (and its sums) were written before
                retryable = "TransactionConflict" in codes or exc.cause_response_code in (
                    "TransactionInProgressException",
                    "TransactionConflictException",
                )
                if not retryable or attempt == _ATTEMPTS:
                    raise
                log.info("usage transaction conflicted; retrying", extra={"attempt": attempt})
            await asyncio.sleep(delay * (0.5 + random.random()))  # noqa: S311 (jitter, not crypto)
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")


class DynamoUsageRollups:
    """``agentvm.ports.UsageRollups`` on the sums items ``DynamoUsageWriter`` keeps."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._agg = bind_model(UsageAggItem, table_name, region, host)
        self.table_name = table_name
        self.queries = 0  # read requests made (Query pages, BatchGetItem calls)

    def _connection(self) -> Any:
        return self._agg._get_connection()

    def _query(self, pk: str, low: str | None = None, high: str | None = None) -> list[dict[str, Any]]:
        """Every item of the partition (whose sk is in ``[low, high]``), eventually consistent."""
        items: list[dict[str, Any]] = []
        start: Any = None
        between = Path("sk").between(low, high) if low is not None else None
        while True:
            page = self._connection().query(pk, range_key_condition=between, exclusive_start_key=start)
            self.queries += 1
            items.extend(page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start:
                return items

    def _batch_get(self, keys: list[dict[str, str]]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        table = self._agg.Meta.table_name
        for first in range(0, len(keys), 100):
            pending = keys[first : first + 100]
            while pending:
                out = self._connection().batch_get_item(pending)
                self.queries += 1
                items.extend(out.get("Responses", {}).get(table, []))
                unprocessed = out.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
                pending = [{k: next(iter(v.values())) for k, v in key.items()} for key in unprocessed]
        return items

    async def hour_cells(self, tenant_id: str, start_ms: int, end_ms: int) -> list[UsageCell]:
        if end_ms <= start_ms:
            return []
        low, high = f"H#{hour_key(start_ms)}", f"H#{hour_key(end_ms - HOUR_MS)}#{_TOP}"
        items = await asyncio.to_thread(self._query, agg_pk(tenant_id), low, high)
        out: list[UsageCell] = []
        for item in items:
            start = _hour_ms(item["sk"]["S"])
            for key, sums in _cells(item):
                model, kind = key
                out.append(UsageCell(tenant_id, start, model, kind, **sums))
        return out

    async def day_cells(
        self, tenant_id: str, start_ms: int, end_ms: int, container_id: str | None = None
    ) -> list[UsageCell]:
        if end_ms <= start_ms:
            return []
        pk = agg_pk(tenant_id)
        if container_id is None:
            low, high = f"D#{day_key(start_ms)}#", f"D#{day_key(end_ms - DAY_MS)}#{_TOP}"
            items = await asyncio.to_thread(self._query, pk, low, high)
        else:
            days = range(start_ms, end_ms, DAY_MS)
            keys = [{"pk": pk, "sk": day_sk(day, container_id)} for day in days]
            items = await asyncio.to_thread(self._batch_get, keys)
        out: list[UsageCell] = []
        for item in items:
            sk = item["sk"]["S"]
            start, container = _day_ms(sk), sk[len("D#YYYY-MM-DD#") :]
            for key, sums in _cells(item):
                image, model, kind = key
                out.append(UsageCell(tenant_id, start, model, kind, container, image, **sums))
        return out

    async def tenants_with_usage(self, start_ms: int, end_ms: int) -> list[str]:
        months: list[str] = []
        at = start_ms
        while at < end_ms:
            months.append(month_key(at))
            at = next_month(at)

        def read() -> list[str]:
            found: set[str] = set()
            for month in months:
                items = self._query(f"{DIR_PREFIX}{month}")
                found.update(item["sk"]["S"] for item in items)
            return sorted(found)

        return await asyncio.to_thread(read)


def _cells(item: dict[str, Any]) -> Iterable[tuple[list[str], dict[str, int]]]:
    """(cell key, sums) of every cell of a raw item."""
    sums: dict[str, dict[str, int]] = {}
    keys: dict[str, list[str]] = {}
    for name, value in item.items():
        if not name.startswith("c") or "_" not in name:
            continue
        cell, metric = name.rsplit("_", 1)
        if metric == "k":
            keys[cell] = json.loads(value["S"])
        elif metric in _METRICS:
            sums.setdefault(cell, {})[_METRICS[metric]] = int(value["N"])
    for cell, key in keys.items():
        got = sums.get(cell, {})
        yield (
            key,
            {
                "records": got.get("records", 0),
                "input_tokens": got.get("input", 0),
                "output_tokens": got.get("output", 0),
                "cache_read_tokens": got.get("cache_read", 0),
                "cache_write_tokens": got.get("cache_write", 0),
                "estimated": got.get("estimated", 0),
            },
        )


def _hour_ms(sk: str) -> int:
    value = parse_instant(sk[2:15])  # "H#YYYY-MM-DDTHH#<shard>"
    assert value is not None, sk
    return value


def _day_ms(sk: str) -> int:
    value = parse_instant(sk[2:12])  # "D#YYYY-MM-DD#<container>"
    assert value is not None, sk
    return value


__all__ = [
    "HOUR_SHARDS",
    "DynamoUsageRollups",
    "DynamoUsageWriter",
    "UsageAggItem",
    "agg_pk",
    "day_sk",
    "hour_sk",
]
