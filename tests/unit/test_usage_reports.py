"""``/v1/usage/summary`` on both hosts (local SQLite, and the AWS runtime on moto): a scripted day of
real turns for two tenants and three end users, then the summary by every grouping and period
equals the sums of the usage records the store holds; tenants see their own usage only, platform
admins everyone's; bad queries get stable error codes."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tool_sources import ToolSources
from agentvm.api.app import create_app
from agentvm.observability.periods import DAY_MS, HOUR_MS
from agentvm.observability.usage import COLUMNS, DIMENSIONS, UsageQuery
from tests.contract.test_usage_rollups_contract import expected
from tests.security_harness import ManualClock, new_key
from tests.unit.test_tenant_attacks import RUNTIME_FACTORIES

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
