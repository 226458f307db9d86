"""Every AWS request a botocore client makes, and the units AWS bills for it (botocore event hooks).

``AwsMeter.attach(emitter)`` registers two hooks on a botocore event emitter: a session's
(``boto3.DEFAULT_SESSION.events``; clients copy their session's emitter when they are created) or
one client's (``client.meta.events``). ``before-parameter-build`` sees the request's parameters
(and, with a ``peek``, the stored item a DynamoDB write replaces); ``after-call`` sees the parsed
response, error responses included, and records one ``Call``. Billing rules, by price:

* API Gateway WebSocket: each ``PostToConnection`` is a message, metered in 32 KB units.
* SQS: every API request is billed, one request per 64 KB of payload (message bodies and
  attributes).
* DynamoDB on-demand, per ``reference/aws-facts.md`` §4 and AWS's capacity-unit rules:

  - a write costs 1 WRU per started KB of the item, the larger of the item before and after
    (``UpdateItem``, overwriting ``PutItem``, ``DeleteItem`` pay for the stored item too);
    a write whose condition failed still costs those units (nothing reaches the indexes);
  - each global secondary index whose key attributes the old or the new item carries is written
    too: one index write per item version that has the keys, one only when the key is unchanged
    (projection ALL, so an index write costs what the item costs);
  - a read costs 1 RRU per started 4 KB, half when eventually consistent (every GSI query is); a
    ``Query`` (or ``Scan``) page sums the sizes of the items it read, whatever the projection, so
    projected items are looked up in full with ``peek``;
  - transactions cost twice; control-plane calls (``CreateTable``...) are free.

Item sizes follow DynamoDB's rules: attribute names count, strings in UTF-8 bytes, numbers about
one byte per two significant digits plus one.
"""

from __future__ import annotations

import base64
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    Item = dict[str, dict[str, Any]]  # a DynamoDB item in the low-level wire format
    Peek = Callable[[str, str, Item], Item | None]  # (region, table, key) -> the stored item

WS_UNIT_BYTES = 32 * 1024  # API Gateway WebSocket metering unit
SQS_UNIT_BYTES = 64 * 1024  # SQS payload per billed request
WRITE_UNIT_BYTES = 1024  # DynamoDB write request unit
READ_UNIT_BYTES = 4 * 1024  # DynamoDB read request unit (strongly consistent)

# Price kinds a Call is billed under (benchmarks/prices.py has the dollars).
WS_MESSAGE, SQS_REQUEST, DDB_WRITE, DDB_READ, S3_WRITE, S3_READ, FREE, UNPRICED = (
    "ws_message",
    "sqs_request",
    "ddb_write",
    "ddb_read",
    "s3_write",
    "s3_read",
    "free",
    "unpriced",
)
# S3 request classes (aws.amazon.com/s3/pricing): DELETE is free; bucket set-up is not metered.
S3_WRITES = frozenset(
    {
        "PutObject",
        "CopyObject",
        "ListObjectsV2",
        "ListObjects",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
    }
)
S3_READS = frozenset({"GetObject", "HeadObject"})
DDB_CONTROL_PLANE = frozenset(
    {"CreateTable", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive", "ListTables", "DeleteTable"}
)
_HOOK_ID = "agentvm-benchmarks-billing"


@dataclass(frozen=True)
class TableSchema:
    """The key attributes of a table and of each of its global secondary indexes."""

    keys: tuple[str, ...]
    indexes: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Call:
    """One AWS request: what it was, what it is billed as, and the caller's ``tag`` at the time."""

    service: str
    operation: str
    kind: str
    units: float
    tag: Any = None


class AwsMeter:
    """Records a ``Call`` for every request of the emitters it is attached to (thread-safe).

    ``tag`` is called in the requesting thread (``asyncio.to_thread`` carries the caller's
    context variables there), so a ``Call`` can say which invocation made it. ``overhead_s`` is
    the CPU time the hooks themselves spent, to subtract from a measured handler's CPU time.
    """

    def __init__(
        self, schema: TableSchema, *, peek: Peek | None = None, tag: Callable[[], Any] = lambda: None
    ) -> None:
        self.schema = schema
        self.peek = peek
        self.tag = tag
        self.calls: list[Call] = []
        self.overhead_s = 0.0
        self._lock = threading.Lock()
        self._emitters: list[Any] = []
        self._active = True  # a client made from an attached session keeps the hooks: detach() mutes them

    def attach(self, emitter: Any) -> None:
        emitter.register("before-parameter-build", self._before, unique_id=_HOOK_ID + "-before")
        emitter.register("after-call", self._after, unique_id=_HOOK_ID + "-after")
        self._emitters.append(emitter)

    def detach(self) -> None:
        self._active = False
        for emitter in self._emitters:
            emitter.unregister("before-parameter-build", unique_id=_HOOK_ID + "-before")
            emitter.unregister("after-call", unique_id=_HOOK_ID + "-after")
        self._emitters.clear()

    # -- hooks --------------------------------------------------------------------------------
    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self._active:
            return
        started = time.thread_time()
        region = context.get("client_region") or "us-east-1"
        context[_HOOK_ID] = (params, self._stored_before(model.name, params, region), region)
        self._add_overhead(time.thread_time() - started)

    def _after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self._active or _HOOK_ID not in context:
            return
        started = time.thread_time()
        params, old, region = context.pop(_HOOK_ID)
        service = model.service_model.service_name
        kind, units = self._bill(service, model.name, params, parsed, old, region)
        call = Call(service, model.name, kind, units, self.tag())
        with self._lock:
            self.calls.append(call)
            self.overhead_s += time.thread_time() - started

    def _add_overhead(self, seconds: float) -> None:
        with self._lock:
            self.overhead_s += seconds

    # -- billing ------------------------------------------------------------------------------
    def _bill(
        self,
        service: str,
        operation: str,
        params: dict[str, Any],
        parsed: dict[str, Any],
        old: list[Item | None],
        region: str,
    ) -> tuple[str, float]:
        if service == "apigatewaymanagementapi":
            if operation != "PostToConnection":
                return UNPRICED, 0.0
            return WS_MESSAGE, _units(len(params.get("Data", b"")), WS_UNIT_BYTES)
        if service == "sqs":
            return SQS_REQUEST, _units(_sqs_payload(operation, params, parsed), SQS_UNIT_BYTES)
        if service == "dynamodb":
            return self._dynamodb(operation, params, parsed, old, region)
        if service == "s3":
            if operation in S3_WRITES:
                return S3_WRITE, 1.0
            if operation in S3_READS:
                return S3_READ, 1.0
            return (FREE, 0.0) if operation in ("DeleteObject", "DeleteObjects") else (UNPRICED, 0.0)
        return UNPRICED, 0.0

    def _dynamodb(
        self, op: str, params: dict[str, Any], parsed: dict[str, Any], old: list[Item | None], region: str
    ) -> tuple[str, float]:
        failed = parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
        if op in DDB_CONTROL_PLANE:
            return FREE, 0.0
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            new = params.get("Item") if op == "PutItem" else None
            if op == "UpdateItem":  # the new item is not returned: the old one plus the new values
                new = {**(old[0] or params["Key"]), **_update_values(params)}
            return DDB_WRITE, self._write_units(old[0], new, failed=failed)
        if op == "BatchWriteItem":
            requests = [r for table in params["RequestItems"].values() for r in table]
            news = [r["PutRequest"]["Item"] if "PutRequest" in r else None for r in requests]
            return DDB_WRITE, sum(
                self._write_units(o, n, failed=False) for o, n in zip(old, news, strict=True)
            )
        if op == "TransactWriteItems":  # transactional writes cost twice
            news = [_transact_new(a, o) for a, o in zip(params["TransactItems"], old, strict=True)]
            return DDB_WRITE, 2 * sum(
                self._write_units(o, n, failed=failed) for o, n in zip(old, news, strict=True)
            )
        if op == "GetItem":
            return DDB_READ, _read_units(_size(parsed.get("Item") or {}), params.get("ConsistentRead", False))
        if op in ("Query", "Scan"):
            table = params["TableName"]
            items = [self._full(region, table, item) for item in parsed.get("Items", [])]
            consistent = params.get("ConsistentRead", False) and "IndexName" not in params
            return DDB_READ, _read_units(sum(map(_size, items)), consistent)
        if op == "BatchGetItem":  # each item is read (and rounded) on its own
            return DDB_READ, sum(
                _read_units(_size(item), params["RequestItems"][table].get("ConsistentRead", False))
                for table, items in parsed.get("Responses", {}).items()
                for item in items
            )
        if op == "TransactGetItems":
            return DDB_READ, 2 * sum(
                _read_units(_size(r.get("Item") or {}), True) for r in parsed["Responses"]
            )
        return UNPRICED, 0.0

    def _write_units(self, old: Item | None, new: Item | None, *, failed: bool) -> float:
        units = _units(max(_size(old or {}), _size(new or {})), WRITE_UNIT_BYTES)
        if failed:
            return units
        for index_keys in self.schema.indexes.values():
            versions = [item for item in (old, new) if item and all(k in item for k in index_keys)]
            if len(versions) == 2 and all(old[k] == new[k] for k in index_keys):  # type: ignore[index]
                versions = versions[1:]  # the same index entry, updated in place
            units += sum(_units(_size(item), WRITE_UNIT_BYTES) for item in versions)
        return units

    def _stored_before(self, operation: str, params: dict[str, Any], region: str) -> list[Item | None]:
        """The stored items a write is about to replace (DynamoDB bills their size too)."""
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            return [self._peek(region, params["TableName"], params.get("Key") or params["Item"])]
        if operation == "BatchWriteItem":
            return [
                self._peek(
                    region,
                    table,
                    r["DeleteRequest"]["Key"] if "DeleteRequest" in r else r["PutRequest"]["Item"],
                )
                for table, requests in params["RequestItems"].items()
                for r in requests
            ]
        if operation == "TransactWriteItems":
            return [
                self._peek(region, body["TableName"], body.get("Key") or body.get("Item"))
                for action in params["TransactItems"]
                for body in action.values()
            ]
        return []

    def _peek(self, region: str, table: str, item: Item) -> Item | None:
        if self.peek is None:
            return None  # unknown: the write is billed on its new item alone
        return self.peek(region, table, {k: item[k] for k in self.schema.keys})

    def _full(self, region: str, table: str, item: Item) -> Item:
        """A returned (maybe projected) item as stored: reads are billed on the whole item."""
        if self.peek is None or not all(k in item for k in self.schema.keys):
            return item
        return self._peek(region, table, item) or item


def _units(size: float, unit: int) -> float:
    return float(max(1, math.ceil(size / unit)))


def _read_units(size: int, consistent: bool) -> float:
    return _units(size, READ_UNIT_BYTES) * (1.0 if consistent else 0.5)


def _size(item: Item) -> int:
    """An item's size as DynamoDB bills it: attribute names plus values."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        digits = v.lstrip("-").replace(".", "").strip("0")
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":  # bytes in a request; base64 text in moto's stored JSON
        return len(base64.b64decode(v)) if isinstance(v, str) else len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: e}) for e in v)
    if kind == "L":  # 3 bytes per list or map, plus 1 per element
        return 3 + sum(1 + _value_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(e) for k, e in v.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def _update_values(params: dict[str, Any]) -> Item:
    """The attributes an UpdateItem's ``SET #n = <expr with :v>`` and ``ADD #n :v`` clauses write,
    each with its (last) value: enough to size the new item."""
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    out: Item = {}
    sections = re.split(r"\b(SET|ADD|REMOVE|DELETE)\b", params.get("UpdateExpression", ""))
    for keyword, body in zip(sections[1::2], sections[2::2], strict=True):
        if keyword not in ("SET", "ADD"):
            continue
        for clause in re.split(r",(?![^()]*\))", body):  # commas outside if_not_exists(...)
            tokens = re.findall(r"[#:][A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_.]*", clause)
            placeholders = [t for t in tokens if t.startswith(":") and t in values]
            if tokens and placeholders:
                out[names.get(tokens[0], tokens[0])] = values[placeholders[-1]]
    return out


def _transact_new(action: dict[str, Any], old: Item | None) -> Item | None:
    """The item a transaction's action leaves (None: a delete or a condition check)."""
    if "Put" in action:
        return action["Put"]["Item"]
    if "Update" in action:
        body = action["Update"]
        return {**(old or body["Key"]), **_update_values(body)}
    return None


def _sqs_payload(operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> int:
    def size(message: dict[str, Any], body: str, attributes: str) -> int:
        total = len(message.get(body, "").encode())
        for name, attr in message.get(attributes, {}).items():
            value = attr.get("StringValue") or attr.get("BinaryValue") or b""
            total += len(name.encode()) + len(attr["DataType"].encode()) + len(value)
        return total

    if operation == "SendMessage":
        return size(params, "MessageBody", "MessageAttributes")
    if operation == "SendMessageBatch":
        return sum(size(e, "MessageBody", "MessageAttributes") for e in params["Entries"])
    if operation == "ReceiveMessage":
        return sum(size(m, "Body", "MessageAttributes") for m in parsed.get("Messages", []))
    return 0


def moto_peek(account_id: str) -> Peek:
    """A ``peek`` reading moto's DynamoDB state directly (no request, so nothing is billed)."""
    from moto.dynamodb.models import dynamodb_backends

    def peek(region: str, table: str, key: Item) -> Item | None:
        stored = dynamodb_backends[account_id][region].get_item(table, key)
        return None if stored is None else stored.to_json()["Attributes"]

    return peek


__all__ = ["AwsMeter", "Call", "TableSchema", "moto_peek"]
