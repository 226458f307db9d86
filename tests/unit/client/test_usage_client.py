"""The SDK's ``UsageClient`` against the real HTTP API (the app in process, a real runtime): a turn
whose model reports cache reads and writes, then the typed records, summary, export and prices, with
what caching saved; another tenant's key sees none of it."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import httpx
import pytest

from agentvm.api.app import create_app
from agentvm.client import RequestFailed, UsageClient, UsageRecords, UsageSummary
from agentvm.observability.pricing import list_price
from tests.security_harness import new_key, secure

MODEL = "anthropic/claude-haiku-4-5"


@pytest.fixture
async def world(harness):
    secure(harness)
    tokens = {t: await new_key(harness.rt, t, "admin") for t in ("tenant-a", "tenant-b")}
    client = await harness.client("tenant-a")
    image = (await client.request("image_create", containerId="u1", config={"name": "A", "model": MODEL}))[
        "record"
    ]
    harness.model.cache_read_tokens, harness.model.cache_write_tokens = 40, 8
    harness.model.add("a cached reply")
    await client.request("message_send", imageId=image["imageId"], content="hello")
    await harness.run_turns()
    return harness, tokens, image


def usage_client(harness, token: str) -> UsageClient:
    return UsageClient("http://avm", token=token, transport=httpx.ASGITransport(app=create_app(harness.rt)))


async def test_the_usage_client_reads_typed_usage_with_cache_savings(world):
    harness, tokens, image = world
    price = list_price(MODEL)
    assert price is not None
    [record] = await harness.rt.store.list_usage("tenant-a")
    assert record.cacheReadTokens > 0 and record.cacheWriteTokens > 0
    saved = (
        record.cacheReadTokens * (price.input - price.cache_read)
        - record.cacheWriteTokens * (price.cache_write - price.input)
    ) / Decimal(1_000_000)
    expected = float((saved * Decimal("1.05")).quantize(Decimal("0.000001")))

    async with usage_client(harness, tokens["tenant-a"]) as usage:
        records = await usage.records()
        summary = await usage.summary(group_by="container,model")
        exported = await usage.export(group_by="model")
        prices = await usage.prices()

    assert isinstance(records, UsageRecords) and isinstance(summary, UsageSummary)
    assert [r.cacheSavings for r in records.records] == [expected]
    assert [(s.sessionId, s.cacheSavings) for s in records.sessions] == [(image["sessionId"], expected)]
    assert records.totals.cacheSavings == expected
    assert summary.totals.cacheSavings == expected and summary.totals.cost is None  # a tenant
    assert summary.rows[0].model_extra == {
        "period": summary.rows[0].period,
        "containerId": "u1",
        "model": MODEL,
    }
    [line] = csv.DictReader(io.StringIO(exported))
    assert float(line["cacheSavings"]) == expected
    assert prices.prices[MODEL].cacheRead == float(
        (price.cache_read * Decimal("1.05")).quantize(Decimal("0.000001"))
    )


async def test_another_tenants_key_sees_none_of_it_and_refusals_raise(world):
    harness, tokens, _ = world
    async with usage_client(harness, tokens["tenant-b"]) as usage:
        records = await usage.records()
        summary = await usage.summary()
        with pytest.raises(RequestFailed) as refused:
            await usage.summary(tenant_id="tenant-a")
    assert records.records == [] and records.sessions == [] and records.totals.cacheSavings == 0.0
    assert summary.totals.records == 0 and summary.totals.cacheSavings == 0.0
    assert refused.value.code == "forbidden"


async def test_the_usage_client_reads_what_the_reply_cache_saved(harness):
    secure(harness)
    token = await new_key(harness.rt, "tenant-a", "admin")
    client = await harness.client("tenant-a")
    config = {"name": "Desk", "model": MODEL, "replyCache": {"enabled": True}}
    harness.model.add("We open at nine.")
    for user in ("u1", "u2"):
        image = (await client.request("image_create", containerId=user, config=config))["record"]
        await client.request("message_send", imageId=image["imageId"], content="Opening hours?")
        await harness.run_turns()
    paid, hit = sorted(await harness.rt.store.list_usage("tenant-a"), key=lambda r: r.kind != "turn")
    assert (paid.kind, hit.kind, hit.savedInputTokens) == ("turn", "reply_cache", paid.inputTokens)
    price = list_price(MODEL)
    assert price is not None
    saved = (paid.inputTokens * price.input + paid.outputTokens * price.output) / Decimal(1_000_000)
    expected = float((saved * Decimal("1.05")).quantize(Decimal("0.000001")))

    async with usage_client(harness, token) as usage:
        records = await usage.records()
        summary = await usage.summary(group_by="kind")

    by_kind = {r.kind: r for r in records.records}
    assert by_kind["reply_cache"].replyCacheSavings == expected > 0
    assert (by_kind["reply_cache"].savedInputTokens, by_kind["reply_cache"].savedOutputTokens) == (
        paid.inputTokens,
        paid.outputTokens,
    )
    assert by_kind["turn"].replyCacheSavings == 0.0
    assert sorted(s.replyCacheSavings for s in records.sessions) == [0.0, expected]
    assert (records.totals.turns, records.totals.savedInputTokens) == (2, paid.inputTokens)
    assert records.totals.replyCacheSavings == summary.totals.replyCacheSavings == expected
    rows = {row.model_extra["kind"]: row for row in summary.rows if row.model_extra}
    assert (rows["reply_cache"].savedOutputTokens, rows["reply_cache"].charge) == (paid.outputTokens, 0.0)
    assert summary.totals.savedInputTokens == paid.inputTokens
