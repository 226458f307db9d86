"""``/v1/usage/summary`` on both hosts (local SQLite, and the AWS runtime on moto): a scripted day of
real turns for two tenants and three end users, then the summary by every grouping and period
equals the sums of the usage records the store holds; tenants see their own usage only, platform
admins everyone's; bad queries get stable error codes."""

from __future__ import annotations

import csv
import io
import itertools
import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources
from agentvm.api.app import create_app
from agentvm.observability.periods import DAY_MS, HOUR_MS
from agentvm.observability.pricing import list_price
from agentvm.observability.usage import COLUMNS, DIMENSIONS, UsageQuery
from tests.contract.test_usage_rollups_contract import expected
from tests.security_harness import ManualClock, new_key
from tests.unit.security.test_tenant_attacks import RUNTIME_FACTORIES

DAY = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FROM, TO = "2026-01-01", "2026-01-02"
METRICS = (
    "records",
    "turns",
    "inputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
    "totalTokens",
    "estimatedRecords",
    "savedInputTokens",
    "savedOutputTokens",
)
# (tenant, end user, model of the image, hour of the day, what the model answers)
DAY_OF_TURNS = [
    ("tenant-a", "user-alice", "anthropic/claude-haiku-4-5", 0, "good morning to you"),
    ("tenant-a", "user-alice", "openai/gpt-4.1-mini", 3, "three words here"),
    ("tenant-a", "user-alice", "anthropic/claude-haiku-4-5", 9, "tool"),
    ("tenant-a", "user-bob", "anthropic/claude-sonnet-4-5", 9, "a reply for bob"),
    ("tenant-a", "user-bob", "anthropic/claude-sonnet-4-5", 17, "another one"),
    ("tenant-b", "user-alice", "anthropic/claude-haiku-4-5", 12, "same name other tenant"),
    ("tenant-b", "user-alice", "openai/gpt-4.1-mini", 23, "last turn of the day"),
]


@pytest.fixture(params=RUNTIME_FACTORIES)
async def world(request, tmp_path):
    async with request.param(tmp_path) as w:
        w.tokens["platform"] = await new_key(w.rt, "platform", "admin")
        w.rt.clock = ManualClock(DAY)
        yield w


async def get(world, tenant: str, path: str, **params: Any) -> httpx.Response:
    if getattr(world, "app", None) is None:
        world.app = create_app(world.rt)  # one app per test: building one takes a while
    transport = httpx.ASGITransport(app=world.app)
    headers = {"Authorization": f"Bearer {world.tokens[tenant]}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http:
        return await http.get(path, params=params)


async def play_the_day(world) -> None:
    """Real turns through the gateway and the worker, each at its hour; one is a tool turn (a
    ``step`` record), and the model reports cache reads and writes."""
    world.rt.tools = ToolSources()
    clients = {t: await world.connect(world.tokens[t]) for t in ("tenant-a", "tenant-b")}
    images: dict[tuple[str, str, str], str] = {}
    world.model.cache_read_tokens, world.model.cache_write_tokens = 40, 8
    for tenant, user, model, hour, reply in DAY_OF_TURNS:
        client = clients[tenant]
        if (tenant, user, model) not in images:
            config = {"name": model, "model": model, "tools": [{"type": "builtin", "name": "calculator"}]}
            created = await client.request("image_create", containerId=user, config=config)
            images[(tenant, user, model)] = created["record"]["imageId"]
        world.rt.clock.ms = DAY + hour * HOUR_MS + 60_000
        if reply == "tool":
            world.model.add(Calls(("calculator", {"expression": "6*7"})), "it is 42")
        else:
            world.model.add(reply)
        await client.request("message_send", imageId=images[(tenant, user, model)], content="hello there")
        await world.run_turns()


async def records_of(world, *tenants: str) -> list:
    return [r for t in tenants for r in await world.rt.store.list_usage(t)]


def rows_by_key(body: dict[str, Any]) -> dict[tuple[str, ...], dict[str, int]]:
    dims = body["groupBy"]
    return {
        (row["period"], *(row[COLUMNS[d]] for d in dims)): {m: row[m] for m in METRICS}
        for row in body["rows"]
    }


async def test_the_summary_equals_the_usage_records_by_every_grouping_and_period(world):
    await play_the_day(world)
    mine = await records_of(world, "tenant-a")
    assert {r.kind for r in mine} == {"turn", "step"} and {r.containerId for r in mine} == {
        "user-alice",
        "user-bob",
    }
    assert all(r.cacheReadTokens == 40 and r.cacheWriteTokens == 8 for r in mine)
    checked = 0
    for n in range(len(DIMENSIONS) + 1):
        for group_by in itertools.combinations(DIMENSIONS, n):
            by_day = bool({"container", "image"} & set(group_by))
            for period in ("day", "month", "range") if by_day else ("hour", "day", "month", "range"):
                r = await get(
                    world,
                    "tenant-a",
                    "/v1/usage/summary",
                    groupBy=",".join(group_by),
                    period=period,
                    **{"from": FROM, "to": TO},
                )
                assert r.status_code == 200, r.text
                body = r.json()
                query = UsageQuery(DAY, DAY + DAY_MS, period, group_by)  # type: ignore[arg-type]
                assert rows_by_key(body) == expected(query, mine), (group_by, period)
                assert {m: body["totals"][m] for m in METRICS} == next(
                    iter(expected(UsageQuery(DAY, DAY + DAY_MS), mine).values())
                )
                checked += 1
    assert checked == 104


async def test_one_end_user_and_the_default_range(world):
    await play_the_day(world)
    bob = await get(
        world,
        "tenant-a",
        "/v1/usage/summary",
        containerId="user-bob",
        groupBy="model",
        **{"from": FROM, "to": TO},
    )
    [row] = bob.json()["rows"]
    assert (row["model"], row["turns"]) == ("anthropic/claude-sonnet-4-5", 2)
    # the default range is this month up to the end of today (the clock is at 23:01 on Jan 1)
    default = (await get(world, "tenant-a", "/v1/usage/summary")).json()
    assert (default["from"], default["to"], default["period"]) == (
        "2026-01-01T00:00:00Z",
        "2026-01-02T00:00:00Z",
        "range",
    )
    assert default["totals"]["records"] == len(await records_of(world, "tenant-a"))
    by_month = (await get(world, "tenant-a", "/v1/usage/summary", month="2026-01", period="day")).json()
    assert [r["period"] for r in by_month["rows"]] == ["2026-01-01"]


async def test_tenants_see_their_own_usage_and_platform_admins_everyones(world):
    await play_the_day(world)
    b = (await get(world, "tenant-b", "/v1/usage/summary", groupBy="tenant,container")).json()
    assert [(r["tenantId"], r["containerId"]) for r in b["rows"]] == [("tenant-b", "user-alice")]
    assert b["totals"]["turns"] == 2
    # another tenant's id, existing or not, is refused alike
    foreign = await get(world, "tenant-b", "/v1/usage/summary", tenantId="tenant-a")
    nobody = await get(world, "tenant-b", "/v1/usage/summary", tenantId="tenant-nobody")
    assert foreign.status_code == nobody.status_code == 403
    assert foreign.json() == nobody.json() and foreign.json()["error"]["code"] == "forbidden"
    every = await get(world, "tenant-b", "/v1/usage/summary", tenantId="*")
    assert every.status_code == 403
    # platform admins: one tenant, or every tenant
    a = (await get(world, "platform", "/v1/usage/summary", tenantId="tenant-a")).json()
    assert a["tenantId"] == "tenant-a" and a["totals"]["turns"] == 5
    everyone = (await get(world, "platform", "/v1/usage/summary", tenantId="*", groupBy="tenant")).json()
    assert everyone["tenantId"] == "*"
    assert [(r["tenantId"], r["turns"]) for r in everyone["rows"]] == [("tenant-a", 5), ("tenant-b", 2)]
    records = await records_of(world, "tenant-a", "tenant-b")
    assert everyone["totals"]["inputTokens"] == sum(r.inputTokens for r in records)


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"period": "week"}, "invalid_period"),
        ({"groupBy": "user"}, "invalid_grouping"),
        ({"groupBy": "model,model"}, "invalid_grouping"),
        ({"groupBy": "container", "period": "hour"}, "invalid_grouping"),
        ({"from": "yesterday"}, "invalid_range"),
        ({"from": "2026-02-30"}, "invalid_range"),
        ({"from": "2026-01-02", "to": "2026-01-01"}, "invalid_range"),
        ({"from": "2026-01-01T10:30:00Z", "to": "2026-01-01T12"}, "invalid_range"),
        ({"containerId": "u1", "from": "2026-01-01T10", "to": "2026-01-02"}, "invalid_range"),
        ({"month": "2026-13"}, "invalid_range"),
        ({"month": "2026-01", "from": "2026-01-01"}, "invalid_range"),
        ({"from": "2024-12-01", "to": "2026-01-02"}, "range_too_large"),
        ({"period": "hour", "from": "2026-01-01", "to": "2026-02-02"}, "range_too_large"),
    ],
)
async def test_bad_queries_get_clear_errors_with_stable_codes(world, params, code):
    r = await get(world, "tenant-a", "/v1/usage/summary", **params)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]


# -- pricing and export ----------------------------------------------------------------------------
# The list prices of the day's models (the price library's, tests/unit/observability/test_pricing.py
# checks them against it), USD per million tokens: input, output, cache read, cache write.
def _listed(model: str) -> tuple[Decimal, Decimal, Decimal, Decimal]:
    price = list_price(model)
    assert price is not None, model
    return (price.input, price.output, price.cache_read, price.cache_write)


LIST = {
    m: _listed(m)
    for m in ("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5", "openai/gpt-4.1-mini")
}


def cost_of(records, prices=LIST) -> Decimal:
    total = Decimal(0)
    for r in records:
        p_in, p_out, p_read, p_write = (Decimal(str(v)) for v in prices[r.model])
        uncached = r.inputTokens - r.cacheReadTokens - r.cacheWriteTokens
        total += (
            uncached * p_in
            + r.cacheReadTokens * p_read
            + r.cacheWriteTokens * p_write
            + r.outputTokens * p_out
        )
    return total / 1_000_000


def savings_of(records, prices=LIST) -> Decimal:
    """What caching saved at list price: reads' discount less writes' premium."""
    total = Decimal(0)
    for r in records:
        p_in, _, p_read, p_write = (Decimal(str(v)) for v in prices[r.model])
        total += r.cacheReadTokens * (p_in - p_read) - r.cacheWriteTokens * (p_write - p_in)
    return total / 1_000_000


def micro(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.000001')):f}"


async def export(world, tenant: str, **params: Any) -> httpx.Response:
    return await get(world, tenant, "/v1/usage/export", **params)


async def test_the_export_prices_the_day_with_the_markup_per_end_user_and_model(world):
    await play_the_day(world)
    records = await records_of(world, "tenant-a", "tenant-b")

    r = await export(world, "platform", tenantId="*", month="2026-01")

    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"] == 'attachment; filename="usage-all-2026-01-01-2026-02-01.csv"'
    lines = list(csv.DictReader(io.StringIO(r.text)))
    assert list(lines[0]) == [
        "period",
        "tenantId",
        "containerId",
        "model",
        *METRICS[:-2],
        "cost",
        "charge",
        "cacheSavings",
        "unpricedTokens",
        "currency",
        "savedInputTokens",  # appended later: the columns before them never move
        "savedOutputTokens",
        "replyCacheSavings",
    ]
    assert len(lines) == len({(x.tenantId, x.containerId, x.model) for x in records}) == 5
    for line in lines:
        mine = [
            x
            for x in records
            if (x.tenantId, x.containerId, x.model) == (line["tenantId"], line["containerId"], line["model"])
        ]
        cost = cost_of(mine)
        assert line["period"] == "2026-01-01T00:00:00Z/2026-02-01T00:00:00Z"
        assert int(line["inputTokens"]) == sum(x.inputTokens for x in mine)
        assert int(line["cacheReadTokens"]) == sum(x.cacheReadTokens for x in mine)
        assert (line["cost"], line["charge"]) == (micro(cost), micro(cost * Decimal("1.05")))
        assert line["cacheSavings"] == micro(savings_of(mine) * Decimal("1.05"))
        assert int(line["cacheReadTokens"]) > 0 and Decimal(line["cacheSavings"]) > 0
        assert (line["unpricedTokens"], line["currency"]) == ("0", "USD")
    total = sum(Decimal(line["charge"]) for line in lines)
    assert abs(total - cost_of(records) * Decimal("1.05")) <= Decimal("0.000001") * len(lines)


async def test_json_lines_and_the_markup_and_prices_set_in_the_config_centre(world):
    await play_the_day(world)
    transport = httpx.ASGITransport(app=create_app(world.rt))
    headers = {"Authorization": f"Bearer {world.tokens['platform']}"}
    haiku = {"input": 0.8, "output": 4, "cacheRead": 0.08}  # a negotiated rate; cache writes at input
    async with httpx.AsyncClient(transport=transport, base_url="http://avm", headers=headers) as http:
        put = await http.put(
            "/v1/config",
            json={
                "scope": "server",
                "values": {"billing.markup": 1.2, "billing.prices": {"anthropic/claude-haiku-4-5": haiku}},
            },
        )
        assert put.status_code == 200, put.text
        bad = await http.put("/v1/config", json={"scope": "server", "values": {"billing.markup": -1}})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_config")
    prices = {**LIST, "anthropic/claude-haiku-4-5": (0.8, 4, 0.08, 0.8)}

    r = await export(
        world, "platform", tenantId="tenant-a", format="jsonl", groupBy="model", **{"from": FROM, "to": TO}
    )

    assert r.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in r.text.splitlines()]
    records = await records_of(world, "tenant-a")
    assert [line["model"] for line in lines] == sorted({x.model for x in records})
    for line in lines:
        cost = cost_of([x for x in records if x.model == line["model"]], prices)
        assert line["cost"] == float(micro(cost)) and line["charge"] == float(micro(cost * Decimal("1.2")))
        saved = savings_of([x for x in records if x.model == line["model"]], prices)
        assert line["cacheSavings"] == float(micro(saved * Decimal("1.2")))  # the override's prices
    listed = (await get(world, "platform", "/v1/usage/prices")).json()
    assert listed["markup"] == 1.2 and listed["overridden"] == ["anthropic/claude-haiku-4-5"]
    assert listed["prices"]["anthropic/claude-haiku-4-5"] == {
        "input": 0.8,
        "output": 4.0,
        "cacheRead": 0.08,
        "cacheWrite": 0.8,
    }


async def test_tenants_see_what_they_are_charged_never_the_cost_or_the_markup(world):
    await play_the_day(world)
    summary = (await get(world, "tenant-b", "/v1/usage/summary", groupBy="model")).json()
    assert "markup" not in summary and all("cost" not in row for row in [*summary["rows"], summary["totals"]])
    records = await records_of(world, "tenant-b")
    assert summary["totals"]["charge"] == float(micro(cost_of(records) * Decimal("1.05")))
    assert summary["totals"]["cacheSavings"] == float(micro(savings_of(records) * Decimal("1.05")))
    lines = list(csv.DictReader(io.StringIO((await export(world, "tenant-b")).text)))
    assert "cost" not in lines[0] and {line["tenantId"] for line in lines} == {"tenant-b"}
    prices = (await get(world, "tenant-b", "/v1/usage/prices")).json()
    assert set(prices) == {"currency", "pricesAsOf", "prices"}
    assert prices["prices"]["anthropic/claude-haiku-4-5"]["output"] == 5.25  # 5 x 1.05


async def test_a_model_without_a_price_is_counted_as_unpriced(world):
    client = await world.connect(world.tokens["tenant-a"])
    created = await client.request(
        "image_create", containerId="u1", config={"name": "x", "model": "acme/own-llm"}
    )
    world.rt.clock.ms = DAY + HOUR_MS
    world.model.add("four words of reply")
    await client.request("message_send", imageId=created["record"]["imageId"], content="hello")
    await world.run_turns()

    totals = (await get(world, "tenant-a", "/v1/usage/summary", **{"from": FROM, "to": TO})).json()["totals"]

    [record] = await records_of(world, "tenant-a")
    assert record.model == "acme/own-llm"
    assert totals["unpricedTokens"] == record.inputTokens + record.outputTokens > 0
    assert totals["charge"] == 0.0
    platform = await get(
        world, "platform", "/v1/usage/summary", tenantId="tenant-a", **{"from": FROM, "to": TO}
    )
    assert (platform.json()["totals"]["cost"], platform.json()["totals"]["unpricedTokens"]) == (0.0, 5)


async def test_the_usage_records_show_what_caching_saved_per_turn_session_and_tenant(world):
    await play_the_day(world)
    records = await records_of(world, "tenant-a")

    body = (await get(world, "tenant-a", "/v1/usage")).json()

    assert [r["turnId"] for r in body["records"]] == [r.turnId for r in records]
    for shown, record in zip(body["records"], records, strict=True):
        assert shown["cacheReadTokens"] == record.cacheReadTokens > 0
        assert shown["cacheSavings"] == float(micro(savings_of([record]) * Decimal("1.05")))
    sessions = {s["sessionId"]: s for s in body["sessions"]}
    assert set(sessions) == {r.sessionId for r in records} and len(sessions) > 1
    for session_id, shown in sessions.items():
        mine = [r for r in records if r.sessionId == session_id]
        assert shown["cacheReadTokens"] == sum(r.cacheReadTokens for r in mine)
        assert shown["cacheWriteTokens"] == sum(r.cacheWriteTokens for r in mine)
        assert shown["cacheSavings"] == float(micro(savings_of(mine) * Decimal("1.05")))
    assert body["totals"]["cacheSavings"] == float(micro(savings_of(records) * Decimal("1.05")))
    assert body["totals"]["cacheWriteTokens"] == sum(r.cacheWriteTokens for r in records)
    # tenant-b's answer has none of tenant-a's records or sessions
    other = (await get(world, "tenant-b", "/v1/usage")).json()
    assert {r["tenantId"] for r in other["records"]} == {"tenant-b"}
    assert not set(s["sessionId"] for s in other["sessions"]) & set(sessions)


# -- what the reply cache saved ---------------------------------------------------------------------
DESK = "anthropic/claude-haiku-4-5"


async def play_reply_cache_hits(world) -> tuple[Any, list[Any]]:
    """Three end users of tenant-a ask an image of one config the same first question: the first
    turn calls the model and fills the cache, the other two are hits. The paid record and the hits."""
    client = await world.connect(world.tokens["tenant-a"])
    config = {
        "name": "Desk",
        "model": DESK,
        "systemPrompt": "Shop questions.",
        "replyCache": {"enabled": True},
    }
    world.rt.clock.ms = DAY + 10 * HOUR_MS
    world.model.add("We open at nine and close at five.")
    for user in ("user-alice", "user-bob", "user-carol"):
        image = (await client.request("image_create", containerId=user, config=config))["record"]
        await client.request("message_send", imageId=image["imageId"], content="Opening hours?")
        await world.run_turns()
    assert len(world.model.requests) == 1
    records = await records_of(world, "tenant-a")
    [paid] = [r for r in records if r.kind == "turn"]
    hits = [r for r in records if r.kind == "reply_cache"]
    assert len(hits) == 2 and all(h.savedInputTokens == paid.inputTokens > 0 for h in hits)
    assert all(h.savedOutputTokens == paid.outputTokens > 0 for h in hits)
    return paid, hits


def reply_cache_charge(records) -> Decimal:
    """What the hits saved at the charged prices: saved tokens at the list input and output prices x 1.05."""
    total = Decimal(0)
    for r in records:
        p_in, p_out, _, _ = (Decimal(str(v)) for v in LIST[r.model])
        total += r.savedInputTokens * p_in + r.savedOutputTokens * p_out
    return total / 1_000_000 * Decimal("1.05")


async def test_what_the_reply_cache_saved_is_summed_priced_and_exported(world):
    paid, hits = await play_reply_cache_hits(world)
    saved_in, saved_out = 2 * paid.inputTokens, 2 * paid.outputTokens

    r = await get(world, "tenant-a", "/v1/usage/summary", groupBy="kind", **{"from": FROM, "to": TO})
    assert r.status_code == 200, r.text
    body = r.json()
    rows = {row["kind"]: row for row in body["rows"]}
    hit_row, turn_row = rows["reply_cache"], rows["turn"]
    assert (hit_row["records"], hit_row["turns"], hit_row["inputTokens"], hit_row["charge"]) == (2, 2, 0, 0)
    assert (hit_row["savedInputTokens"], hit_row["savedOutputTokens"]) == (saved_in, saved_out)
    assert hit_row["replyCacheSavings"] == float(micro(reply_cache_charge(hits))) > 0
    assert (turn_row["savedInputTokens"], turn_row["replyCacheSavings"]) == (0, 0)
    totals = body["totals"]
    assert (totals["turns"], totals["savedInputTokens"], totals["savedOutputTokens"]) == (
        3,
        saved_in,
        saved_out,
    )
    assert totals["replyCacheSavings"] == hit_row["replyCacheSavings"]
    # two hits saved twice what the paid turn was charged
    assert abs(Decimal(str(totals["replyCacheSavings"])) - 2 * Decimal(str(turn_row["charge"]))) <= Decimal(
        "0.000002"
    )

    r = await get(world, "tenant-a", "/v1/usage/summary", groupBy="container", **{"from": FROM, "to": TO})
    by_user = {row["containerId"]: row["savedInputTokens"] for row in r.json()["rows"]}
    assert by_user == {"user-alice": 0, "user-bob": paid.inputTokens, "user-carol": paid.inputTokens}

    r = await export(world, "tenant-a", groupBy="kind", **{"from": FROM, "to": TO})
    lines = {line["kind"]: line for line in csv.DictReader(io.StringIO(r.text))}
    assert list(lines["reply_cache"])[-4:] == [
        "currency",
        "savedInputTokens",
        "savedOutputTokens",
        "replyCacheSavings",
    ]
    assert lines["reply_cache"]["replyCacheSavings"] == micro(reply_cache_charge(hits))
    assert (lines["reply_cache"]["savedInputTokens"], lines["turn"]["replyCacheSavings"]) == (
        str(saved_in),
        "0.000000",
    )

    r = await get(world, "tenant-a", "/v1/usage")
    usage = r.json()
    priced = {rec["turnId"]: rec for rec in usage["records"]}
    assert priced[paid.turnId]["replyCacheSavings"] == 0
    for hit in hits:
        assert priced[hit.turnId]["savedInputTokens"] == paid.inputTokens
        assert priced[hit.turnId]["replyCacheSavings"] == float(micro(reply_cache_charge([hit])))
    sessions = {s["sessionId"]: s for s in usage["sessions"]}
    assert sessions[paid.sessionId]["savedInputTokens"] == 0
    assert [sessions[h.sessionId]["savedOutputTokens"] for h in hits] == [paid.outputTokens] * 2
    assert usage["totals"]["turns"] == 3
    assert (usage["totals"]["savedInputTokens"], usage["totals"]["savedOutputTokens"]) == (
        saved_in,
        saved_out,
    )
    assert usage["totals"]["replyCacheSavings"] == totals["replyCacheSavings"]
