"""The ``Webhooks`` contract (ports/webhooks.py), on SQLite, DynamoDB (moto) and PostgreSQL: one suite,
so the outbox cannot drift between hosts. Endpoints per tenant with their sealed secrets, one
delivery per (endpoint, event), due deliveries in order, one lease per attempt, and deletes that
take the deliveries along."""

from __future__ import annotations

import asyncio

import pytest

from agentvm.adapters.aws.dynamodb.webhooks import DynamoDbWebhooks
from agentvm.adapters.local.sqlite.webhooks import SqliteWebhooks
from agentvm.adapters.postgres.webhooks import PostgresWebhooks
from agentvm.configcentre.sealing import SecretSealer
from agentvm.records import WebhookDelivery, WebhookEndpoint
from tests.contract.moto_table import backends

SEALER = SecretSealer(lambda: (b"webhooks-contract-server-secret-0123456789",))
SECRET = "whsec_c2lnbmluZy1zZWNyZXQtb2YtdGhlLWNvbnRyYWN0LXRlc3Q="


@pytest.fixture(
    params=backends(
        lambda path: SqliteWebhooks(path, SEALER),
        lambda table, region: DynamoDbWebhooks(table, SEALER, region=region),
        file="webhooks.db",
        postgres=lambda database: PostgresWebhooks(database, SEALER),
    )
)
async def hooks(request, tmp_path):
    async with request.param(tmp_path) as store:
        yield store


def endpoint(endpoint_id: str = "whe_1", tenant: str = "acme", created: int = 1000) -> WebhookEndpoint:
    return WebhookEndpoint(
        tenantId=tenant,
        endpointId=endpoint_id,
        url="https://example.com/hook",
        events=["turn.ended", "approval.needed"],
        description="ops",
        createdAt=created,
    )


def delivery(
    delivery_id: str,
    event_id: str,
    *,
    endpoint_id: str = "whe_1",
    tenant: str = "acme",
    at: int = 1000,
    created: int | None = None,
) -> WebhookDelivery:
    return WebhookDelivery(
        tenantId=tenant,
        endpointId=endpoint_id,
        deliveryId=delivery_id,
        eventId=event_id,
        eventType="turn.ended",
        payload='{"type":"turn.ended"}',
        nextAttemptAt=at,
        createdAt=at if created is None else created,
    )


async def test_endpoints_are_the_tenants_own_and_their_secret_opens(hooks):
    await hooks.put_endpoint(endpoint("whe_1"), SECRET)
    await hooks.put_endpoint(endpoint("whe_2", created=2000), SECRET.replace("c2", "d3"))
    await hooks.put_endpoint(endpoint("whe_9", tenant="other"), SECRET)
    assert await hooks.get_endpoint("acme", "whe_1") == endpoint("whe_1")
    assert await hooks.get_endpoint("other", "whe_1") is None  # another tenant's id reads as missing
    assert [e.endpointId for e in await hooks.list_endpoints("acme")] == ["whe_1", "whe_2"]
    assert [e.endpointId for e in await hooks.list_endpoints("other")] == ["whe_9"]
    assert await hooks.endpoint_secret(endpoint("whe_1")) == SECRET
    assert await hooks.endpoint_secret(endpoint("whe_2", created=2000)) == SECRET.replace("c2", "d3")

    assert await hooks.delete_endpoint("other", "whe_1") is False  # not its endpoint
    assert await hooks.delete_endpoint("acme", "whe_1") is True
    assert await hooks.delete_endpoint("acme", "whe_1") is False
    assert await hooks.get_endpoint("acme", "whe_1") is None
    with pytest.raises(LookupError):
        await hooks.endpoint_secret(endpoint("whe_1"))


async def test_an_event_is_stored_once_per_endpoint(hooks):
    await hooks.put_endpoint(endpoint("whe_1"), SECRET)
    await hooks.put_endpoint(endpoint("whe_2"), SECRET)
    assert await hooks.enqueue(delivery("msg_1", "turn_a.completed.1")) is True
    # the same event recorded again (a redelivered job) with a fresh delivery id: nothing stored
    assert await hooks.enqueue(delivery("msg_2", "turn_a.completed.1")) is False
    assert await hooks.enqueue(delivery("msg_3", "turn_a.completed.1", endpoint_id="whe_2")) is True
    assert await hooks.enqueue(delivery("msg_4", "turn_a.completed.2")) is True  # another attempt's event
    assert await hooks.get_delivery("acme", "msg_2") is None
    assert [d.deliveryId for d in await hooks.list_deliveries("acme", "whe_1", 10)] == ["msg_4", "msg_1"]


async def test_racing_recorders_store_one_delivery(hooks):
    await hooks.put_endpoint(endpoint("whe_1"), SECRET)
    stored = await asyncio.gather(*(hooks.enqueue(delivery(f"msg_{i}", "evt")) for i in range(8)))
    assert sorted(stored) == [False] * 7 + [True]
    assert len(await hooks.list_deliveries("acme", "whe_1", 10)) == 1


async def test_due_deliveries_come_in_order_and_one_lease_wins_each_attempt(hooks):
    await hooks.put_endpoint(endpoint("whe_1"), SECRET)
    for i, at in enumerate((3000, 1000, 2000, 9000)):
        assert await hooks.enqueue(delivery(f"msg_{i}", f"evt_{i}", at=at))
    due = await hooks.due_deliveries(2500, 10)
    assert [d.deliveryId for d in due] == ["msg_1", "msg_2"]  # by next attempt; not the later ones
    assert [d.deliveryId for d in await hooks.due_deliveries(5000, 2)] == ["msg_1", "msg_2"]  # the limit

    first = due[0]
    assert await hooks.lease(first, 60_000) is True
    assert await hooks.lease(first, 70_000) is False  # another sender read the same attempt
    assert [d.deliveryId for d in await hooks.due_deliveries(2500, 10)] == ["msg_2"]
    assert (await hooks.get_delivery("acme", "msg_1")).nextAttemptAt == 60_000

    sent = first.model_copy(
        update={"status": "delivered", "attempts": 1, "lastStatusCode": 200, "deliveredAt": 2600}
    )
    await hooks.save_delivery(sent)
    assert await hooks.get_delivery("acme", "msg_1") == sent
    assert "msg_1" not in [d.deliveryId for d in await hooks.due_deliveries(10**12, 10)]
    assert await hooks.lease(sent, 90_000) is False  # delivered: nothing to lease

    retry = due[1].model_copy(update={"attempts": 1, "lastStatusCode": 500, "nextAttemptAt": 7000})
    await hooks.save_delivery(retry)
    assert [d.deliveryId for d in await hooks.due_deliveries(6999, 10)] == ["msg_0"]
    assert [d.deliveryId for d in await hooks.due_deliveries(7000, 10)] == ["msg_0", "msg_2"]

    # a replay: pending again at once, attempts counted anew
    again = sent.model_copy(
        update={"status": "pending", "attempts": 0, "nextAttemptAt": 2700, "deliveredAt": None}
    )
    await hooks.save_delivery(again)
    assert [d.deliveryId for d in await hooks.due_deliveries(2700, 10)] == ["msg_1"]


async def test_deliveries_are_read_and_listed_by_their_tenant_only(hooks):
    await hooks.put_endpoint(endpoint("whe_1"), SECRET)
    for i in range(5):
        assert await hooks.enqueue(delivery(f"msg_{i}", f"evt_{i}", created=1000 + i))
    assert (await hooks.get_delivery("acme", "msg_3")).eventId == "evt_3"
    assert await hooks.get_delivery("other", "msg_3") is None
    assert await hooks.get_delivery("acme", "msg_missing") is None
    assert [d.deliveryId for d in await hooks.list_deliveries("acme", "whe_1", 3)] == [
        "msg_4",
        "msg_3",
        "msg_2",
    ]
    assert await hooks.list_deliveries("other", "whe_1", 10) == []
    assert await hooks.list_deliveries("acme", "whe_missing", 10) == []


async def test_deleting_an_endpoint_takes_its_deliveries_and_they_stay_gone(hooks):
    await hooks.put_endpoint(endpoint("whe_1"), SECRET)
    await hooks.put_endpoint(endpoint("whe_2"), SECRET)
    for i in range(30):  # more than one batch of deletes
        assert await hooks.enqueue(delivery(f"msg_{i}", f"evt_{i}", at=1000 + i))
    assert await hooks.enqueue(delivery("msg_kept", "evt_0", endpoint_id="whe_2"))
    leased = (await hooks.due_deliveries(5000, 1))[0]
    assert await hooks.delete_endpoint("acme", "whe_1") is True
    assert await hooks.list_deliveries("acme", "whe_1", 100) == []
    assert await hooks.get_delivery("acme", "msg_5") is None
    assert [d.deliveryId for d in await hooks.due_deliveries(10**12, 100)] == ["msg_kept"]
    # a sender that was sending one meanwhile records its answer: it does not come back
    await hooks.save_delivery(leased.model_copy(update={"status": "delivered", "attempts": 1}))
    assert await hooks.get_delivery("acme", leased.deliveryId) is None
    # the endpoint's id registered again starts with no history of events
    await hooks.put_endpoint(endpoint("whe_1"), SECRET)
    assert await hooks.enqueue(delivery("msg_new", "evt_0")) is True
