"""Schedules on the AWS host (docs/schedules.md), through the real handlers on moto: a schedule made
over the HTTP API (Mangum), the schedule sweeper (``functions/schedule_sweeper``) run as
EventBridge Scheduler runs it, each invocation in a runtime of its own (``aws_runtime``, as each
Lambda builds it), the turns it sends taken from SQS by the turn worker. The clock is the test's,
so a tick comes when the test says."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agentvm.hosts.aws import run_sync
from agentvm.records import ScheduleRun
from agentvm.turns.schedules import CLAIM_STALE_MS, fire_due
from functions.schedule_sweeper import app as schedule_sweeper
from tests.functions.aws_stack import Stack, load_event, moto_resources
from tests.security_harness import ManualClock

pytestmark = pytest.mark.aws

TENANT = "acme"


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def stack(monkeypatch, context, push):
    with moto_resources(monkeypatch) as resources:
        yield Stack(resources, context, push, clock=ManualClock(ms("2026-01-15T09:59:30")))


@pytest.fixture
def token(stack) -> str:
    return stack.new_key(TENANT, "admin")


def sweep(stack: Stack) -> int:
    """One invocation of the sweeper, in a new execution environment (its own runtime)."""
    handler = stack.function(schedule_sweeper)
    return handler(load_event("scheduler-schedule-sweep.json"), stack.context)["runs"]


def queued(stack: Stack) -> int:
    attributes = stack.resources.sqs.get_queue_attributes(
        QueueUrl=stack.resources.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def image(stack: Stack, token: str, container: str = "user-alice") -> dict[str, Any]:
    status, made = stack.http("POST", f"/v1/containers/{container}/sessions", token, {"name": "Daily"})
    assert status == 201, made
    return made


def schedule(stack: Stack, token: str, image_id: str, **fields: Any) -> dict[str, Any]:
    body = {"imageId": image_id, "cron": "0 * * * *", "message": "good morning", **fields}
    status, made = stack.http("POST", "/v1/schedules", token, body)
    assert status == 201, made
    return made["schedule"]


def runs(stack: Stack, token: str, schedule_id: str) -> list[dict[str, Any]]:
    status, answer = stack.http("GET", f"/v1/schedules/{schedule_id}/runs", token)
    assert status == 200, answer
    return answer["runs"]


def user_messages(stack: Stack, session_id: str) -> list[str]:
    store = stack.runtimes["http_api"].store
    return [m.content for m in run_sync(store.list_messages(session_id)) if m.role == "user"]  # type: ignore[union-attr]


def test_a_schedule_made_over_http_sends_each_tick_once_however_often_the_sweeper_runs(stack, token):
    img = image(stack, token)
    made = schedule(stack, token, img["imageId"])
    assert made["nextAt"] == ms("2026-01-15T10:00:00")
    assert sweep(stack) == 0  # not due yet
    assert queued(stack) == 0

    stack.clock.ms = ms("2026-01-15T10:00:05")
    assert sweep(stack) == 1
    assert sweep(stack) == 0  # EventBridge Scheduler delivers at least once: a retry sends nothing
    assert queued(stack) == 1  # one turn job on the turn queue, for the worker
    stack.model.add("Morning summary.")
    stack.run_turns()
    assert user_messages(stack, img["sessionId"]) == ["good morning"]
    [run] = runs(stack, token, made["scheduleId"])
    assert (run["tickAt"], run["status"], run["sessionId"]) == (
        ms("2026-01-15T10:00:00"),
        "sent",
        img["sessionId"],
    )
    turn = run_sync(stack.runtimes["http_api"].store.get_turn(run["turnId"]))
    assert turn is not None and turn.status == "completed"

    # A sweeper that claimed the tick and died before moving nextAt on: the schedule is due again
    # for the same tick, and the next invocation (another execution environment) sends nothing.
    schedules = stack.runtimes["http_api"].schedules
    assert schedules is not None
    current = run_sync(schedules.get_schedule(TENANT, made["scheduleId"]))
    assert current is not None and current.nextAt == ms("2026-01-15T11:00:00")
    run_sync(schedules.put_schedule(current.model_copy(update={"nextAt": ms("2026-01-15T10:00:00")})))
    assert sweep(stack) == 0
    assert queued(stack) == 0

    # Missed ticks (11:00, 12:00, 13:00 while nothing ran): the latest runs, once.
    stack.clock.ms = ms("2026-01-15T13:20:00")
    assert sweep(stack) == 1
    assert sweep(stack) == 0
    stack.run_turns()
    assert [r["tickAt"] for r in runs(stack, token, made["scheduleId"])] == [
        ms("2026-01-15T13:00:00"),
        ms("2026-01-15T10:00:00"),
    ]
    assert user_messages(stack, img["sessionId"]) == ["good morning", "good morning"]
    assert len(stack.model.requests) == 2


def test_sweepers_running_at_once_send_each_due_tick_once(stack, token):
    sessions = []
    for n in range(6):
        img = image(stack, token, f"user-{n}")
        schedule(stack, token, img["imageId"], cron="*/15 * * * *")
        sessions.append(img["sessionId"])
    stack.clock.ms = ms("2026-01-15T10:00:02")
    # four invocations of the same minute, interleaved on one loop (each DynamoDB call in a thread)
    runtimes = []
    for _ in range(4):
        stack.function(schedule_sweeper)
        runtimes.append(stack.runtimes["schedule_sweeper"])

    async def race() -> list[int]:
        return list(await asyncio.gather(*(fire_due(rt) for rt in runtimes)))

    assert sum(run_sync(race())) == 6
    assert sweep(stack) == 0
    assert queued(stack) == 6
    stack.run_turns()
    assert [user_messages(stack, s) for s in sessions] == [["good morning"]] * 6


def test_a_claim_whose_sweeper_died_is_sent_once_by_a_later_run(stack, token):
    img = image(stack, token)
    made = schedule(stack, token, img["imageId"])
    stack.clock.ms = ms("2026-01-15T10:00:05")
    schedules = stack.runtimes["http_api"].schedules
    assert schedules is not None
    tick = ms("2026-01-15T10:00:00")
    claim = ScheduleRun(tenantId=TENANT, scheduleId=made["scheduleId"], tickAt=tick, claimedAt=stack.clock.ms)
    assert run_sync(schedules.claim_run(claim))  # claimed; the invocation timed out before sending
    assert sweep(stack) == 0  # the tick is claimed: not sent by the due path; the claim is fresh
    stack.clock.ms += CLAIM_STALE_MS + 1
    assert sweep(stack) == 1
    assert sweep(stack) == 0
    assert queued(stack) == 1
    stack.run_turns()
    assert user_messages(stack, img["sessionId"]) == ["good morning"]
    assert [r["status"] for r in runs(stack, token, made["scheduleId"])] == ["sent"]


@pytest.mark.parametrize("budget", ["tokensPerDay", "tokensPerRun"])
def test_a_schedules_own_budget_stops_its_runs_on_aws(stack, token, budget):
    img = image(stack, token)
    made = schedule(stack, token, img["imageId"], **{budget: 1})
    stack.clock.ms = ms("2026-01-15T10:00:01")
    assert sweep(stack) == 1
    stack.model.add("A reply of several words.")
    stack.run_turns()  # the turn uses more than 1 token
    stack.clock.ms = ms("2026-01-15T11:00:01")
    assert sweep(stack) == 1  # the run is recorded, not sent
    assert queued(stack) == 0
    listed = runs(stack, token, made["scheduleId"])
    assert [r["status"] for r in listed] == ["skipped" if budget == "tokensPerDay" else "failed", "sent"]
    assert listed[1]["tokens"] > 1
    status, current = stack.http("GET", f"/v1/schedules/{made['scheduleId']}", token)
    assert status == 200 and current["schedule"]["paused"] == (budget == "tokensPerRun")
    if budget == "tokensPerRun":
        assert "tokensPerRun" in current["schedule"]["pausedReason"]
        stack.clock.ms = ms("2026-01-15T12:00:01")
        assert sweep(stack) == 0  # paused: nothing is due
    else:  # the next day's ticks go again
        stack.clock.ms = ms("2026-01-16T10:00:01")
        assert sweep(stack) == 1
        assert queued(stack) == 1
    assert user_messages(stack, img["sessionId"]) == ["good morning"] * (1 + (budget == "tokensPerDay"))


def test_a_paused_or_deleted_schedule_sends_nothing_and_a_resumed_one_runs_from_the_next_tick(stack, token):
    img = image(stack, token)
    made = schedule(stack, token, img["imageId"])
    sid = made["scheduleId"]
    assert stack.http("PATCH", f"/v1/schedules/{sid}", token, {"paused": True})[0] == 200
    stack.clock.ms = ms("2026-01-15T10:00:05")
    assert sweep(stack) == 0
    status, resumed = stack.http("PATCH", f"/v1/schedules/{sid}", token, {"paused": False})
    assert status == 200 and resumed["schedule"]["nextAt"] == ms("2026-01-15T11:00:00")  # 10:00 was missed
    assert sweep(stack) == 0
    stack.clock.ms = ms("2026-01-15T11:00:05")
    assert sweep(stack) == 1
    assert stack.http("DELETE", f"/v1/schedules/{sid}", token)[0] == 200
    assert stack.http("GET", f"/v1/schedules/{sid}/runs", token)[0] == 404
    stack.clock.ms = ms("2026-01-15T12:00:05")
    assert sweep(stack) == 0
    assert queued(stack) == 1
    status, listed = stack.http("GET", "/v1/schedules", token)
    assert status == 200 and listed == {"schedules": []}


def test_another_tenants_schedule_answers_like_a_missing_one_on_aws(stack, token):
    other = stack.new_key("other-tenant", "admin")
    img = image(stack, token)
    sid = schedule(stack, token, img["imageId"])["scheduleId"]
    for method, path, body in [
        ("GET", f"/v1/schedules/{sid}", None),
        ("GET", f"/v1/schedules/{sid}/runs", None),
        ("PATCH", f"/v1/schedules/{sid}", {"paused": True}),
        ("DELETE", f"/v1/schedules/{sid}", None),
    ]:
        theirs = stack.http(method, path, other, body)
        missing = stack.http(method, path.replace(sid, "sch_missing_0000"), token, body)
        assert theirs[0] == missing[0] == 404
        assert json.dumps(theirs[1]).replace(sid, "X") == json.dumps(missing[1]).replace(
            "sch_missing_0000", "X"
        )
    made = stack.http(
        "POST", "/v1/schedules", other, {"imageId": img["imageId"], "cron": "* * * * *", "message": "x"}
    )
    assert made[0] == 404
    assert stack.http("GET", "/v1/schedules", other) == (200, {"schedules": []})
    stack.clock.ms = ms("2026-01-15T10:00:05")
    assert sweep(stack) == 1  # the owner's schedule is untouched and still fires


def test_a_new_session_per_run_on_aws(stack, token):
    img = image(stack, token)
    schedule(stack, token, img["imageId"], sessionPolicy="new")
    for hour in ("10", "11"):
        stack.clock.ms = ms(f"2026-01-15T{hour}:00:01")
        assert sweep(stack) == 1
        assert sweep(stack) == 0
    stack.run_turns()
    store = stack.runtimes["http_api"].store
    made = [i for i in run_sync(store.list_images(TENANT, "user-alice")) if i.imageId != img["imageId"]]
    assert len(made) == 2 and all(i.name == "Daily" for i in made)
    assert [user_messages(stack, i.sessionId) for i in made] == [["good morning"], ["good morning"]]
    assert user_messages(stack, img["sessionId"]) == []
