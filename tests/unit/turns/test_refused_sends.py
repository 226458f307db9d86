"""A refused ``message_send`` leaves no live turn without a job, on every refusal path (issue 25,
item 4), and a turn left without one (a crash between writes, a withdrawal that failed too) is
ended by the sweeper, by an interrupt or by the next ``session_busy`` check.

Each case refuses one send on a session whose policy is ``concurrency: "reject"``; afterwards the
tenant has no running mark and no queued job, every turn record of the session is ended, and the
next message is accepted and answered (on the old code a refusal after the message was stored left
a ``queued`` record with no job: ``session_busy`` for ever).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from agentvm.errors import StorageUnavailable
from agentvm.records import TERMINAL, turn_id_for
from agentvm.turns import orphans as orphan_turns
from tests.security_harness import ManualClock, keyed_client, new_key, secure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


def _broken(*_: Any, **__: Any) -> Any:
    raise StorageUnavailable("storage could not be written (injected)")


async def _broken_async(*_: Any, **__: Any) -> Any:
    _broken()


@dataclass(frozen=True)
class Refusal:
    code: str
    arrange: Callable[[Any, Any, dict[str, Any], pytest.MonkeyPatch], Awaitable[dict[str, Any]]]


async def _plain(harness, c, img, mp) -> dict[str, Any]:
    return {"imageId": img["imageId"]}


async def _no_target(harness, c, img, mp) -> dict[str, Any]:
    return {}


async def _unknown_image(harness, c, img, mp) -> dict[str, Any]:
    return {"imageId": "img_nope"}


async def _over_budget(harness, c, img, mp) -> dict[str, Any]:
    await harness.rt.budgets.set("tenant-a", None, daily_tokens=None, monthly_tokens=1)
    await harness.rt.budgets.record("tenant-a", "u", 1)
    return {"imageId": img["imageId"]}


async def _storage_quota(harness, c, img, mp) -> dict[str, Any]:
    harness.rt.storage_quota.limit_bytes = 10
    return {"imageId": img["imageId"]}


async def _disk_full(harness, c, img, mp) -> dict[str, Any]:
    mp.setattr(harness.store, "append_message", _broken_async)
    return {"imageId": img["imageId"]}


async def _quota_reserve_fails(harness, c, img, mp) -> dict[str, Any]:
    mp.setattr(harness.rt.storage_quota, "reserve", _broken_async)
    return {"imageId": img["imageId"]}


async def _mark_fails(harness, c, img, mp) -> dict[str, Any]:
    mp.setattr(harness.rt.running, "mark", _broken_async)
    return {"imageId": img["imageId"]}


async def _record_fails(harness, c, img, mp) -> dict[str, Any]:
    mp.setattr(harness.store, "put_turn", _broken_async)
    return {"imageId": img["imageId"]}


async def _enqueue_fails(harness, c, img, mp) -> dict[str, Any]:
    mp.setattr(harness.queue, "enqueue", _broken_async)
    return {"imageId": img["imageId"]}


REFUSALS: dict[str, Refusal] = {
    "bad-input": Refusal("bad_request", _no_target),
    "unknown-image": Refusal("not_found", _unknown_image),
    "budget-exceeded": Refusal("quota_exceeded", _over_budget),
    "storage-quota": Refusal("storage_quota_exceeded", _storage_quota),
    "storage-unavailable-message": Refusal("storage_unavailable", _disk_full),
    "storage-unavailable-quota-reserve": Refusal("storage_unavailable", _quota_reserve_fails),
    "storage-unavailable-running-mark": Refusal("storage_unavailable", _mark_fails),
    "storage-unavailable-turn-record": Refusal("storage_unavailable", _record_fails),
    "queue-send-fails": Refusal("storage_unavailable", _enqueue_fails),
}


async def _reject_image(harness):
    c = await harness.client("tenant-a")
    img = (await c.request("image_create", containerId="u", config={"name": "A", "concurrency": "reject"}))[
        "record"
    ]
    await c.subscribe(img["sessionId"])
    return c, img


async def _live_turns(harness, session_id: str) -> list[str]:
    """Turn records of the session's user messages that are not ended."""
    live = []
    for m in await harness.store.list_messages(session_id):
        if m.role == "user":
            turn = await harness.store.get_turn(turn_id_for(m.id))
            if turn is not None and turn.status not in TERMINAL:
                live.append(turn.turnId)
    return live


async def _assert_nothing_live_and_usable(harness, c, img) -> None:
    assert harness.queue.pending() == []
    assert await harness.rt.running.running("tenant-a") == []
    assert await _live_turns(harness, img["sessionId"]) == []
    harness.model.add("answered")
    accepted = await c.request("message_send", imageId=img["imageId"], content="next")
    assert "code" not in accepted, accepted  # not session_busy
    await harness.run_turns()
    history = await c.request("image_messages", imageId=img["imageId"])
    assert history["messages"][-1]["subtype"] == "assistant"
    assert history["messages"][-1]["content"][0]["text"] == "answered"


@pytest.mark.parametrize("name", list(REFUSALS))
async def test_a_refused_send_leaves_no_live_turn_and_the_session_takes_the_next(harness, name, monkeypatch):
    clock = ManualClock()
    harness.rt.clock = clock
    secure(harness, clock, storage_bytes=1_000_000)
    c, img = await _reject_image(harness)
    refusal = REFUSALS[name]
    with monkeypatch.context() as mp:
        target = await refusal.arrange(harness, c, img, mp)
        refused = await c.request("message_send", content="hello", **target)
    assert refused.get("code") == refusal.code, refused
    if name in ("budget-exceeded", "storage-quota"):
        await harness.rt.budgets.set("tenant-a", None, daily_tokens=None, monthly_tokens=None)
        harness.rt.storage_quota.limit_bytes = 1_000_000
    if name == "storage-unavailable-turn-record":  # the withdrawal could not be written either: the
        # mark stays for the sweeper, which removes it past the grace (the record never landed)
        assert len(await harness.rt.running.running("tenant-a")) == 1
        clock.advance(orphan_turns.GRACE_MS / 1000)
        assert await orphan_turns.sweep_orphans(harness.rt) == 1
    await _assert_nothing_live_and_usable(harness, c, img)


async def test_a_rate_limited_send_leaves_no_live_turn(harness):
    secure(harness, rate_limit_per_minute=1)
    c, img = await _reject_image(harness)
    limited = await keyed_client(harness, await new_key(harness.rt, "tenant-a"))
    await limited.request("container_list")  # the key's one request this minute
    refused = await limited.request("message_send", imageId=img["imageId"], content="hello")
    assert refused["code"] == "rate_limited"
    await _assert_nothing_live_and_usable(harness, c, img)


async def test_a_refused_send_behind_a_live_turn_is_session_busy_and_the_live_turn_runs(harness):
    c, img = await _reject_image(harness)
    first = await c.request("message_send", imageId=img["imageId"], content="one")
    busy = await c.request("message_send", imageId=img["imageId"], content="two")
    assert busy["code"] == "session_busy"
    assert await _live_turns(harness, img["sessionId"]) == [first["turnId"]]
    harness.model.add("first")
    await harness.run_turns()
    await _assert_nothing_live_and_usable(harness, c, img)


async def test_a_retry_of_a_withdrawn_send_queues_its_turn(harness, monkeypatch):
    c, img = await _reject_image(harness)

    def send(frame_id: str) -> str:  # the same requestId each time: a retry
        data = {"requestId": "r-1", "imageId": img["imageId"], "content": "hi"}
        return json.dumps({"type": "message_send_request", "id": frame_id, "timestamp": 0, "data": data})

    def response(frames):
        return next(f["data"] for f in frames if f["type"] == "message_send_response")

    with monkeypatch.context() as mp:
        mp.setattr(harness.queue, "enqueue", _broken_async)
        assert response(await c.send_raw(send("x")))["code"] == "storage_unavailable"
    harness.model.add("hello back")
    assert "code" not in response(await c.send_raw(send("y")))
    await harness.run_turns()
    history = await c.request("image_messages", imageId=img["imageId"])
    assert [m["subtype"] for m in history["messages"]] == ["user", "assistant"]


async def _orphan(harness, monkeypatch):
    """A send whose enqueue fails and whose withdrawal fails too: a queued record with no job."""
    clock = ManualClock()
    harness.rt.clock = clock
    c, img = await _reject_image(harness)
    put_turn = harness.store.put_turn

    async def only_queued(turn):  # the full disk lets the queued record in, not its withdrawal
        if turn.status != "queued":
            _broken()
        await put_turn(turn)

    with monkeypatch.context() as mp:
        mp.setattr(harness.queue, "enqueue", _broken_async)
        mp.setattr(harness.store, "put_turn", only_queued)
        refused = await c.request("message_send", imageId=img["imageId"], content="hi")
    assert refused["code"] == "storage_unavailable"
    assert len(await _live_turns(harness, img["sessionId"])) == 1
    return c, img, clock


async def test_the_sweeper_ends_a_turn_left_without_a_job(harness, monkeypatch):
    c, img, clock = await _orphan(harness, monkeypatch)
    assert await orphan_turns.sweep_orphans(harness.rt) == 0  # within the grace: a send may be enqueuing
    clock.advance(orphan_turns.GRACE_MS / 1000)
    assert await orphan_turns.sweep_orphans(harness.rt) == 1
    assert await orphan_turns.sweep_orphans(harness.rt) == 0
    await _assert_nothing_live_and_usable(harness, c, img)


async def test_an_interrupt_ends_a_turn_left_without_a_job(harness, monkeypatch):
    c, img, _ = await _orphan(harness, monkeypatch)
    assert "code" not in await c.request("agent_interrupt", imageId=img["imageId"])
    (turn_id,) = [
        turn_id_for(m.id) for m in await harness.store.list_messages(img["sessionId"]) if m.role == "user"
    ]
    assert (await harness.store.get_turn(turn_id)).status == "interrupted"
    await _assert_nothing_live_and_usable(harness, c, img)


async def test_the_busy_check_ends_a_turn_left_without_a_job_past_the_bound(harness, monkeypatch):
    c, img, clock = await _orphan(harness, monkeypatch)
    busy = await c.request("message_send", imageId=img["imageId"], content="again")
    assert busy["code"] == "session_busy"  # it may still be enqueuing: within the grace
    clock.advance(orphan_turns.GRACE_MS / 1000)
    harness.model.add("answered")
    assert "code" not in await c.request("message_send", imageId=img["imageId"], content="again")
    await harness.run_turns()
    assert await harness.rt.running.running("tenant-a") == []
    assert await _live_turns(harness, img["sessionId"]) == []
    history = await c.request("image_messages", imageId=img["imageId"])
    assert history["messages"][-1]["content"][0]["text"] == "answered"


async def test_a_live_turn_with_its_job_is_never_taken_for_an_orphan(harness):
    clock = ManualClock()
    harness.rt.clock = clock
    c, img = await _reject_image(harness)
    await c.request("message_send", imageId=img["imageId"], content="one")
    clock.advance(3600)
    assert await orphan_turns.sweep_orphans(harness.rt) == 0
    assert (await c.request("message_send", imageId=img["imageId"], content="two"))["code"] == "session_busy"
