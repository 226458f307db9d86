"""The ``ResourceStore`` contract, on SQLite, DynamoDB (moto) and PostgreSQL."""

from __future__ import annotations

import pytest

from agentvm.adapters.aws.dynamodb.resources import DynamoDbResourceStore
from agentvm.adapters.local.sqlite.resources import SqliteResourceStore
from agentvm.adapters.postgres.resources import PostgresResourceStore
from agentvm.records import ResourceHead, ResourceVersion
from tests.contract.moto_table import backends


@pytest.fixture(params=backends(SqliteResourceStore, DynamoDbResourceStore, postgres=PostgresResourceStore))
async def store(request, tmp_path):
    async with request.param(tmp_path) as s:
        yield s


def version(
    v: str, seq: int, *, tenant: str = "acme", kind: str = "prompt", name: str = "greet"
) -> ResourceVersion:
    return ResourceVersion(
        tenantId=tenant,
        kind=kind,
        name=name,
        version=v,
        seq=seq,
        spec={"template": v},
        digest="d",
        createdAt=seq,
    )


def head(latest: str, seq: int, **kw) -> ResourceHead:
    return ResourceHead(
        tenantId="acme",
        kind="prompt",
        name="greet",
        latest=latest,
        seq=seq,
        versions=seq,
        updatedAt=seq,
        **kw,
    )


async def test_versions_are_created_once_and_listed_in_publish_order(store):
    assert await store.create_version(version("2.0.0", 2))
    assert await store.create_version(version("1", 1))
    assert not await store.create_version(version("1", 3))  # immutable
    assert [v.version for v in await store.list_versions("acme", "prompt", "greet")] == ["1", "2.0.0"]
    assert (await store.get_version("acme", "prompt", "greet", "2.0.0")).spec == {"template": "2.0.0"}
    assert await store.get_version("other", "prompt", "greet", "1") is None
    await store.create_version(version("1", 1, name="greeting"))  # a longer name is another resource
    assert len(await store.list_versions("acme", "prompt", "greet")) == 2
    await store.delete_version("acme", "prompt", "greet", "1")
    assert [v.version for v in await store.list_versions("acme", "prompt", "greet")] == ["2.0.0"]


async def test_a_head_is_not_overwritten_by_an_older_publish_unless_forced(store):
    assert await store.put_head(head("2", 2))
    assert not await store.put_head(head("1", 1))
    assert (await store.get_head("acme", "prompt", "greet")).latest == "2"
    assert await store.put_head(head("1", 1, tags={"stable": "1"}), force=True)
    assert (await store.get_head("acme", "prompt", "greet")).tags == {"stable": "1"}
    await store.delete_head("acme", "prompt", "greet")
    assert await store.get_head("acme", "prompt", "greet") is None


async def test_heads_are_listed_per_tenant_by_kind_and_name(store):
    for kind, name in [("tool", "b"), ("prompt", "z"), ("prompt", "a/b")]:
        await store.put_head(
            ResourceHead(tenantId="acme", kind=kind, name=name, latest="1", seq=1, versions=1, updatedAt=1)
        )
    await store.put_head(
        ResourceHead(tenantId="other", kind="prompt", name="x", latest="1", seq=1, versions=1, updatedAt=1)
    )
    assert [(h.kind, h.name) for h in await store.list_heads("acme")] == [
        ("prompt", "a/b"),
        ("prompt", "z"),
        ("tool", "b"),
    ]
    assert [h.name for h in await store.list_heads("acme", "tool")] == ["b"]


async def test_edges_name_the_dependents_of_a_resource(store):
    await store.add_edges(
        "acme|resource://agents/a@1", [("acme", "prompt", "greet", "1"), ("platform", "tool", "t", "latest")]
    )
    await store.add_edges("acme|resource://agents/b@1", [("acme", "prompt", "greet", "stable")])
    assert await store.dependents("acme", "prompt", "greet") == [
        ("acme|resource://agents/a@1", "1"),
        ("acme|resource://agents/b@1", "stable"),
    ]
    assert await store.dependents("platform", "tool", "t") == [("acme|resource://agents/a@1", "latest")]
    await store.remove_edges("acme|resource://agents/a@1", [("acme", "prompt", "greet", "1")])
    assert await store.dependents("acme", "prompt", "greet") == [("acme|resource://agents/b@1", "stable")]
