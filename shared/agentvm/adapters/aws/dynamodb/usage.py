"""Usage sums on DynamoDB: the usage records are the truth; closed hours are rolled up into sums
items by a scheduled job, idempotently; a report reads the sums of rolled hours and the records of
the others, so it is exact at any moment without reading every record.

Items (the one table):

=================  ==================  ===============================  ===========================
item               pk                  sk                               gsi2pk / gsi2sk
=================  ==================  ===============================  ===========================
usage record       ``TURN#<turn>``     ``USAGE``                        ``USAGEHOUR#<t>#<hour>`` /
                                                                        ``USAGE#<c>#<turn>``
hour marker        ``USAGEAGG#<t>``    ``H#<YYYY-MM-DDTHH>``            ``USAGEOPEN#<n>`` /
                                                                        ``<hour>#<t>`` (until rolled)
container day      ``USAGEAGG#<t>``    ``D#<YYYY-MM-DD>#<container>``   (none)
tenant directory   ``USAGEDIR#<m>``    ``<t>``                          (none)
=================  ==================  ===============================  ===========================

``<hour>`` is the UTC hour of the record's ``createdAt`` (what reports group by): the record's
hour for the reads, the rollup and the marker alike.

**Writing a record** (``DynamoDbUsageWriter.write``): the put of the record, conditional on
``attribute_not_exists`` (a retried turn writes it once), with its ``gsi2`` keys; no transaction,
no sums. Before it, the tenant's **hour marker** is touched (``ADD v 1, SET at = now``, and its
``gsi2`` keys, which list it as an hour to roll up): once per tenant and hour per process while
the hour is open, and again by every *late* write (one whose record's hour had ended when it was
written). The touch comes first, so a record never exists without its marker (a marker without
a record, when the put then fails, is harmless: its rollup sums nothing).

**Why a record is its own item, put when its model call ends** (not carried by the turn's final
``META`` write, not keyed by its hour). Its conditional put on ``TURN#<turn>``/``USAGE`` is the first
durable write after the call (``turns/hooks.py``, ``step_finished``), before the reply: a worker that
dies after it and before the reply makes a redelivery call the model again, and the first call's
record stays the turn's one record; a worker that dies after the reply and before the final status
makes a redelivery finish from the stored reply without any model call, and only this record holds
the call's usage (the reply's ``usage`` has input and output tokens only). Carried by the final
status instead, that usage would be lost on both paths, and the carrier would be in ``gsi2`` (projection
ALL) with its frame map: 2 + 2 WRU for the standard turn, against 1 + 2. Keyed by hour instead of
by turn, the condition would not stop a redelivery in a later hour from writing a second record.
``tests/functions/test_exactly_once_aws.py`` pins both crash paths; docs/cost.md ("Considered, not
done") has the figures.

**The rollup** (``DynamoDbUsageRollups.roll_closed_hours``, run every minute by
``functions/wait_sweeper``): it Queries ``gsi2``'s ``USAGEOPEN#<n>`` partitions (8, by a hash of the
tenant, so that the touches at the top of an hour spread) for markers of hours that ended more than
``GRACE_MS`` (10 minutes) ago, at most ``limit`` per run (oldest first; the next run takes the rest;
a marker touched within the grace is skipped and comes first again next run, so more than ``limit``
late-touched hours at once delay the others by up to the grace). For each: a strongly consistent
GetItem of the marker (its version ``v`` and last touch ``at``); nothing if touched less than the
grace ago; else a Query of the hour's records on ``gsi2``, their sums written with plain overwrites:
the per-container part of each day item (``SET h<HH> = <json>, h<HH>v = v``, refused if a newer
version's part is there) then the marker (``SET cells = <json>, rv = v REMOVE gsi2pk, gsi2sk``, on
condition ``v`` is unchanged: the commit). A rollup run twice, or by two jobs at once, writes the
same sums; a rollup that dies midway leaves the marker unrolled, and the next run redoes it.

**Why it is exact.** An hour is *rolled* when its marker's ``rv`` equals its ``v``. Every record
of an hour touched its marker before its put; a touch after the rollup read the marker makes ``v``
differ, so either the commit fails (the hour stays open) or the hour reads as unrolled again and
is rolled again later. What the rollup must not miss is a record whose touch came *before* its
GetItem but whose put is not yet visible in its Query: the rollup waits until the marker's last
touch, and the hour's end, are ``GRACE_MS`` old, and a non-late write touched while the hour was
open (the process's touch stays valid only until the hour ends; after, every write touches again
with its own time). So the one assumption is that a put (botocore's retries included, seconds at
most) and its ``gsi2`` propagation (normally under a second), plus any skew between the writer's
and the job's clocks (NTP-synchronised on AWS: milliseconds), take less than 10 minutes from the
moment the write began. A report reads each hour's marker (strongly consistent): for a rolled
hour its sums, for any other hour (the current one, one within its grace, one the job has not
reached, one re-opened by a late write) the records themselves (one ``gsi2`` Query each,
eventually consistent like any index: a record written a moment ago may show a moment later).
A day item's part is used only if its version is the marker's ``rv``; else that hour is read from
the records. tests/contract/test_usage_rollups_contract.py checks "sums == records" by every
grouping before, during and after rollups; tests/contract/test_dynamodb_usage.py the rest.

**Listing the records** (``records``, for ``DynamoDbStore.list_usage``: ``GET /v1/usage`` and
session exports, the only readers that need records rather than sums). A record has no ``gsi1``
keys: its ``gsi2`` entry is the only index it is written to. The reader Queries the tenant's hour
markers (strongly consistent; one per hour that ever had a record, never deleted) and, for each,
that hour's ``gsi2`` partition (``begins_with(gsi2sk, "USAGE#<c>#")`` for one container), 8 hours
at a time. It misses no record: a record is put only after its hour's marker was touched, so a
record visible on ``gsi2`` has a visible marker; the ``gsi2`` Query is eventually consistent, as
the ``gsi1`` one it replaces was. Records stored before (with ``gsi1`` keys: the transactional
version's, which have no ``gsi2`` keys, and the previous version's, which have both, with
``gsi2sk`` ``TURN#<turn>``) are still listed from ``gsi1``; ``list_usage`` keeps one record per
turn. The price: one Query per active hour of the tenant (0.5 RRU each, at least) where ``gsi1``
read the tenant's records in pages of 1 MB: for ``/v1/usage``, already a read of every record
the tenant has, tens of milliseconds more per thousand active hours, 8 Queries at a time.

**Cost** (per usage record, ~0.4 KB): the put 1 WRU, its ``gsi2`` entry 1: **2 WRU** (3 while
records were also written to ``gsi1``; the transaction before them: 7 on AWS, 8 as the cost meter
bills it). Per tenant, hour
and process: a marker touch (1 WRU + 1 for its ``gsi2`` entry). Per tenant and closed hour, the
job: a ``gsi2`` Query of the markers (shared), a GetItem (1 RRU), a Query of the hour's records
(0.5 RRU per 4 KB: ~10 records), the marker's commit (1 WRU + 1 for leaving ``gsi2``) and one
day-item write per container active in the hour (1 WRU per KB of that day item: its parts grow
through the day, ~100 B per cell and hour). Reads cost a strongly consistent Query of the markers
of the range and a ``gsi2`` Query per unrolled hour.

Items written by the transactional version (before this one) are still read: its hour shards
``H#<hour>#<n>`` and the ``c<digest>_<metric>`` cells of day items hold the sums of the records
written then (which have no ``gsi2`` keys, so no rollup counts them again), and are added.

A rolled cell's sums (the marker's ``cells`` and the day items' ``h<HH>`` parts, JSON) are
``[records, input, output, cache read, cache write, estimated, saved input, saved output]``: the
last two are what reply-cache hits saved (``UsageRecord.savedInputTokens`` / ``savedOutputTokens``).
Sums rolled before they existed have the first six and read as 0 for the others; so do the
transactional version's cells.

The directory item (which tenants had usage in a month, for the platform's all-tenant view) is an
idempotent put written before the record, at most once per tenant and month per process: it may
name a tenant whose record then failed (a superset is harmless), never miss one.

Its size (~650 lines, a fifth of it this note): the item layout above binds the writer and the
rollup, which must agree on every key; they stay in one module so that they are read together.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from pynamodb.exceptions import PynamoDBException

from agentvm.adapters.aws.dynamodb.models import GSI2, TableItem, bind_model, bind_models
from agentvm.observability.periods import (
    DAY_MS,
    HOUR_MS,
    day_key,
    day_start,
    hour_key,
    hour_start,
    month_key,
    next_month,
    parse_instant,
)
from agentvm.ports import UsageCell
from agentvm.records import UsageRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from agentvm.adapters.aws.dynamodb.models import RecordItem


AGG_PREFIX = "USAGEAGG#"
DIR_PREFIX = "USAGEDIR#"
HOUR_PREFIX = "USAGEHOUR#"
RECORD_PREFIX = "USAGE#"  # a usage record's gsi2sk (``usage_gsi2sk``)
OPEN_PREFIX = "USAGEOPEN#"
OPEN_SHARDS = 8  # gsi2 partitions of the open markers: the top of an hour's touches spread over 8
GRACE_MS = 10 * 60_000  # an hour is rolled up once it (and its last late write) is this old
ROLLUP_LIMIT = 200  # tenant hours one rollup run takes at most (~5 requests each: seconds)
_MARKER_SK_LEN = len("H#YYYY-MM-DDTHH")
_TOP = "\U0010ffff"  # sorts after any character a container id may hold
_METRICS = {
    "n": "records",
    "i": "input",
    "o": "output",
    "r": "cache_read",
    "w": "cache_write",
    "e": "estimated",
}
_CONDITION_FAILED = "ConditionalCheckFailedException"
_HOURS_REMEMBERED = 4096  # (tenant, hour) touches a process remembers before forgetting them all
RECORD_READERS = 8  # hours ``records`` reads at once (one Query each)


class UsageAggItem(TableItem):
    """A sums item or a directory item: keys only; the cells are attributes written by name."""


def agg_pk(tenant_id: str) -> str:
    return f"{AGG_PREFIX}{tenant_id}"


def open_pk(tenant_id: str) -> str:
    """The ``gsi2`` partition listing a tenant's hours to roll up (one of ``OPEN_SHARDS``)."""
    shard = int(hashlib.sha256(tenant_id.encode()).hexdigest()[:8], 16) % OPEN_SHARDS
    return f"{OPEN_PREFIX}{shard}"


def marker_sk(start_ms: int) -> str:
    return f"H#{hour_key(start_ms)}"


def usage_gsi2pk(tenant_id: str, created_at: int) -> str:
    """The ``gsi2`` partition of a usage record: its tenant and the UTC hour of its ``createdAt``."""
    return f"{HOUR_PREFIX}{tenant_id}#{hour_key(created_at)}"


def usage_gsi2sk(container_id: str, turn_id: str) -> str:
    """The ``gsi2`` sort key of a usage record: its container first, so one container's records of
    an hour are one key range (``begins_with``; a container whose id merely starts with
    ``<container>#`` is dropped by the reader)."""
    return f"{RECORD_PREFIX}{container_id}#{turn_id}"


def day_sk(start_ms: int, container_id: str) -> str:
    return f"D#{day_key(start_ms)}#{container_id}"


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


# sums: key (a tuple of strings) -> [records, input, output, cache read, cache write, estimated,
# saved input, saved output] (the reply cache's saved tokens: sums written before them have 6 values)
_Sums = dict[tuple[str, ...], list[int]]
_WIDTH = 8


class _CellSums(TypedDict):
    """One cell's sums, by ``UsageCell``'s field names."""

    records: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    estimated: int
    saved_input_tokens: int
    saved_output_tokens: int


def _add(sums: _Sums, key: tuple[str, ...], usage: UsageRecord) -> None:
    row = sums.setdefault(key, [0] * _WIDTH)
    for n, value in enumerate(
        (
            1,
            usage.inputTokens,
            usage.outputTokens,
            usage.cacheReadTokens,
            usage.cacheWriteTokens,
            int(usage.estimated),
            usage.savedInputTokens,
            usage.savedOutputTokens,
        )
    ):
        row[n] += value


def _dump(sums: _Sums) -> str:
    return json.dumps(sorted([list(k), v] for k, v in sums.items()), separators=(",", ":"))


def _load(text: str) -> Iterable[tuple[list[str], _CellSums]]:
    for key, values in json.loads(text):
        yield key, _sum_fields(*values)  # 6 values (sums rolled before the saved tokens): they are 0


def _sum_fields(n: int, i: int, o: int, r: int, w: int, e: int, si: int = 0, so: int = 0) -> _CellSums:
    return {
        "records": n,
        "input_tokens": i,
        "output_tokens": o,
        "cache_read_tokens": r,
        "cache_write_tokens": w,
        "estimated": e,
        "saved_input_tokens": si,
        "saved_output_tokens": so,
    }


class DynamoDbUsageWriter:
    """Writes a usage record and touches its hour marker (``DynamoDbStore.put_usage`` delegates here)."""

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        host: str | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._models = bind_models(table_name, region, host)
        self._agg = bind_model(UsageAggItem, table_name, region, host)
        self.table_name = table_name
        self.clock = clock or _wall_ms
        self._directory: set[tuple[str, str]] = set()  # (tenant, month) written by this process
        self._hours: set[tuple[str, int]] = set()  # (tenant, hour) touched while it was open

    def _client(self) -> Any:
        return self._agg._get_connection().connection.client

    def _touch(self, tenant_id: str, start_ms: int, now: int) -> None:
        self._client().update_item(
            TableName=self.table_name,
            Key={"pk": {"S": agg_pk(tenant_id)}, "sk": {"S": marker_sk(start_ms)}},
            UpdateExpression="SET #at = :now, gsi2pk = :open, gsi2sk = :osk ADD #v :one",
            ExpressionAttributeNames={"#at": "at", "#v": "v"},
            ExpressionAttributeValues={
                ":now": {"N": str(now)},
                ":open": {"S": open_pk(tenant_id)},
                ":osk": {"S": f"{hour_key(start_ms)}#{tenant_id}"},
                ":one": {"N": "1"},
            },
        )

    async def write(self, record_item: RecordItem, usage: UsageRecord) -> bool:
        """The record, once (its hour marker touched first). False if it was stored already."""
        month = month_key(usage.createdAt)
        if (usage.tenantId, month) not in self._directory:
            await asyncio.to_thread(self._agg(f"{DIR_PREFIX}{month}", usage.tenantId).save)
            self._directory.add((usage.tenantId, month))
        start, now = hour_start(usage.createdAt), self.clock()
        late = now >= start + HOUR_MS  # the hour has ended: its rollup may be near, touch again
        if late or (usage.tenantId, start) not in self._hours:
            await asyncio.to_thread(self._touch, usage.tenantId, start, now)
            if not late:
                if len(self._hours) >= _HOURS_REMEMBERED:
                    self._hours.clear()
                self._hours.add((usage.tenantId, start))
        record_item.gsi2pk = usage_gsi2pk(usage.tenantId, usage.createdAt)
        record_item.gsi2sk = usage_gsi2sk(usage.containerId, usage.turnId)
        condition = self._models.record.sk.does_not_exist()
        try:
            await asyncio.to_thread(record_item.save, condition=condition)
        except PynamoDBException as exc:
            if exc.cause_response_code == _CONDITION_FAILED:
                return False  # the record exists: a retried turn's usage is counted once
            raise
        return True


@dataclass(frozen=True, slots=True)
class RollupRun:
    """What one ``roll_closed_hours`` run did."""

    rolled: int = 0  # tenant hours whose sums were written
    skipped: int = 0  # touched within the grace, rolled already, or overtaken by a newer touch
    more: bool = False  # it stopped at its limit: markers of closed hours may be left


class DynamoDbUsageRollups:
    """``agentvm.ports.UsageRollups`` on the usage records, the hour markers and the day items."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._agg = bind_model(UsageAggItem, table_name, region, host)
        self.table_name = table_name
        self.queries = 0  # read requests made (Query pages, GetItem and BatchGetItem calls)
        self._count = threading.Lock()  # ``records`` reads hours from several threads

    def _client(self) -> Any:
        return self._agg._get_connection().connection.client

    def _query(self, pk: str, low: str | None = None, high: str | None = None) -> list[dict[str, Any]]:
        """Every item of the table partition (whose sk is in ``[low, high]``), strongly consistent."""
        values: dict[str, Any] = {":pk": {"S": pk}}
        condition = "pk = :pk"
        if low is not None and high is not None:
            condition += " AND sk BETWEEN :low AND :high"
            values |= {":low": {"S": low}, ":high": {"S": high}}
        return self._pages(
            KeyConditionExpression=condition, ExpressionAttributeValues=values, ConsistentRead=True
        )

    def _pages(self, *, limit: int | None = None, **request: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        start: Any = None
        while True:
            if start:
                request["ExclusiveStartKey"] = start
            if limit is not None:
                request["Limit"] = limit - len(items)
            page = self._client().query(TableName=self.table_name, **request)
            with self._count:
                self.queries += 1
            items.extend(page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start or (limit is not None and len(items) >= limit):
                return items

    def _records(self, tenant_id: str, start_ms: int, container_id: str | None = None) -> list[UsageRecord]:
        """The records of one tenant hour (a ``gsi2`` Query: eventually consistent); with
        ``container_id``, that container's written since records left ``gsi1`` (``records``)."""
        condition, values = "gsi2pk = :pk", {":pk": {"S": usage_gsi2pk(tenant_id, start_ms)}}
        if container_id is not None:
            condition += " AND begins_with(gsi2sk, :sk)"
            values[":sk"] = {"S": f"{RECORD_PREFIX}{container_id}#"}
        items = self._pages(
            IndexName=GSI2, KeyConditionExpression=condition, ExpressionAttributeValues=values
        )
        records = [UsageRecord.model_validate_json(item["data"]["S"]) for item in items]
        return [
            r
            for r in records
            if r.tenantId == tenant_id
            and hour_start(r.createdAt) == start_ms
            and (container_id is None or r.containerId == container_id)
        ]

    async def records(
        self, tenant_id: str, container_id: str | None = None, *, since_ms: int = 0
    ) -> list[UsageRecord]:
        """The tenant's usage records that have ``gsi2`` keys (of one container with
        ``container_id``), unordered: the tenant's hour markers (one strongly consistent Query),
        then one ``gsi2`` Query per hour that has one, ``RECORD_READERS`` at a time. Every such
        record's marker was touched before it was put, and markers are never deleted, so no hour
        is missed. Records of the transactional version (no ``gsi2`` keys) are not here: they
        have ``gsi1`` keys (``DynamoDbStore.list_usage`` reads both). With ``since_ms``, the hours
        from the one holding it on (a session export: from its session's creation)."""

        def read() -> list[UsageRecord]:
            hours = sorted(
                _hour_ms(item["sk"]["S"])
                for item in self._query(agg_pk(tenant_id), f"H#{hour_key(hour_start(since_ms))}", f"H#{_TOP}")
                if len(item["sk"]["S"]) == _MARKER_SK_LEN  # not an hour shard of the old version
            )
            if not hours:
                return []
            with ThreadPoolExecutor(max_workers=min(RECORD_READERS, len(hours))) as pool:
                found = pool.map(lambda hour: self._records(tenant_id, hour, container_id), hours)
                return [record for records in found for record in records]

        return await asyncio.to_thread(read)

    def _batch_get(self, keys: list[dict[str, str]]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for first in range(0, len(keys), 100):
            pending: list[dict[str, Any]] = [
                {"pk": {"S": k["pk"]}, "sk": {"S": k["sk"]}} for k in keys[first : first + 100]
            ]
            while pending:
                request = {self.table_name: {"Keys": pending, "ConsistentRead": True}}
                out = self._client().batch_get_item(RequestItems=request)
                self.queries += 1
                items.extend(out.get("Responses", {}).get(self.table_name, []))
                pending = out.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
        return items

    def _hour_items(self, tenant_id: str, start_ms: int, end_ms: int) -> list[dict[str, Any]]:
        """The markers of the hours in ``[start_ms, end_ms)``, and the old version's hour shards."""
        low, high = f"H#{hour_key(start_ms)}", f"H#{hour_key(end_ms - HOUR_MS)}#{_TOP}"
        return self._query(agg_pk(tenant_id), low, high)

    async def hour_cells(self, tenant_id: str, start_ms: int, end_ms: int) -> list[UsageCell]:
        if end_ms <= start_ms:
            return []

        def read() -> list[UsageCell]:
            out: list[UsageCell] = []
            for item in self._hour_items(tenant_id, start_ms, end_ms):
                start = _hour_ms(item["sk"]["S"])
                if len(item["sk"]["S"]) > _MARKER_SK_LEN:  # an hour shard of the old version
                    cells: Iterable[tuple[list[str], _CellSums]] = _cells(item)
                elif _rolled(item) is not None:
                    cells = _load(item["cells"]["S"])
                else:
                    sums: _Sums = {}
                    for r in self._records(tenant_id, start):
                        _add(sums, (r.model, r.kind), r)
                    cells = ((list(k), _sum_fields(*v)) for k, v in sums.items())
                for (model, kind), values in cells:
                    out.append(UsageCell(tenant_id, start, model, kind, **values))
            return out

        return await asyncio.to_thread(read)

    async def day_cells(
        self, tenant_id: str, start_ms: int, end_ms: int, container_id: str | None = None
    ) -> list[UsageCell]:
        if end_ms <= start_ms:
            return []
        pk = agg_pk(tenant_id)

        def read() -> list[UsageCell]:
            rolled: dict[int, int] = {}  # hour -> the version its sums were rolled from
            raw: set[int] = set()  # hours read from the records
            for item in self._hour_items(tenant_id, start_ms, end_ms):
                if len(item["sk"]["S"]) == _MARKER_SK_LEN:
                    version = _rolled(item)
                    if version is None:
                        raw.add(_hour_ms(item["sk"]["S"]))
                    else:
                        rolled[_hour_ms(item["sk"]["S"])] = version
            if container_id is None:
                low, high = f"D#{day_key(start_ms)}#", f"D#{day_key(end_ms - DAY_MS)}#{_TOP}"
                items = self._query(pk, low, high)
            else:
                days = range(start_ms, end_ms, DAY_MS)
                items = self._batch_get([{"pk": pk, "sk": day_sk(day, container_id)} for day in days])
            # a part of another version than its hour's commit (a rollup overtaken midway): that
            # hour is read from the records, for every container (first pass), then the parts
            for item in items:
                for hour, version, _ in _parts(item, _day_ms(item["sk"]["S"])):
                    if hour not in raw and rolled.get(hour) != version:
                        raw.add(hour)
            out: list[UsageCell] = []
            for item in items:
                sk = item["sk"]["S"]
                day, container = _day_ms(sk), sk[len("D#YYYY-MM-DD#") :]
                cells = list(_cells(item))  # the old version's sums
                cells += [c for hour, _, text in _parts(item, day) if hour not in raw for c in _load(text)]
                for (image, model, kind), values in cells:
                    out.append(UsageCell(tenant_id, day, model, kind, container, image, **values))
            for hour in sorted(raw):
                if not start_ms <= hour < end_ms:
                    continue
                sums: _Sums = {}
                for r in self._records(tenant_id, hour):
                    if container_id is None or r.containerId == container_id:
                        _add(sums, (r.containerId, r.imageId, r.model, r.kind), r)
                day = day_start(hour)
                for (container, image, model, kind), row in sums.items():
                    out.append(UsageCell(tenant_id, day, model, kind, container, image, **_sum_fields(*row)))
            return out

        return await asyncio.to_thread(read)

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

    # the rollup

    async def roll_closed_hours(self, now_ms: int, limit: int = ROLLUP_LIMIT) -> RollupRun:
        """Roll up the hours that ended more than ``GRACE_MS`` before ``now_ms``: at most ``limit``."""
        return await asyncio.to_thread(self._roll, now_ms, limit)

    def _roll(self, now_ms: int, limit: int) -> RollupRun:
        closed_before = hour_key(hour_start(now_ms - GRACE_MS))  # hours starting before it ended
        markers: list[dict[str, Any]] = []
        for shard in range(OPEN_SHARDS):
            if len(markers) >= limit:
                break
            markers += self._pages(
                IndexName=GSI2,
                KeyConditionExpression="gsi2pk = :open AND gsi2sk < :closed",
                ExpressionAttributeValues={
                    ":open": {"S": f"{OPEN_PREFIX}{shard}"},
                    ":closed": {"S": closed_before},
                },
                limit=limit - len(markers),
            )
        rolled = skipped = 0
        for marker in markers:
            hour_text, tenant_id = marker["gsi2sk"]["S"].split("#", 1)
            start = parse_instant(hour_text)
            assert start is not None, hour_text
            if self._roll_hour(tenant_id, start, now_ms):
                rolled += 1
            else:
                skipped += 1
        return RollupRun(rolled, skipped, more=len(markers) >= limit)

    def _roll_hour(self, tenant_id: str, start: int, now_ms: int) -> bool:
        key = {"pk": {"S": agg_pk(tenant_id)}, "sk": {"S": marker_sk(start)}}
        got = self._client().get_item(TableName=self.table_name, Key=key, ConsistentRead=True)
        self.queries += 1
        marker = got.get("Item")
        if marker is None or "gsi2pk" not in marker:
            return False  # the index lagged: it was rolled already
        version, touched = int(marker["v"]["N"]), int(marker["at"]["N"])
        if touched + GRACE_MS > now_ms or start + HOUR_MS + GRACE_MS > now_ms:
            return False  # a write may still be landing: a later run takes it
        hour: _Sums = {}
        days: dict[str, _Sums] = {}
        for r in self._records(tenant_id, start):
            _add(hour, (r.model, r.kind), r)
            _add(days.setdefault(r.containerId, {}), (r.imageId, r.model, r.kind), r)
        part = f"h{hour_key(start)[-2:]}"
        for container, sums in sorted(days.items()):
            try:
                self._client().update_item(
                    TableName=self.table_name,
                    Key={"pk": {"S": agg_pk(tenant_id)}, "sk": {"S": day_sk(start, container)}},
                    UpdateExpression="SET #p = :sums, #pv = :v",
                    ConditionExpression="attribute_not_exists(#pv) OR #pv <= :v",
                    ExpressionAttributeNames={"#p": part, "#pv": f"{part}v"},
                    ExpressionAttributeValues={":sums": {"S": _dump(sums)}, ":v": {"N": str(version)}},
                )
            except self._client().exceptions.ConditionalCheckFailedException:
                return False  # a rollup of a newer touch wrote this part: it owns the hour
        try:
            self._client().update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression="SET #cells = :sums, rv = :v, rolledAt = :now REMOVE gsi2pk, gsi2sk",
                ConditionExpression="#v = :v",
                ExpressionAttributeNames={"#cells": "cells", "#v": "v"},
                ExpressionAttributeValues={
                    ":sums": {"S": _dump(hour)},
                    ":v": {"N": str(version)},
                    ":now": {"N": str(now_ms)},
                },
            )
        except self._client().exceptions.ConditionalCheckFailedException:
            return False  # touched since: the hour stays listed, a later run rolls it again
        return True


def _rolled(marker: dict[str, Any]) -> int | None:
    """The version an hour marker's sums were rolled from, if they are its current version's."""
    rv, v = marker.get("rv"), marker.get("v")
    if rv is None or v is None or rv["N"] != v["N"] or "cells" not in marker:
        return None
    return int(rv["N"])


def _parts(item: dict[str, Any], day: int) -> Iterable[tuple[int, int, str]]:
    """(hour, version, sums JSON) of every rolled part of a day item."""
    for name, value in item.items():
        if len(name) == 3 and name[0] == "h" and name[1:].isdigit() and f"{name}v" in item:
            yield day + int(name[1:]) * HOUR_MS, int(item[f"{name}v"]["N"]), value["S"]


def _cells(item: dict[str, Any]) -> Iterable[tuple[list[str], _CellSums]]:
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
                "saved_input_tokens": 0,  # the transactional version predates the reply cache
                "saved_output_tokens": 0,
            },
        )


def _hour_ms(sk: str) -> int:
    value = parse_instant(sk[2:15])  # "H#YYYY-MM-DDTHH[#<shard>]"
    assert value is not None, sk
    return value


def _day_ms(sk: str) -> int:
    value = parse_instant(sk[2:12])  # "D#YYYY-MM-DD#<container>"
    assert value is not None, sk
    return value


__all__ = [
    "GRACE_MS",
    "GSI2",
    "DynamoDbUsageRollups",
    "DynamoDbUsageWriter",
    "RollupRun",
    "UsageAggItem",
    "agg_pk",
    "day_sk",
    "marker_sk",
    "open_pk",
    "usage_gsi2pk",
    "usage_gsi2sk",
]
