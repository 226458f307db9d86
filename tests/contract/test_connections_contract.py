"""The ``Connections`` port's contract: the in-memory registry (local host), SQLite (the local host's
workers, docs/scaling.md), DynamoDB (AWS host) on moto and PostgreSQL (the cluster's nodes).

The shared tests use only the port; the order of ``subscribers`` is not part of the contract (the
in-memory registry keeps insertion order, DynamoDB returns index order), so they compare sets.
Expiry exists only where API Gateway can drop a connection without ``$disconnect``: those tests
run on DynamoDB alone.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.sqlite.connections import SqliteConnections
from agentvm.ports import PROTOCOL_V1, PROTOCOL_V2, ConnectionInfo, Subscription

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from agentvm.ports import Connections

TABLE = "agentvm-connections-contract"


class FakeClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def dynamo_connections(clock: FakeClock | None = None, ttl_s: int = 7500) -> DynamoDbConnections:
    connections = DynamoDbConnections(TABLE, ttl_s=ttl_s, clock=clock or FakeClock())
    connections.create_table()
    return connections


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("sqlite", id="sqlite"),
        pytest.param("dynamo", id="dynamo", marks=pytest.mark.aws),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
async def connections(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[Connections]:
    if request.param == "memory":
        yield InMemoryConnections()
    elif request.param == "sqlite":
        yield SqliteConnections(tmp_path / "agentvm.db", worker="w0")
    elif request.param == "postgres":
        from agentvm.adapters.postgres.connections import PostgresConnections
        from tests.postgres_server import fresh_database

        async with fresh_database() as database:
            yield PostgresConnections(database, node="n0")
    else:
        request.getfixturevalue("aws")
        yield dynamo_connections()


def info(connection_id: str, tenant: str | None = "tenant-a", at: int = 1000) -> ConnectionInfo:
    return ConnectionInfo(connection_id=connection_id, tenant_id=tenant, connected_at=at)


# register / get / remove


async def test_get_returns_what_was_registered(connections: Connections) -> None:
    await connections.register(info("c1", "tenant-a", at=1234))

    assert await connections.get("c1") == info("c1", "tenant-a", at=1234)


async def test_a_connection_without_a_tenant_round_trips_its_none(connections: Connections) -> None:
    await connections.register(info("c1", tenant=None))

    assert await connections.get("c1") == info("c1", tenant=None)


async def test_the_api_key_of_a_connection_round_trips(connections: Connections) -> None:
    # The gateway re-checks this key on every frame (revocation) and rate-limits by it.
    keyed = ConnectionInfo(connection_id="c1", tenant_id="tenant-a", connected_at=1000, key_id="k0000000001a")
    await connections.register(keyed)
    await connections.register(info("c2"))  # no key: not authenticated by one (or the open dev mode)

    assert await connections.get("c1") == keyed
    c2 = await connections.get("c2")
    assert c2 is not None and c2.key_id is None

    await connections.register(replace(c2, tenant_id="tenant-b", key_id="k0000000002b"))  # an `auth` frame
    assert await connections.get("c2") == replace(c2, tenant_id="tenant-b", key_id="k0000000002b")


async def test_registering_again_replaces_the_connection_info(connections: Connections) -> None:
    await connections.register(info("c1", tenant=None))

    await connections.register(info("c1", tenant="tenant-b"))

    assert await connections.get("c1") == info("c1", tenant="tenant-b")


async def test_unknown_connection_reads_as_none(connections: Connections) -> None:
    assert await connections.get("c-missing") is None


async def test_remove_forgets_the_connection_and_leaves_others(connections: Connections) -> None:
    await connections.register(info("c1"))
    await connections.register(info("c2"))

    await connections.remove("c1")

    assert await connections.get("c1") is None
    assert await connections.get("c2") == info("c2")


async def test_remove_of_an_unknown_connection_is_a_no_op(connections: Connections) -> None:
    await connections.remove("c-missing")

    assert await connections.get("c-missing") is None


# subscriptions


async def test_subscribers_are_the_connections_subscribed_to_the_session(connections: Connections) -> None:
    for conn in ("c1", "c2", "c3"):
        await connections.register(info(conn))
    await connections.subscribe("c1", "ses_1")
    await connections.subscribe("c2", "ses_1")
    await connections.subscribe("c3", "ses_2")

    assert set(await connections.subscribers("ses_1")) == {"c1", "c2"}
    assert list(await connections.subscribers("ses_2")) == ["c3"]
    assert list(await connections.subscribers("ses_none")) == []


async def test_subscribing_twice_lists_the_connection_once(connections: Connections) -> None:
    await connections.register(info("c1"))

    await connections.subscribe("c1", "ses_1")
    await connections.subscribe("c1", "ses_1")

    assert list(await connections.subscribers("ses_1")) == ["c1"]


async def test_one_connection_can_follow_several_sessions(connections: Connections) -> None:
    await connections.register(info("c1"))

    await connections.subscribe("c1", "ses_1")
    await connections.subscribe("c1", "ses_2")

    assert list(await connections.subscribers("ses_1")) == ["c1"]
    assert list(await connections.subscribers("ses_2")) == ["c1"]


# resume cursors: the last frame seq a connection has of the session it subscribed to


async def test_subscribers_come_with_the_cursor_they_subscribed_with(connections: Connections) -> None:
    for conn in ("c1", "c2", "c3"):
        await connections.register(info(conn))
    await connections.subscribe("c1", "ses_1")
    await connections.subscribe("c2", "ses_1", after_seq=200_007)
    await connections.subscribe("c3", "ses_1", after_seq=0)

    assert set(await connections.subscribers_with_cursor("ses_1")) == {
        ("c1", None),
        ("c2", 200_007),
        ("c3", 0),
    }
    assert set(await connections.subscribers("ses_1")) == {"c1", "c2", "c3"}
    assert list(await connections.subscribers_with_cursor("ses_none")) == []


async def test_subscribing_again_with_a_cursor_replaces_it_and_without_one_keeps_it(
    connections: Connections,
) -> None:
    await connections.register(info("c1"))
    await connections.subscribe("c1", "ses_1", after_seq=100_003)

    await connections.subscribe("c1", "ses_1", after_seq=300_009)
    assert list(await connections.subscribers_with_cursor("ses_1")) == [("c1", 300_009)]

    await connections.subscribe("c1", "ses_1")  # e.g. message_send subscribes its sender
    assert list(await connections.subscribers_with_cursor("ses_1")) == [("c1", 300_009)]


async def test_a_cursor_goes_with_its_subscription(connections: Connections) -> None:
    await connections.register(info("c1"))
    await connections.subscribe("c1", "ses_1", after_seq=5)
    await connections.remove("c1")
    await connections.register(info("c1"))

    await connections.subscribe("c1", "ses_1")

    assert list(await connections.subscribers_with_cursor("ses_1")) == [("c1", None)]


async def test_subscribe_of_an_unregistered_connection_is_ignored(connections: Connections) -> None:
    await connections.subscribe("c-ghost", "ses_1")

    assert list(await connections.subscribers("ses_1")) == []
    assert await connections.get("c-ghost") is None


async def test_remove_also_removes_the_connections_subscriptions(connections: Connections) -> None:
    await connections.register(info("c1"))
    await connections.register(info("c2"))
    await connections.subscribe("c1", "ses_1")
    await connections.subscribe("c1", "ses_2")
    await connections.subscribe("c2", "ses_1")

    await connections.remove("c1")

    assert list(await connections.subscribers("ses_1")) == ["c2"]
    assert list(await connections.subscribers("ses_2")) == []


async def test_a_connection_registered_again_after_remove_starts_without_subscriptions(
    connections: Connections,
) -> None:
    await connections.register(info("c1"))
    await connections.subscribe("c1", "ses_1")
    await connections.remove("c1")

    await connections.register(info("c1"))

    assert list(await connections.subscribers("ses_1")) == []


# expiry: DynamoDB only (TTL deletes lag, so reads must drop expired items themselves)


@pytest.mark.aws
async def test_an_expired_connection_reads_as_none_before_ttl_deletes_it(aws: None) -> None:
    clock = FakeClock()
    connections = dynamo_connections(clock, ttl_s=60)
    await connections.register(info("c1"))

    clock.now += 59
    assert await connections.get("c1") == info("c1")
    clock.now += 2
    assert await connections.get("c1") is None


@pytest.mark.aws
async def test_subscriptions_expire_with_their_connection(aws: None) -> None:
    clock = FakeClock()
    connections = dynamo_connections(clock, ttl_s=60)
    await connections.register(info("c1"))
    clock.now += 30
    await connections.register(info("c2"))  # connected later, so it expires later
    await connections.subscribe("c1", "ses_1")
    await connections.subscribe("c2", "ses_1")

    clock.now += 31  # c1 is past its 60 s, c2 is not

    assert list(await connections.subscribers("ses_1")) == ["c2"]


@pytest.mark.aws
async def test_subscribe_of_an_expired_connection_is_ignored(aws: None) -> None:
    clock = FakeClock()
    connections = dynamo_connections(clock, ttl_s=60)
    await connections.register(info("c1"))
    clock.now += 61

    await connections.subscribe("c1", "ses_1")
    clock.now -= 61  # even seen from before the expiry, no subscription was written

    assert list(await connections.subscribers("ses_1")) == []


@pytest.mark.aws
async def test_items_carry_the_ttl_attribute_dynamodb_expires_them_by(aws: None) -> None:
    clock = FakeClock(1_800_000_000.0)
    connections = dynamo_connections(clock, ttl_s=7500)
    await connections.register(info("c1"))
    await connections.subscribe("c1", "ses_1")

    client = boto3.client("dynamodb")
    ttl = client.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    items = client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "CONN#c1"}},
    )["Items"]

    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}
    assert sorted(i["sk"]["S"] for i in items) == ["META", "SUB#ses_1"]
    assert {i["expiresAt"]["N"] for i in items} == {str(1_800_000_000 + 7500)}


# protocols: what a connection's first frame chose (AgentX v1 or v2), carried by its subscriptions


async def test_a_v2_connection_records_its_protocol_and_its_subscriptions_carry_it(
    connections: Connections,
) -> None:
    await connections.register(info("c1"))
    await connections.register(info("c2"))

    assert await connections.claim_protocol("c1", PROTOCOL_V2) == PROTOCOL_V2
    await connections.subscribe("c1", "ses_1", after_seq=100_004)
    await connections.subscribe("c2", "ses_1")

    assert (await connections.get("c1")) == replace(info("c1"), protocol=PROTOCOL_V2)
    assert set(await connections.subscriptions("ses_1")) == {
        Subscription("c1", 100_004, PROTOCOL_V2),
        Subscription("c2", None, PROTOCOL_V1),
    }
    assert list(await connections.subscriptions("ses_none")) == []


async def test_the_first_protocol_claimed_stays(connections: Connections) -> None:
    await connections.register(info("c1"))

    await connections.claim_protocol("c1", PROTOCOL_V2)

    assert await connections.claim_protocol("c1", PROTOCOL_V2) == PROTOCOL_V2  # a concurrent frame's
    assert (await connections.get("c1")).protocol == PROTOCOL_V2  # type: ignore[union-attr]


async def test_a_connection_that_subscribed_before_its_first_v2_frame_stays_v1(
    connections: Connections,
) -> None:
    await connections.register(info("c1"))
    await connections.claim_protocol("c1", PROTOCOL_V1)  # what the gateway does for a v1 frame
    await connections.subscribe("c1", "ses_1")

    assert await connections.claim_protocol("c1", PROTOCOL_V2) == PROTOCOL_V1
    assert [s.protocol for s in await connections.subscriptions("ses_1")] == [PROTOCOL_V1]


async def test_authenticating_again_keeps_the_protocol(connections: Connections) -> None:
    await connections.register(info("c1", tenant=None))
    await connections.claim_protocol("c1", PROTOCOL_V2)

    await connections.register(replace(info("c1"), protocol=PROTOCOL_V2))  # the auth frame's

    assert (await connections.get("c1")).protocol == PROTOCOL_V2  # type: ignore[union-attr]


# batched frames: declared at the upgrade, carried by the connection's subscriptions


async def test_a_batched_connection_and_its_subscriptions_say_so(connections: Connections) -> None:
    await connections.register(replace(info("c1"), batch=True))
    await connections.register(info("c2"))
    await connections.subscribe("c1", "ses_1", after_seq=7)
    await connections.subscribe("c2", "ses_1")

    assert (await connections.get("c1")) == replace(info("c1"), batch=True)
    assert (await connections.get("c2")).batch is False  # type: ignore[union-attr]
    assert set(await connections.subscriptions("ses_1")) == {
        Subscription("c1", 7, PROTOCOL_V1, batch=True),
        Subscription("c2", None, PROTOCOL_V1),
    }


async def test_authenticating_again_keeps_batched_frames(connections: Connections) -> None:
    await connections.register(replace(info("c1", tenant=None), batch=True))

    await connections.register(replace(info("c1"), batch=True))  # the auth frame's (gateway.access)
    await connections.subscribe("c1", "ses_1")

    assert (await connections.get("c1")).batch is True  # type: ignore[union-attr]
    assert [s.batch for s in await connections.subscriptions("ses_1")] == [True]


async def test_a_connections_cadence_is_kept_and_carried_by_its_subscriptions(
    connections: Connections,
) -> None:
    # ?frames=batch&cadence=economy at the upgrade (streaming/batch_cadence.py)
    await connections.register(replace(info("c1", tenant=None), batch=True, cadence="economy"))
    await connections.register(replace(info("c2"), batch=True, cadence="live"))
    await connections.register(replace(info("c3"), batch=True))  # none asked: the turn's
    await connections.register(replace(info("c1"), batch=True, cadence="economy"))  # its auth frame
    for conn in ("c1", "c2", "c3"):
        await connections.subscribe(conn, "ses_1", known=await connections.get(conn))

    assert (await connections.get("c1")).cadence == "economy"  # type: ignore[union-attr]
    assert {s.connection_id: s.cadence for s in await connections.subscriptions("ses_1")} == {
        "c1": "economy",
        "c2": "live",
        "c3": None,
    }


# repeated subscribes (every message_send_request makes one) change nothing and read nothing more


async def test_a_repeated_subscribe_leaves_the_subscription_as_it_was(connections: Connections) -> None:
    await connections.register(info("c1"))
    for _ in range(3):
        await connections.subscribe("c1", "ses_1", after_seq=0)
    await connections.subscribe("c1", "ses_1")
    assert list(await connections.subscriptions("ses_1")) == [Subscription("c1", 0, PROTOCOL_V1)]
    await connections.subscribe("c1", "ses_1", after_seq=7)  # a cursor that changes: written
    assert list(await connections.subscriptions("ses_1")) == [Subscription("c1", 7, PROTOCOL_V1)]


async def test_a_subscribe_given_the_connection_it_read_subscribes_like_one_without(
    connections: Connections,
) -> None:
    await connections.register(replace(info("c1"), batch=True))
    known = await connections.get("c1")
    await connections.subscribe("c1", "ses_1", after_seq=3, known=known)
    assert list(await connections.subscriptions("ses_1")) == [Subscription("c1", 3, PROTOCOL_V1, True)]


@contextmanager
def dynamodb_calls(connections: DynamoDbConnections) -> Iterator[list[str]]:
    """The DynamoDB operations the adapter's client makes inside the block, by name."""
    operations: list[str] = []
    events = connections._m.base._get_connection().connection.client.meta.events

    def record(model: Any, **_: Any) -> None:
        operations.append(model.name)

    events.register("before-call.dynamodb", record)
    try:
        yield operations
    finally:
        events.unregister("before-call.dynamodb", record)


async def test_a_subscribe_given_the_connection_it_just_read_does_not_read_it_again(aws: None) -> None:
    connections = dynamo_connections()
    await connections.register(replace(info("c1"), batch=True))
    known = await connections.get("c1")
    assert known is not None and known.expires_at is not None
    with dynamodb_calls(connections) as operations:
        await connections.subscribe("c1", "ses_1", after_seq=0, known=known)
        await connections.subscribe("c1", "ses_1", after_seq=0, known=known)  # a repeat: its condition fails
    assert operations == ["UpdateItem", "UpdateItem"]
    (sub,) = await connections.subscriptions("ses_1")
    assert sub == Subscription("c1", 0, PROTOCOL_V1, batch=True)
    table = boto3.resource("dynamodb").Table(TABLE)
    stored = table.get_item(Key={"pk": "CONN#c1", "sk": "SUB#ses_1"})["Item"]
    assert int(stored["expiresAt"]) == known.expires_at  # it never outlives its connection


async def test_a_subscribe_the_connection_read_shows_done_already_writes_nothing(aws: None) -> None:
    connections = dynamo_connections()
    await connections.register(replace(info("c1"), batch=True))
    await connections.subscribe("c1", "ses_1", after_seq=0)
    known = await connections.get("c1")
    assert known is not None and dict(known.subscribed) == {"ses_1": 0}
    with dynamodb_calls(connections) as operations:
        await connections.subscribe("c1", "ses_1", after_seq=0, known=known)  # message_send's repeat
        await connections.subscribe("c1", "ses_1", known=known)  # no cursor: keeps the stored one
        assert operations == []
        await connections.subscribe("c1", "ses_1", after_seq=5, known=known)  # a new cursor: written
        await connections.subscribe("c1", "ses_2", after_seq=0, known=known)  # a new session: written
    assert operations == ["UpdateItem", "UpdateItem"]
    assert list(await connections.subscriptions("ses_1")) == [Subscription("c1", 5, PROTOCOL_V1, True)]
    assert list(await connections.subscriptions("ses_2")) == [Subscription("c1", 0, PROTOCOL_V1, True)]


async def test_reading_a_connection_reads_its_subscriptions_in_the_same_request(aws: None) -> None:
    connections = dynamo_connections()
    await connections.register(info("c1"))
    await connections.subscribe("c1", "ses_1")
    await connections.subscribe("c1", "ses_2", after_seq=4)
    with dynamodb_calls(connections) as operations:
        known = await connections.get("c1")
    assert operations == ["Query"]
    # ses_1's subscription has no cursor but records when it was made: as good as cursor 0
    assert known == info("c1") and dict(known.subscribed) == {"ses_1": 0, "ses_2": 4}


async def test_message_sends_cursor_over_a_subscription_that_records_its_time_writes_nothing(
    aws: None,
) -> None:
    """The client's subscribe made it; each message_send asks for cursor 0, which the worker
    applies anyway to a subscription made before the turn's message (``streaming.sink``)."""
    connections = dynamo_connections(FakeClock(1_800_000_000.5))
    await connections.register(replace(info("c1"), batch=True))
    await connections.subscribe("c1", "ses_1")  # the client's subscribe after image_list
    known = await connections.get("c1")
    assert known is not None
    with dynamodb_calls(connections) as operations:
        await connections.subscribe("c1", "ses_1", after_seq=0, known=known)  # message_send's
    assert operations == []
    (sub,) = await connections.subscriptions("ses_1")
    assert (sub.after_seq, sub.subscribed_at) == (None, 1_800_000_000_500)

    await connections.subscribe("c1", "ses_1", after_seq=9, known=known)  # a resume's cursor: written
    (sub,) = await connections.subscriptions("ses_1")
    assert (sub.after_seq, sub.subscribed_at) == (9, 1_800_000_000_500)  # made when it was first made


async def test_a_subscription_removed_after_the_connection_was_read_is_not_written_back(aws: None) -> None:
    # a frame read the connection; $disconnect removed it meanwhile: the frame's repeat subscribe
    # leaves nothing behind (a conditional write would have recreated the subscription)
    connections = dynamo_connections()
    await connections.register(info("c1"))
    await connections.subscribe("c1", "ses_1", after_seq=0)
    known = await connections.get("c1")
    await connections.remove("c1")
    await connections.subscribe("c1", "ses_1", after_seq=0, known=known)
    assert list(await connections.subscriptions("ses_1")) == []


# the per-tenant cap (security/tenant_limits.py)


async def test_a_tenant_at_its_cap_is_refused_until_one_of_its_connections_closes(connections):
    from agentvm.errors import RateLimited

    for conn in ("c1", "c2"):
        await connections.register(info(conn, "tenant-a"), tenant_cap=2)
    with pytest.raises(RateLimited) as refused:
        await connections.register(info("c3", "tenant-a"), tenant_cap=2)
    assert refused.value.limit == 2 and await connections.get("c3") is None
    await connections.register(info("b1", "tenant-b"), tenant_cap=2)  # another tenant has its own
    # an `auth` frame registering a connection of the tenant again takes no second slot
    await connections.register(replace(info("c1", "tenant-a"), key_id="k0000000002a"), tenant_cap=2)
    await connections.remove("c2")
    await connections.register(info("c3", "tenant-a"), tenant_cap=2)
    with pytest.raises(RateLimited):
        await connections.register(info("c4", "tenant-a"), tenant_cap=2)
    # a connection that authenticates late (an `auth` frame) is counted then
    await connections.register(info("late", tenant=None), tenant_cap=2)
    with pytest.raises(RateLimited):
        await connections.register(info("late", "tenant-a"), tenant_cap=2)
    assert (await connections.get("late")).tenant_id is None  # as it was
