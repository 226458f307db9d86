"""DynamoDB-only behaviour of ``DynamoDbStore`` on moto: table schema, request kinds and counts,
idempotency claims left behind by dead writers, and keys built from client-chosen ids.

The port's behaviour is covered for every store by ``test_store_contract.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from agentvm.adapters.aws.dynamodb.models import bind_models, idem_sk, message_sk, session_pk
from agentvm.adapters.aws.dynamodb.store import CLAIM_LEASE_MS, DynamoDbStore
from agentvm.messages import UserMessage, message_to_wire
from agentvm.records import ImageRecord, SessionRecord, TurnRecord, UsageRecord

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.aws

TABLE = "agentvm-dynamo-store"
TENANT = "tenant-a"


@pytest.fixture
def store(aws: None) -> DynamoDbStore:
    instance = DynamoDbStore(TABLE)
    instance.create_table()
    return instance


@pytest.fixture
def operations(store: DynamoDbStore) -> Iterator[list[str]]:
    """The name of every DynamoDB API call the store makes from here on."""
    seen: list[str] = []
    # the store's own client (``bind_models(TABLE)`` is another cache entry, with another client)
    events = store._m.base._get_connection().connection.client.meta.events

    def record(model: Any, **_: Any) -> None:
        seen.append(model.name)

    events.register("before-call.dynamodb", record)
    yield seen
    events.unregister("before-call.dynamodb", record)


def user(text: str) -> UserMessage:
    return UserMessage(id=f"msg_{text}", timestamp=1, content=text)


def image(image_id: str = "img_1", container_id: str = "user-alice") -> tuple[ImageRecord, SessionRecord]:
    session_id = f"ses_{image_id}"
    return (
        ImageRecord(
            tenantId=TENANT,
            imageId=image_id,
            containerId=container_id,
            sessionId=session_id,
            name="helper",
            createdAt=1,
            updatedAt=1,
        ),
        SessionRecord(
            tenantId=TENANT,
            sessionId=session_id,
            imageId=image_id,
            containerId=container_id,
            createdAt=1,
            updatedAt=1,
        ),
    )


def usage(turn_id: str, container_id: str = "user-alice") -> UsageRecord:
    return UsageRecord(
        turnId=turn_id,
        tenantId=TENANT,
        containerId=container_id,
        imageId="img_1",
        sessionId="ses_img_1",
        model="fake/echo",
        createdAt=1,
    )


def leave_claim(session_id: str, key: str, *, seq: int, age_ms: int) -> None:
    """An idempotency claim as a writer leaves it after claiming, before writing its message."""
    models = bind_models(TABLE)
    claimed_at = time.time_ns() // 1_000_000 - age_ms
    models.idem(session_pk(session_id), idem_sk(key), seq=seq, owner="other", claimedAt=claimed_at).save()


def write_message(session_id: str, seq: int, message: UserMessage, key: str | None) -> None:
    body = json.dumps(message_to_wire(message))
    bind_models(TABLE).message(session_pk(session_id), message_sk(seq), body=body, idem=key).save()


# the table


def test_create_table_builds_the_fixed_schema_and_is_idempotent(store: DynamoDbStore) -> None:
    store.create_table()  # a second time: nothing to do, no error

    client = boto3.client("dynamodb")
    table = client.describe_table(TableName=TABLE)["Table"]
    ttl = client.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]

    assert {(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]} == {
        ("pk", "HASH"),
        ("sk", "RANGE"),
    }
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    indexes = {gsi["IndexName"]: gsi for gsi in table["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"gsi1", "gsi2"}  # gsi2: usage records by hour (dynamodb_usage)
    for name, gsi in indexes.items():
        assert {(k["AttributeName"], k["KeyType"]) for k in gsi["KeySchema"]} == {
            (f"{name}pk", "HASH"),
            (f"{name}sk", "RANGE"),
        }
        assert gsi["Projection"] == {"ProjectionType": "ALL"}
    assert {a["AttributeType"] for a in table["AttributeDefinitions"]} == {"S"}
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}


# requests: what each operation costs


async def test_every_operation_uses_gets_queries_and_single_item_writes_only(
    store: DynamoDbStore, operations: list[str]
) -> None:
    img, ses = image()
    await store.create_image(img, ses)
    await store.list_images(TENANT)
    await store.list_images(TENANT, "user-alice")
    await store.append_message(ses.sessionId, user("a"), idempotency_key="req_1")
    await store.append_message(ses.sessionId, user("a"), idempotency_key="req_1")
    await store.recent_messages(ses.sessionId, 10)
    await store.list_usage(TENANT)
    await store.delete_image(TENANT, img.imageId)

    assert set(operations) <= {"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"}
    assert "Scan" not in operations and "TransactWriteItems" not in operations


async def test_the_usage_record_is_one_conditional_put_and_no_transaction(
    store: DynamoDbStore, operations: list[str]
) -> None:
    await store.put_usage(usage("turn_1"))  # the record (sums are rolled up later: dynamodb_usage)
    await store.put_usage(usage("turn_1"))  # a repeat: its condition fails

    # the tenant's month in the usage directory (once per process), then per write the record's
    # hour marker (this record's hour, 1970, has ended: every write touches it) and the put
    assert operations == ["PutItem", "UpdateItem", "PutItem", "UpdateItem", "PutItem"]


async def test_queries_counts_read_requests_and_no_writes(store: DynamoDbStore) -> None:
    img, ses = image()
    await store.create_image(img, ses)
    await store.put_turn(TurnRecord(turnId="turn_1", sessionId=ses.sessionId, status="queued", updatedAt=1))
    await store.request_cancel(ses.sessionId, "turn_1")
    await store.put_usage(usage("turn_1"))
    for i in range(50):
        await store.append_message(ses.sessionId, user(f"m{i}"))
    before = store.queries

    # what a turn reads before it calls the model, and once per flush
    await store.get_turn("turn_1")
    await store.get_image(TENANT, img.imageId)
    await store.recent_messages(ses.sessionId, 50)
    await store.is_cancel_requested(ses.sessionId, "turn_1")

    assert store.queries - before == 4  # the 50-message window is one Query request


async def test_a_workers_cancel_poll_reads_eventually_consistent_and_a_turns_start_strongly(
    store: DynamoDbStore,
) -> None:
    calls: list[dict[str, Any]] = []
    events = store._m.base._get_connection().connection.client.meta.events

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    running = TurnRecord(turnId="turn_1", sessionId="ses_1", status="running", updatedAt=1, poller="poll_1")
    await store.put_turn(running)
    events.register("provide-client-params.dynamodb.GetItem", record)
    events.register("provide-client-params.dynamodb.Query", record)
    try:
        await store.request_cancel("ses_1", "turn_1")  # reads the turn record: it runs under poll_1
        assert await store.is_cancel_requested("ses_1", "turn_1") is True  # when the turn starts
        assert await store.cancel_requests("poll_1") == {"turn_1"}  # each poll, for all its turns
        assert await store.cancel_requests("poll_2") == set()
    finally:
        events.unregister("provide-client-params.dynamodb.GetItem", record)
        events.unregister("provide-client-params.dynamodb.Query", record)
    # a poll is half the price (0.5 RRU): a mark read late is read at the next poll
    assert [(c.get("Key", "Query"), c.get("ConsistentRead", False)) for c in calls] == [
        ({"pk": {"S": "TURN#turn_1"}, "sk": {"S": "META"}}, True),
        ({"pk": {"S": "SESSION#ses_1"}, "sk": {"S": "CANCEL#turn_1"}}, True),
        ("Query", False),
        ("Query", False),
    ]


async def test_a_history_read_that_need_not_be_fresh_is_eventually_consistent(store: DynamoDbStore) -> None:
    for i in range(3):
        await store.append_message("ses_1", user(f"m{i}"))
    calls: list[dict[str, Any]] = []
    events = store._m.base._get_connection().connection.client.meta.events

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    events.register("provide-client-params.dynamodb.Query", record)
    try:
        lagging = await store.recent_messages_after("ses_1", 0, 50, fresh=False)
        fresh = await store.recent_messages_after("ses_1", 0, 50)
    finally:
        events.unregister("provide-client-params.dynamodb.Query", record)
    assert [m.seq for m in lagging] == [m.seq for m in fresh] == [1, 2, 3]  # moto is never behind
    assert [bool(c.get("ConsistentRead")) for c in calls] == [False, True]


async def test_long_messages_are_stored_compressed_and_read_back_exactly(store: DynamoDbStore) -> None:
    prose = " ".join(
        f"The agent read line {i} of the report, checked the figures and wrote a short note about them."
        for i in range(12)
    )  # ~1.1 KB of chat-like text: 2 WRU as text, 1 compressed
    await store.append_message("ses_1", user(prose), idempotency_key="req_1")
    await store.append_message("ses_1", user("short"))
    table = boto3.client("dynamodb").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :msg)",
        ExpressionAttributeValues={":pk": {"S": "SESSION#ses_1"}, ":msg": {"S": "MSG#"}},
    )["Items"]
    assert [sorted(k for k in item if k.startswith("body")) for item in table] == [["bodyz"], ["body"]]
    assert len(table[0]["bodyz"]["B"]) < 1024 - 100  # the item fits in one write unit
    texts = [m.content for m in await store.list_messages("ses_1")]
    assert texts == [prose, "short"]
    again = await store.append_message("ses_1", user(prose), idempotency_key="req_1")  # a retried request
    assert (again.created, again.message.content) == (False, prose)
    window = await store.recent_messages_after("ses_1", 0, 10, fresh=False)
    assert [m.message.content for m in window] == [prose, "short"]


async def test_messages_stored_as_text_before_compression_still_read(store: DynamoDbStore) -> None:
    write_message("ses_1", 1, user("x" * 2000), None)  # an item of the previous layout: plain body
    assert [m.content for m in await store.recent_messages("ses_1", 5)] == ["x" * 2000]


async def test_an_append_reads_once_and_a_repeated_key_reads_three_times(store: DynamoDbStore) -> None:
    await store.append_message("ses_1", user("a"), idempotency_key="req_1")
    before = store.queries

    await store.append_message("ses_1", user("b"))
    plain = store.queries - before
    again = await store.append_message("ses_1", user("a"), idempotency_key="req_1")

    assert plain == 1  # the last seq
    assert store.queries - before - plain == 3  # last seq, the claim, its message
    assert (again.seq, again.created) == (1, False)


# idempotency claims


async def test_a_claim_left_by_a_dead_writer_is_taken_over_after_its_lease(store: DynamoDbStore) -> None:
    leave_claim("ses_1", "req_1", seq=1, age_ms=CLAIM_LEASE_MS + 1000)

    result = await store.append_message("ses_1", user("a"), idempotency_key="req_1")
    again = await store.append_message("ses_1", user("b"), idempotency_key="req_1")

    assert (result.seq, result.created) == (1, True)
    assert (again.seq, again.created, again.message) == (1, False, user("a"))
    assert await store.list_messages("ses_1") == [user("a")]


async def test_a_dead_claims_seq_taken_by_another_message_moves_to_the_next_seq(store: DynamoDbStore) -> None:
    leave_claim("ses_1", "req_1", seq=1, age_ms=CLAIM_LEASE_MS + 1000)
    await store.append_message("ses_1", user("other"), idempotency_key="req_2")  # takes seq 1

    result = await store.append_message("ses_1", user("a"), idempotency_key="req_1")

    assert (result.seq, result.created) == (2, True)
    assert await store.list_messages("ses_1") == [user("other"), user("a")]


async def test_a_claim_in_progress_is_awaited_and_its_message_returned(store: DynamoDbStore) -> None:
    leave_claim("ses_1", "req_1", seq=1, age_ms=0)

    async def finish_the_other_writer() -> None:
        await asyncio.sleep(0.1)
        await asyncio.to_thread(write_message, "ses_1", 1, user("theirs"), "req_1")

    finisher = asyncio.create_task(finish_the_other_writer())
    result = await store.append_message("ses_1", user("mine"), idempotency_key="req_1")
    await finisher

    assert (result.seq, result.created, result.message) == (1, False, user("theirs"))
    assert await store.list_messages("ses_1") == [user("theirs")]


async def test_idempotency_keys_longer_than_a_sort_key_allows_still_deduplicate(store: DynamoDbStore) -> None:
    key = "req:" + "x" * 2000  # DynamoDB sort keys are limited to 1,024 bytes

    first = await store.append_message("ses_1", user("a"), idempotency_key=key)
    again = await store.append_message("ses_1", user("b"), idempotency_key=key)
    other = await store.append_message("ses_1", user("c"), idempotency_key=key[:-1] + "y")

    assert (first.created, again.created, again.seq, other.created) == (True, False, 1, True)


async def test_delete_image_empties_the_session_partition_but_keeps_turns_and_usage(
    store: DynamoDbStore,
) -> None:
    img, ses = image()
    await store.create_image(img, ses)
    await store.append_message(ses.sessionId, user("a"), idempotency_key="req_1")
    await store.request_cancel(ses.sessionId, "turn_1")
    turn = TurnRecord(turnId="turn_1", sessionId=ses.sessionId, status="completed", updatedAt=1)
    await store.put_turn(turn)
    await store.put_usage(usage("turn_1"))

    await store.delete_image(TENANT, img.imageId)

    left = boto3.client("dynamodb").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": session_pk(ses.sessionId)}},
    )["Items"]
    assert left == []
    assert await store.get_turn("turn_1") == turn
    assert await store.list_usage(TENANT) == [usage("turn_1")]


# client-chosen ids inside sort keys


async def test_a_container_id_that_extends_another_with_a_hash_stays_separate(store: DynamoDbStore) -> None:
    await store.create_image(*image("img_1", container_id="a"))
    await store.create_image(*image("img_2", container_id="a#b"))
    await store.put_usage(usage("turn_1", container_id="a"))
    await store.put_usage(usage("turn_2", container_id="a#b"))

    assert [i.imageId for i in await store.list_images(TENANT, "a")] == ["img_1"]
    assert [i.imageId for i in await store.list_images(TENANT, "a#b")] == ["img_2"]
    assert [u.turnId for u in await store.list_usage(TENANT, "a")] == ["turn_1"]
    assert [u.turnId for u in await store.list_usage(TENANT, "a#b")] == ["turn_2"]
