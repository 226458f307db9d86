"""Token budgets: refused before a turn, cut during one, counted after each; UTC day and month windows."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from agentvm.adapters.llm.scripted import ScriptedModelClient
from agentvm.errors import QuotaExceeded
from agentvm.llm import ChatTurn, ModelRequest, ModelStop, TextDelta
from agentvm.records import UsageRecord
from agentvm.security.budgets import BudgetedModelClient, Limit, Windows, usage_key
from tests.security_harness import ManualClock, secure

TEN_WORDS = "one two three four five six seven eight nine ten"


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def clock():
    return ManualClock(ms(2026, 1, 15, 12, 0))


@pytest.fixture
def budgets(harness, clock):
    return secure(harness, clock).budgets


async def _image(harness, container="c1"):
    c = await harness.client("tenant-a")
    img = (await c.request("image_create", containerId=container, config={"name": "A"}))["record"]
    return c, img


def test_windows_are_utc_days_and_calendar_months():
    w = Windows.at(ms(2026, 12, 31, 23, 59))
    assert (w.month, w.day_field) == ("2026-12", "d31")
    assert w.day_reset_ms == ms(2027, 1, 1) == w.month_reset_ms
    w = Windows.at(ms(2026, 2, 3, 0, 0))
    assert (w.month, w.day_field, w.day_reset_ms, w.month_reset_ms) == (
        "2026-02",
        "d03",
        ms(2026, 2, 4),
        ms(2026, 3, 1),
    )
    assert usage_key("2026-02", "acme") != usage_key("2026-02", "acme", "")


async def test_message_send_over_budget_is_refused_with_limit_and_reset_and_stores_nothing(harness, budgets):
    c, img = await _image(harness)
    await budgets.set("tenant-a", None, daily_tokens=None, monthly_tokens=100)
    await budgets.record("tenant-a", "other-container", 100)  # the tenant's budget spans containers
    refused = await c.request("message_send", imageId=img["imageId"], content="hi")
    assert refused["code"] == "quota_exceeded"
    assert refused["limit"] == 100 and refused["resetAt"] == ms(2026, 2, 1)
    assert (
        "monthly token budget of 100 tokens" in refused["error"]
        and "2026-02-01T00:00:00Z" in refused["error"]
    )
    error = [f for f in c.frames if f["type"] == "system_error"][-1]["data"]
    assert error["details"] == {"code": "quota_exceeded", "limit": 100, "resetAt": ms(2026, 2, 1)}
    assert (await c.request("image_messages", imageId=img["imageId"]))["messages"] == []
    assert (await c.request("image_get", imageId=img["imageId"]))["record"]["online"] is False
    await harness.run_turns()
    assert harness.model.requests == []


async def test_a_container_budget_limits_only_that_container(harness, budgets):
    c, img = await _image(harness, "c1")
    _, other = await _image(harness, "c2")
    await budgets.set("tenant-a", "c1", daily_tokens=10, monthly_tokens=None)
    await budgets.record("tenant-a", "c1", 10)
    assert (await c.request("message_send", imageId=img["imageId"], content="hi"))["code"] == "quota_exceeded"
    assert "code" not in await c.request("message_send", imageId=other["imageId"], content="hi")


async def test_the_stream_is_cut_when_the_budget_is_crossed_and_the_partial_reply_is_kept(harness, budgets):
    c, img = await _image(harness)
    await budgets.set("tenant-a", "c1", daily_tokens=5, monthly_tokens=None)
    harness.model.add(TEN_WORDS)
    await c.request("message_send", imageId=img["imageId"], content="hi")
    await harness.run_turns()

    events = c.session_events()
    assert [e["type"] for e in events][-3:] == ["assistant_message", "error_message", "error_occurred"]
    streamed = "".join(e["data"]["text"] for e in events if e["type"] == "text_delta")
    assert streamed == "one two three four five six"  # the crossing delta is delivered, then the cut
    assert (
        events[-1]["data"]["code"] == "quota_exceeded"
        and "daily token budget of 5" in events[-1]["data"]["message"]
    )
    assert harness.model.closed_early == 1  # the provider stream was closed
    history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant", "error"]
    assert history[1]["content"] == [{"type": "text", "text": streamed}]
    assert history[2]["errorCode"] == "quota_exceeded"
    [usage] = await harness.store.list_usage("tenant-a")
    assert (usage.outputTokens, usage.status) == (6, "failed")  # the tokens actually received
    # the provider never reported usage: the input is estimated (chars/4 of "hi") and billed too
    assert (usage.inputTokens, usage.estimated) == (1, True)
    assert (await budgets.usage("tenant-a", "c1"))["day"] == 7
    # and the next message is refused up front
    assert (await c.request("message_send", imageId=img["imageId"], content="more"))[
        "code"
    ] == "quota_exceeded"


async def test_a_queued_turn_finding_the_budget_used_up_never_calls_the_model(harness, budgets):
    c, img = await _image(harness)
    await budgets.set("tenant-a", None, daily_tokens=8, monthly_tokens=None)
    harness.model.add(TEN_WORDS, "never sent")
    await c.request("message_send", imageId=img["imageId"], content="first")
    await c.request("message_send", imageId=img["imageId"], content="second")  # accepted: budget not used yet
    await harness.run_turns()
    assert len(harness.model.requests) == 1
    types = [e["type"] for e in c.session_events()]
    assert types[-2:] == ["error_message", "error_occurred"] and types.count("assistant_message") == 1
    history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "user", "assistant", "error", "error"]
    assert [m.get("errorCode") for m in history[3:]] == ["quota_exceeded", "quota_exceeded"]


async def test_each_turn_adds_its_tokens_to_the_day_and_month_of_the_budgeted_tenant_and_container(
    harness, budgets
):
    c, img = await _image(harness)
    await budgets.set("tenant-a", None, daily_tokens=None, monthly_tokens=1000)
    await budgets.set("tenant-a", "c1", daily_tokens=500, monthly_tokens=None)
    harness.model.add("a b c")
    await c.request("message_send", imageId=img["imageId"], content="four words right here")
    await harness.run_turns()
    [usage] = await harness.store.list_usage("tenant-a")
    total = usage.inputTokens + usage.outputTokens
    assert (usage.inputTokens, usage.outputTokens) == (4, 3)
    for container in (None, "c1"):
        u = await budgets.usage("tenant-a", container)
        assert (u["day"], u["month"]) == (total, total)
    assert (await budgets.usage("tenant-a", "c2"))["month"] == 0
    assert (await budgets.usage("tenant-b"))["month"] == 0


class CountingCounters:
    """The real counters, with the keys each ``incr`` wrote (a write unit each on AWS)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.written: list[str] = []

    async def incr(self, key, amounts, *, expires_at):
        self.written.append(key)
        return await self.inner.incr(key, amounts, expires_at=expires_at)

    async def get(self, key):
        return await self.inner.get(key)


async def test_turns_without_budgets_write_no_counters_and_only_budgeted_scopes_are_written(harness, budgets):
    counting = budgets._counters = CountingCounters(budgets._counters)
    c, img = await _image(harness)
    harness.model.add("a b c", "d e", "f")
    await c.request("message_send", imageId=img["imageId"], content="hi")
    await harness.run_turns()
    assert counting.written == []  # no budget: no counter writes

    await budgets.set("tenant-a", "c1", daily_tokens=None, monthly_tokens=1000)
    await c.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    assert counting.written == [usage_key("2026-01", "tenant-a", "c1")]  # the container's only

    counting.written.clear()
    await budgets.set("tenant-a", None, daily_tokens=10_000, monthly_tokens=None)
    counting.written.clear()  # (its seeding)
    await c.request("message_send", imageId=img["imageId"], content="more")
    await harness.run_turns()
    assert sorted(counting.written) == [
        usage_key("2026-01", "tenant-a"),
        usage_key("2026-01", "tenant-a", "c1"),
    ]


_turn_ids = itertools.count(1)


def _usage(at_ms: int, tokens: int, container: str = "c1", tenant: str = "tenant-a") -> UsageRecord:
    return UsageRecord(
        turnId=f"turn-{next(_turn_ids)}",
        tenantId=tenant,
        containerId=container,
        imageId="img",
        sessionId="sess",
        model="scripted/test",
        inputTokens=tokens - tokens // 3,
        outputTokens=tokens // 3,
        createdAt=at_ms,
    )


async def test_a_budget_set_mid_month_is_seeded_with_the_usage_so_far_and_enforced(harness, budgets, clock):
    for record in (
        _usage(ms(2025, 12, 31, 23, 59), 1000),  # last month: not counted
        _usage(ms(2026, 1, 3, 8, 0), 100),
        _usage(ms(2026, 1, 15, 0, 0), 30),  # today
        _usage(ms(2026, 1, 15, 11, 59), 6, container="c2"),
        _usage(ms(2026, 1, 15, 11, 0), 500, tenant="tenant-b"),
    ):
        assert await harness.store.put_usage(record)
    # without a budget, the views show the usage from the sums
    assert (await budgets.usage("tenant-a"))["month"] == 136
    assert (await budgets.usage("tenant-a", "c2"))["day"] == 6

    await budgets.set("tenant-a", None, daily_tokens=40, monthly_tokens=None)
    await budgets.set("tenant-a", "c1", daily_tokens=None, monthly_tokens=140)
    tenant, c1 = await budgets.usage("tenant-a"), await budgets.usage("tenant-a", "c1")
    assert (tenant["day"], tenant["month"]) == (36, 136)
    assert (c1["day"], c1["month"]) == (30, 130)
    binding = await budgets.allowance("tenant-a", "c1")
    assert (binding.scope, binding.window, binding.remaining) == ("tenant", "day", 4)

    # enforced as before: the counters go on from there
    await budgets.record("tenant-a", "c1", 4)
    c, img = await _image(harness)
    assert (await c.request("message_send", imageId=img["imageId"], content="x"))["code"] == "quota_exceeded"

    # a budget removed and set again later this month is seeded again, not counted twice
    await budgets.set("tenant-a", "c1", daily_tokens=None, monthly_tokens=None)
    assert await harness.store.put_usage(_usage(ms(2026, 1, 15, 11, 30), 9))
    await budgets.set("tenant-a", "c1", daily_tokens=None, monthly_tokens=500)
    assert (await budgets.usage("tenant-a", "c1"))["month"] == 130 + 9
    # changing a budget that exists keeps its counters
    await budgets.record("tenant-a", "c1", 1)
    await budgets.set("tenant-a", "c1", daily_tokens=1000, monthly_tokens=500)
    assert (await budgets.usage("tenant-a", "c1"))["month"] == 140


async def test_a_new_utc_day_restores_the_daily_budget_but_not_the_monthly(harness, budgets, clock):
    c, img = await _image(harness)
    await budgets.set("tenant-a", None, daily_tokens=10, monthly_tokens=15)
    await budgets.record("tenant-a", "c1", 10)
    assert (await c.request("message_send", imageId=img["imageId"], content="x"))["code"] == "quota_exceeded"
    clock.advance(12 * 3600)  # 00:00 UTC the next day
    assert "code" not in await c.request("message_send", imageId=img["imageId"], content="x")
    await budgets.record("tenant-a", "c1", 5)
    refused = await c.request("message_send", imageId=img["imageId"], content="y")
    assert refused["code"] == "quota_exceeded" and refused["resetAt"] == ms(2026, 2, 1)


async def test_the_binding_limit_is_the_one_with_the_least_left(budgets):
    await budgets.set("t", None, daily_tokens=100, monthly_tokens=1000)
    await budgets.set("t", "c", daily_tokens=None, monthly_tokens=30)
    await budgets.record("t", "c", 20)
    binding = await budgets.allowance("t", "c")
    assert (binding.scope, binding.window, binding.remaining) == ("container", "month", 10)
    assert await budgets.allowance("t", "unbudgeted") == Limit("tenant", "day", 100, 20, ms(2026, 1, 16))


async def test_a_reply_exactly_at_the_allowance_completes_normally():
    inner = ScriptedModelClient(["a b c"])
    limit = Limit("tenant", "day", 3, 0, 0)
    request = ModelRequest(model="m", messages=(ChatTurn("user", "hi"),))
    events = [e async for e in BudgetedModelClient(inner, limit).stream(request)]
    assert [type(e) for e in events][-1] is ModelStop
    assert sum(isinstance(e, TextDelta) for e in events) == 3 and inner.closed_early == 0
    with pytest.raises(QuotaExceeded):
        [e async for e in BudgetedModelClient(inner, Limit("tenant", "day", 3, 3, 0)).stream(request)]
    assert len(inner.requests) == 1  # refused before the provider was called


async def test_a_budget_used_up_by_a_tool_step_stops_the_next_model_call(harness, budgets):
    from agentvm.adapters.llm.scripted import Calls
    from tests.tools import FakeTool, FixedToolSources

    tool = FakeTool("get_weather")
    harness.rt.tools = FixedToolSources(tool)
    c = await harness.client("tenant-a")
    config = {"name": "A", "tools": [{"type": "builtin", "name": "calculator"}]}
    img = (await c.request("image_create", containerId="c1", config=config))["record"]
    # the first model call bills 1 input + 6 output tokens: past the budget of 6
    await budgets.set("tenant-a", "c1", daily_tokens=6, monthly_tokens=None)
    harness.model.add(Calls(("get_weather", {"city": "Paris"}), text="one two three four five"), "never")
    await c.request("message_send", imageId=img["imageId"], content="hi")
    await harness.run_turns()

    assert len(tool.calls) == 1 and len(harness.model.requests) == 1  # the step ran; no second call
    events = c.session_events()
    assert events[-1]["type"] == "error_occurred" and events[-1]["data"]["code"] == "quota_exceeded"
    history = (await c.request("image_messages", imageId=img["imageId"]))["messages"]
    assert [m["subtype"] for m in history] == ["user", "assistant", "tool-call", "tool-result", "error"]
    usage = await harness.store.list_usage("tenant-a")
    assert [(u.kind, u.inputTokens, u.outputTokens) for u in usage] == [("turn", 1, 6)]
