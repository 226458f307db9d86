"""PynamoDB models of AgentVM's one DynamoDB table, and the key layout every AWS adapter shares.

The table's key schema is fixed (``template.yaml`` declares exactly this): ``pk`` (S, hash), ``sk`` (S,
range), two global secondary indexes ``gsi1`` (``gsi1pk`` S hash, ``gsi1sk`` S range, projection ALL)
and the sparse ``gsi2`` (``gsi2pk``/``gsi2sk``, projection ALL: usage records and hour markers, unpaused
schedules and runs still claimed: ``dynamodb.schedules``, webhook deliveries: ``dynamodb.webhooks``),
TTL on ``expiresAt`` (Number, epoch seconds), billing PAY_PER_REQUEST. Every access pattern is a
GetItem or a Query on one partition; nothing ever scans.

=============  =============  ==============  ============  ===============================
Entity         pk             sk              gsi1pk        gsi1sk
=============  =============  ==============  ============  ===============================
Container      TENANT#<t>     CONTAINER#<c>
Image          IMAGE#<i>      META            TENANT#<t>    IMAGE#<c>#<createdAt:013d>#<i>
Session        SESSION#<s>    META
Message        SESSION#<s>    MSG#<seq:010d>
Idem claim     SESSION#<s>    IDEM#<key>
Cancel mark    SESSION#<s>    CANCEL#<turn>
Poller's mark  POLL#<poller>  CANCEL#<turn>   (the same turn's interrupt, for the worker running
                                              it: turns/cancel_poll.py; TTL one day)
Summary        SESSION#<s>    SUMMARY
Turn           TURN#<turn>    META
Usage          TURN#<turn>    USAGE           (gsi2: USAGEHOUR#<t>#<hour> / USAGE#<c>#<turn>;
                                              records written before: TENANT#<t> /
                                              USAGE#<c>#<createdAt:013d>#<turn> on gsi1)
Usage sums     USAGEAGG#<t>   H#<hour>,       (dynamodb_usage: hour markers, in gsi2 USAGEOPEN#n /
                              D#<day>#<c>     <hour>#<t> until rolled up; day sums by hour)
Usage tenants  USAGEDIR#<m>   <t>
Connection     CONN#<id>      META
Subscription   CONN#<id>      SUB#<s>         SUBS#<s>      CONN#<id>
Schedule       TENANT#<t>     SCHED#<id>      (gsi2 while unpaused: SCHEDDUE / <nextAt>#<id>)
Schedule run   SCHEDRUN#<id>  TICK#<tickAt>   (gsi2 while claimed: SCHEDCLAIM / <claimedAt>#...;
                                              TTL 90 days: dynamodb.schedules)
Webhooks       WEBHOOKS#<t>,  EP#<e>, EVT#,   WHDUE         <nextAttemptAt:013d>#<d>  (pending
               HOOK#<e>,      META            deliveries only; gsi2 HOOKDLV#<e> / <createdAt>#<d>:
               WHDLV#<d>                      dynamodb.webhooks)
MCP OAuth      MCPOAUTH#<k>   META            MCPOAUTH#<t>  <k>  (a record of McpOAuthRecords, <k> its
                                                            key; TTL at its expiry: dynamodb.mcp_oauth)
=============  =============  ==============  ============  ===============================

Attributes besides the keys: records (container, image, session, turn, usage) hold ``data``, the
record's pydantic JSON (as in ``SqliteStore``: exact round trips, new fields get their defaults),
and ``tenantId`` where the record has one; a message holds ``body`` (its wire JSON) and ``idem``
(the idempotency key that wrote it, if any; ``bodyz`` instead of ``body`` when compressed:
``message_bodies``); a claim ``seq``, ``owner``, ``claimedAt`` (ms); a
cancel mark ``turnId`` (one item per cancelled turn, and one under its poller while it runs,
with ``expiresAt``); a compaction summary ``upToSeq`` and
``data`` (its item class lives in ``dynamodb.store``); a connection ``tenantId`` and ``keyId``
(both absent until authenticated), ``connectedAt`` and ``expiresAt``; a subscription
``sessionId``, ``afterSeq`` (its resume cursor, if any), ``subscribedAt`` and ``expiresAt``.

How each ``Store`` pattern is served:

* an image by id: GetItem ``IMAGE#<i>``/``META`` (its own partition, so no tenant needed in the key;
  the stored ``tenantId`` is compared). Images of a tenant / of one container: Query ``gsi1`` on
  ``TENANT#<t>`` with ``begins_with(IMAGE#)`` / ``begins_with(IMAGE#<c>#)``, newest first.
* a session's whole life (META, messages, idempotency claims, cancel mark) is one partition, so
  ``delete_image`` is one Query plus BatchWriteItem deletes, and "last N messages" is one Query.
* usage is keyed by the turn, so the primary key itself makes ``put_usage`` idempotent (one
  conditional put); ``gsi2`` lists it per tenant and hour (per container with ``begins_with``),
  the tenant's hour markers list its hours (``dynamodb.usage``); records written before that have
  ``gsi1`` keys and are listed there. It lives off the tenant's main partition, which keeps
  per-turn writes away from one hot partition key.
* connections and their subscriptions are one partition per connection (``remove`` is one Query
  plus deletes); ``gsi1`` answers "who is subscribed to this session".

Ids inside sort keys are client-chosen (container ids) and may contain ``#``: a ``begins_with``
prefix can then match a neighbour (``IMAGE#a#`` matches container ``a#b``), so readers re-check
the stored record's ids instead of trusting the prefix alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar, cast

from pynamodb.attributes import BinaryAttribute, NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from agentvm.adapters.aws.dynamodb.message_bodies import stored_body

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from pynamodb.models import MetaProtocol

GSI1 = "gsi1"
GSI2 = "gsi2"  # sparse: usage records by tenant and hour, hours to roll up (dynamodb_usage), webhooks
TTL_ATTRIBUTE = "expiresAt"
META = "META"
CANCEL = "CANCEL"
USAGE = "USAGE"

MSG_PREFIX = "MSG#"
IDEM_PREFIX = "IDEM#"
CONTAINER_PREFIX = "CONTAINER#"
IMAGE_PREFIX = "IMAGE#"
USAGE_PREFIX = "USAGE#"
SUB_PREFIX = "SUB#"
CONN_PREFIX = "CONN#"

# Sort keys may be up to 1,024 bytes; idempotency keys come from clients (request ids), so long
# ones are replaced by their digest rather than failing the write with a ValidationException.
_MAX_KEY_CHARS = 200


# keys


def tenant_pk(tenant_id: str) -> str:
    return f"TENANT#{tenant_id}"


def container_sk(container_id: str) -> str:
    return f"{CONTAINER_PREFIX}{container_id}"


def image_pk(image_id: str) -> str:
    return f"IMAGE#{image_id}"


def image_gsi1sk(container_id: str, created_at: int, image_id: str) -> str:
    return f"{IMAGE_PREFIX}{container_id}#{created_at:013d}#{image_id}"


def session_pk(session_id: str) -> str:
    return f"SESSION#{session_id}"


def message_sk(seq: int) -> str:
    return f"{MSG_PREFIX}{seq:010d}"


def seq_of(message_sk_value: str) -> int:
    return int(message_sk_value.removeprefix(MSG_PREFIX))


def idem_sk(key: str) -> str:
    if len(key) > _MAX_KEY_CHARS:
        key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    return f"{IDEM_PREFIX}{key}"


def cancel_sk(turn_id: str) -> str:
    """An interrupt mark of one turn, in its session's partition."""
    return f"{CANCEL}#{turn_id}"


def poller_pk(poller: str) -> str:
    """The interrupt marks of the turns one worker invocation runs (turns/cancel_poll.py)."""
    return f"POLL#{poller}"


def turn_pk(turn_id: str) -> str:
    return f"TURN#{turn_id}"


def usage_gsi1sk(container_id: str, created_at: int, turn_id: str) -> str:
    return f"{USAGE_PREFIX}{container_id}#{created_at:013d}#{turn_id}"


def connection_pk(connection_id: str) -> str:
    return f"{CONN_PREFIX}{connection_id}"


def connection_id_of(connection_pk_value: str) -> str:
    return connection_pk_value.removeprefix(CONN_PREFIX)


def subscription_sk(session_id: str) -> str:
    return f"{SUB_PREFIX}{session_id}"


def subscribers_gsi1pk(session_id: str) -> str:
    return f"SUBS#{session_id}"


# models


class _Gsi1(GlobalSecondaryIndex["TableItem"]):
    class Meta:
        index_name = GSI1
        projection = AllProjection()

    gsi1pk = UnicodeAttribute(hash_key=True)
    gsi1sk = UnicodeAttribute(range_key=True)


class _Gsi2(GlobalSecondaryIndex["TableItem"]):
    class Meta:
        index_name = GSI2
        projection = AllProjection()

    gsi2pk = UnicodeAttribute(hash_key=True)
    gsi2sk = UnicodeAttribute(range_key=True)


# The entity models below are unbound (no table): ``bind_models`` derives the classes that do I/O.


class TableItem(Model):
    """What every item has: keys, index keys, TTL. Reads any item as its keys; deletes any item."""

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    gsi1pk = UnicodeAttribute(null=True)
    gsi1sk = UnicodeAttribute(null=True)
    # the sparse ``gsi2`` (usage records by tenant and hour, usage hours to roll up: dynamodb_usage;
    # webhook deliveries by endpoint: dynamodb.webhooks)
    gsi2pk = UnicodeAttribute(null=True)
    gsi2sk = UnicodeAttribute(null=True)
    # DynamoDB deletes an item some time (typically within two days) after this epoch second; until
    # then it is still returned, so readers of expiring items filter on it themselves.
    expiresAt = TTLAttribute(null=True)
    gsi1 = _Gsi1()
    gsi2 = _Gsi2()  # declared so PynamoDB can Query it (dynamodb.schedules); usage uses the client


class RecordItem(TableItem):
    """Container, image, session, turn, usage: the record's JSON, and its tenant where it has one."""

    tenantId = UnicodeAttribute(null=True)
    data = UnicodeAttribute()


class MessageItem(TableItem):
    # The message's wire JSON: as text (``body``) or zlib-compressed (``bodyz``): message_bodies.py
    body = UnicodeAttribute(null=True)
    bodyz = BinaryAttribute(null=True, legacy_encoding=False)
    idem = UnicodeAttribute(null=True)  # the idempotency key of the append that wrote it

    @property
    def text(self) -> str:
        """The message's wire JSON, however it is stored."""
        return stored_body(self.body, self.bodyz)


class IdemItem(TableItem):
    """An idempotency key, claimed by ``owner`` to write its message at ``seq``."""

    seq = NumberAttribute()
    owner = UnicodeAttribute()
    claimedAt = NumberAttribute()  # epoch ms


class CancelItem(TableItem):
    turnId = UnicodeAttribute()


class ConnectionItem(TableItem):
    tenantId = UnicodeAttribute(null=True)
    keyId = UnicodeAttribute(null=True)  # the API key that authenticated it: re-checked on every frame
    connectedAt = NumberAttribute()
    protocol = UnicodeAttribute(null=True)  # "v2" once a JSON-RPC frame chose it (v1 is not recorded)
    frames = UnicodeAttribute(null=True)  # "batch": declared at the upgrade (streaming/batching.py)
    cadence = UnicodeAttribute(null=True)  # "live" / "economy" if asked at the upgrade (batch_cadence.py)
    # the window its tenant's connection count counted it in (dynamodb/tenant_connection_count.py)
    countedIn = NumberAttribute(null=True)


class SubscriptionItem(TableItem):
    sessionId = UnicodeAttribute()
    afterSeq = NumberAttribute(null=True)  # the resume cursor it subscribed with (``core.resume``)
    protocol = UnicodeAttribute(null=True)  # its connection's, copied when subscribing (None: v1)
    frames = UnicodeAttribute(null=True)  # its connection's, copied likewise (None: one per message)
    cadence = UnicodeAttribute(null=True)  # its connection's, copied likewise (None: the turn's)
    # epoch ms of its first write (kept by later ones): a turn whose message came after it sends it
    # the turn from its first frame even if the worker finds it late (``Subscription.subscribed_at``)
    subscribedAt = NumberAttribute(null=True)


@dataclass(frozen=True, slots=True)
class Models:
    """The entity models bound to one table, all sharing one connection (one botocore client)."""

    table_name: str
    base: type[TableItem]
    record: type[RecordItem]
    message: type[MessageItem]
    idem: type[IdemItem]
    cancel: type[CancelItem]
    connection: type[ConnectionItem]
    subscription: type[SubscriptionItem]


_M = TypeVar("_M", bound=TableItem)


@lru_cache(maxsize=64)
def bind_models(table_name: str, region: str | None = None, host: str | None = None) -> Models:
    """The entity models bound to ``table_name``; cached, as PynamoDB binds a table per class.

    ``region=None`` and ``host=None`` leave both to botocore's defaults (``AWS_REGION`` /
    ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``). Binding does no network I/O.
    """
    meta = type(
        "Meta",
        (),
        {"table_name": table_name, "region": region, "host": host, "billing_mode": "PAY_PER_REQUEST"},
    )
    base = _bind(TableItem, meta)
    # One TableConnection for every class of the table, so one botocore client (created lazily).
    connection = base._get_connection()

    def bind(model: type[_M]) -> type[_M]:
        bound = _bind(model, meta)
        bound._connection = connection
        return bound

    return Models(
        table_name=table_name,
        base=base,
        record=bind(RecordItem),
        message=bind(MessageItem),
        idem=bind(IdemItem),
        cancel=bind(CancelItem),
        connection=bind(ConnectionItem),
        subscription=bind(SubscriptionItem),
    )


def _bind(model: type[_M], meta: type | MetaProtocol) -> type[_M]:
    # PynamoDB's metaclass fills in the Meta defaults and gives the class its own index copy.
    return type(model.__name__, (model,), {"Meta": meta, "__module__": __name__})


@lru_cache(maxsize=64)
def bind_model(
    model: type[_M], table_name: str, region: str | None = None, host: str | None = None
) -> type[_M]:
    """One more entity model (an unbound ``TableItem`` subclass) bound to ``table_name``; cached.

    For the adapters that keep their item class next to them (API keys, budgets): the class shares
    the connection (one botocore client) of ``bind_models(table_name, region, host)``. No network I/O.
    """
    base = bind_models(table_name, region, host).base
    bound = _bind(model, base.Meta)
    bound._connection = base._get_connection()
    return bound


def create_table(models: Models, *, wait: bool = True) -> None:
    """Create the table with the fixed schema if it does not exist, then enable TTL. Idempotent.

    For tests and local tooling (the deployed table comes from ``template.yaml``). The schema is
    written out here rather than derived from the models, so it reads like the template's.
    DynamoDB accepts ``UpdateTimeToLive`` only on an ACTIVE table: with ``wait=False`` the call
    returns right after ``CreateTable`` and TTL is left to the next ``create_table(wait=True)``.
    """
    # PynamoDB types its client as a bare botocore client; it is DynamoDB's.
    client = cast("DynamoDBClient", models.base._get_connection().connection.client)
    name = models.table_name
    try:
        client.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": attr, "AttributeType": "S"}
                for attr in ("pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk")
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": GSI1,
                    "KeySchema": [
                        {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                        {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
                {
                    "IndexName": GSI2,
                    "KeySchema": [
                        {"AttributeName": "gsi2pk", "KeyType": "HASH"},
                        {"AttributeName": "gsi2sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
            ],
        )
    except client.exceptions.ResourceInUseException:
        pass  # it exists already (or another process is creating it right now)
    if not wait:
        return
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    ttl = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        return
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    )


__all__ = [
    "CANCEL",
    "GSI1",
    "GSI2",
    "META",
    "TTL_ATTRIBUTE",
    "USAGE",
    "CancelItem",
    "ConnectionItem",
    "IdemItem",
    "MessageItem",
    "Models",
    "RecordItem",
    "SubscriptionItem",
    "TableItem",
    "bind_model",
    "bind_models",
    "cancel_sk",
    "poller_pk",
    "connection_id_of",
    "connection_pk",
    "container_sk",
    "create_table",
    "idem_sk",
    "image_gsi1sk",
    "image_pk",
    "message_sk",
    "seq_of",
    "session_pk",
    "subscribers_gsi1pk",
    "subscription_sk",
    "tenant_pk",
    "turn_pk",
    "usage_gsi1sk",
]
