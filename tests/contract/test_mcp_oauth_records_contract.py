"""The ``McpOAuthRecords`` contract on SQLite, DynamoDB (moto) and PostgreSQL: a tenant's sealed
OAuth records of remote MCP servers, read and deleted by their tenant only, pending authorizations
taken once, expired records invisible, sizes bounded."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.adapters.local.sqlite.mcp_oauth import SqliteMcpOAuthRecords
from agentvm.errors import BadRequest, Conflict
from agentvm.ports import MCP_OAUTH_MAX_KEY_CHARS, MCP_OAUTH_MAX_VALUE_BYTES
from tests.contract.moto_table import backends

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

NOW = 1_800_000_000.0


class Clock:
    """Epoch seconds the test moves."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _dynamodb(table_name: str, **kwargs: Any) -> Any:
    from agentvm.adapters.aws.dynamodb.mcp_oauth import DynamoDbMcpOAuthRecords

    return DynamoDbMcpOAuthRecords(table_name, now=CLOCK, **kwargs)


def _postgres(database: Any) -> Any:
    from agentvm.adapters.postgres.mcp_oauth import PostgresMcpOAuthRecords

    return PostgresMcpOAuthRecords(database, now=CLOCK)


CLOCK = Clock()  # reset by the fixture: each test starts at NOW


@pytest.fixture(
    params=backends(lambda path: SqliteMcpOAuthRecords(path, now=CLOCK), _dynamodb, postgres=_postgres)
)
async def store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Any]:
    CLOCK.now = NOW
    async with request.param(tmp_path) as instance:
        yield instance


async def test_a_record_is_read_back_and_replaced_by_its_tenant(store):
    assert await store.get("acme", "tokens:abc") is None
    await store.put("acme", "tokens:abc", "sealed-1")
    assert await store.get("acme", "tokens:abc") == "sealed-1"
    await store.put("acme", "tokens:abc", "sealed-2", expires_at=NOW + 60)
    assert await store.get("acme", "tokens:abc") == "sealed-2"
    await store.put("acme", "tokens:abc", "sealed-3")  # no expiry any more
    CLOCK.now = NOW + 3600
    assert await store.get("acme", "tokens:abc") == "sealed-3"


async def test_another_tenant_sees_nothing_and_cannot_overwrite(store):
    await store.put("acme", "tokens:abc", "sealed-acme")
    assert await store.get("globex", "tokens:abc") is None
    await store.delete("globex", "tokens:abc")
    assert await store.get("acme", "tokens:abc") == "sealed-acme"
    with pytest.raises(Conflict):
        await store.put("globex", "tokens:abc", "sealed-globex")
    with pytest.raises(Conflict):
        await store.put("globex", "tokens:abc", "sealed-globex", expires_at=NOW + 60)
    assert await store.get("acme", "tokens:abc") == "sealed-acme"
    assert await store.get("globex", "tokens:abc") is None


async def test_an_expired_record_is_invisible(store):
    await store.put("acme", "tokens:abc", "sealed", expires_at=NOW + 10)
    await store.put("acme", "state:s1", "pending", expires_at=NOW + 10)
    CLOCK.now = NOW + 10
    assert await store.get("acme", "tokens:abc") == "sealed"  # until its second has passed
    CLOCK.now = NOW + 11
    assert await store.get("acme", "tokens:abc") is None
    assert await store.take("state:s1") is None
    await store.put("acme", "tokens:abc", "sealed-again")  # an expired key can be written again
    assert await store.get("acme", "tokens:abc") == "sealed-again"


async def test_an_expired_key_of_another_tenant_does_not_block_a_write(store):
    await store.put("acme", "state:s1", "pending", expires_at=NOW + 10)
    CLOCK.now = NOW + 11
    await store.put("globex", "state:s1", "pending-globex", expires_at=NOW + 60)
    assert await store.take("state:s1") == ("globex", "pending-globex")


async def test_a_pending_authorization_is_taken_once(store):
    await store.put("acme", "state:s1", "pending", expires_at=NOW + 600)
    assert await store.take("state:s1") == ("acme", "pending")
    assert await store.take("state:s1") is None
    assert await store.get("acme", "state:s1") is None
    assert await store.take("state:missing") is None


async def test_of_concurrent_takers_exactly_one_gets_the_record(store):
    await store.put("acme", "state:s1", "pending", expires_at=NOW + 600)
    taken = await asyncio.gather(*(store.take("state:s1") for _ in range(8)))
    assert [t for t in taken if t is not None] == [("acme", "pending")]


async def test_delete_forgets_the_tenants_own_key_only(store):
    await store.put("acme", "tokens:abc", "sealed")
    await store.delete("acme", "tokens:abc")
    assert await store.get("acme", "tokens:abc") is None
    await store.delete("acme", "tokens:abc")  # missing: nothing happens
    await store.put("acme", "tokens:abc", "sealed")  # deleted: free to write again
    assert await store.get("acme", "tokens:abc") == "sealed"


async def test_delete_tenant_counts_and_keeps_other_tenants(store):
    for i in range(3):
        await store.put("acme", f"tokens:{i}", f"sealed-{i}")
    await store.put("acme", "state:s1", "pending", expires_at=NOW + 600)
    await store.put("globex", "tokens:g", "sealed-g")
    assert await store.delete_tenant("acme") == 4
    assert await store.get("acme", "tokens:0") is None
    assert await store.take("state:s1") is None
    assert await store.get("globex", "tokens:g") == "sealed-g"
    assert await store.delete_tenant("acme") == 0
    await store.put("acme", "tokens:0", "sealed")  # the tenant's keys are free again
    assert await store.get("acme", "tokens:0") == "sealed"


async def test_keys_and_values_are_bounded(store):
    longest_key = "k" * MCP_OAUTH_MAX_KEY_CHARS
    largest_value = "v" * MCP_OAUTH_MAX_VALUE_BYTES
    await store.put("acme", longest_key, largest_value)
    assert await store.get("acme", longest_key) == largest_value
    with pytest.raises(BadRequest):
        await store.put("acme", longest_key + "k", "sealed")
    with pytest.raises(BadRequest):
        await store.put("acme", "", "sealed")
    with pytest.raises(BadRequest):
        await store.put("acme", "tokens:abc", largest_value + "v")
    with pytest.raises(BadRequest):  # bytes, not characters
        await store.put("acme", "tokens:abc", "é" * (MCP_OAUTH_MAX_VALUE_BYTES // 2 + 1))
    assert await store.get("acme", "tokens:abc") is None


@pytest.mark.aws
async def test_on_dynamodb_ttl_drops_an_expiring_record_no_sooner_than_it_expires():
    import boto3

    from agentvm.adapters.aws.dynamodb.mcp_oauth import DynamoDbMcpOAuthRecords
    from tests.contract.moto_table import REGION, TABLE, atomic_moto, create_table

    with atomic_moto():
        create_table()
        store = DynamoDbMcpOAuthRecords(TABLE, region=REGION, now=CLOCK)
        await store.put("acme", "state:s1", "pending", expires_at=NOW + 10.5)
        await store.put("acme", "tokens:abc", "sealed")
        client = boto3.client("dynamodb", region_name=REGION)
        key = {"pk": {"S": "MCPOAUTH#state:s1"}, "sk": {"S": "META"}}
        item = client.get_item(TableName=TABLE, Key=key)["Item"]
        assert item["expiresAt"] == {"N": str(int(NOW) + 11)}  # the second rounded up
        key = {"pk": {"S": "MCPOAUTH#tokens:abc"}, "sk": {"S": "META"}}
        assert "expiresAt" not in client.get_item(TableName=TABLE, Key=key)["Item"]  # kept
