"""Suspended turns on the local wiring (real SQLite, scripted model, the real tool sources):
approval and client-side tools suspend the turn, and each answer continues it exactly once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentvm.adapters.llm.scripted import Calls
from agentvm.agent.tools.sources import ToolSources
from agentvm.streaming.frames import ATTEMPT_SPAN, TURN_SPAN
from agentvm.turns.waits import sweep_waits
from agentvm.turns.worker import process_turn
from tests.crashes import DyingModel
from tests.harness import Harness
from tests.tools import agent_types

CALC = {"type": "builtin", "name": "calculator"}
PICK = {
    "type": "client",
    "name": "pick_file",
    "description": "Ask the user to pick a file",
    "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
}


async def _setup(tmp_path, config: dict[str, Any], tenant: str = "tenant-a"):
    h = Harness(tmp_path)
    h.rt.tools = ToolSources()
    c = await h.client(tenant)
    img = (await c.request("image_create", containerId="u1", config={"name": "A", **config}))["record"]
    return h, c, img


async def _approval_turn(tmp_path, **approval: Any):
    h, c, img = await _setup(tmp_path, {"tools": [CALC], "approval": {"tools": ["calculator"], **approval}})
    h.model.add(Calls(("calculator", {"expression": "6*7"}), text="Let me compute."), "It is 42.")
    await c.request("message_send", imageId=img["imageId"], content="6 times 7?")
    await h.run_turns()
    return h, c, img


def _events(c, type_: str) -> list[dict[str, Any]]:
    return [f["data"] for f in c.session_events() if f["type"] == type_]


async def _messages(c, img) -> list[dict[str, Any]]:
    return (await c.request("image_messages", imageId=img["imageId"]))["messages"]


async def test_a_tool_that_needs_approval_suspends_the_turn_until_it_is_approved(tmp_path):
    h, c, img = await _approval_turn(tmp_path)

    # Suspended: the call is announced and waits; nothing ran, the turn has not ended.
    types = agent_types(c.session_events())
    assert types[-4:] == ["message_stop", "assistant_message", "tool_approval_requested", "turn_suspended"]
    assert "conversation_end" not in types and "tool_result" not in types
    [requested] = _events(c, "tool_approval_requested")
    assert requested["toolName"] == "calculator" and requested["input"] == {"expression": "6*7"}
    turn_id, call_id = requested["turnId"], requested["toolCallId"]
    [suspended] = _events(c, "turn_suspended")
    assert suspended["waitingFor"][0]["kind"] == "approval"
    assert (await h.store.get_turn(turn_id)).status == "suspended"
    assert len(h.model.requests) == 1 and h.queue.pending() == []
    listed = (await c.request("tool_waits", containerId="u1"))["waits"]
    assert [(w["toolCallId"], w["status"], w["kind"]) for w in listed] == [(call_id, "pending", "approval")]

    reply = await c.request("tool_approval", turnId=turn_id, toolCallId=call_id, approved=True)
    assert reply["status"] == "approved"
    await h.run_turns()

    types = agent_types(c.session_events())
    resumed = types[types.index("turn_suspended") + 1 :]
    assert resumed[:4] == ["tool_result", "tool_result_message", "tool_completed", "message_start"]
    assert types[-3:] == ["message_stop", "assistant_message", "conversation_end"]
    assert _events(c, "tool_result")[0]["result"] == "42"
    assert _events(c, "conversation_end")[-1]["reason"] == "completed"
    assert (await h.store.get_turn(turn_id)).status == "completed"
    assert (await c.request("tool_waits", containerId="u1"))["waits"] == []
    # The model saw the approved call's real result.
    last = h.model.requests[-1].messages[-1]
    assert last.tool_results[0].content == "42"
    # Seqs keep growing across the suspension: a resuming client never drops the continuation.
    seqs = [f["seq"] for f in c.turn_frames()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_an_answer_sent_twice_continues_the_turn_once(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    [requested] = _events(c, "tool_approval_requested")
    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
    first, second = await asyncio.gather(
        c.request("tool_approval", approved=True, **ids), c.request("tool_approval", approved=False, **ids)
    )
    outcomes = sorted([first.get("status", "error"), second.get("status", "error")])
    assert outcomes == ["approved", "error"] or outcomes == ["denied", "error"]
    again = await c.request("tool_approval", approved=True, **ids)
    assert again["code"] == "already_answered"
    assert len(h.queue.pending()) == 1  # one continuation
    await h.run_turns()
    assert len(_events(c, "conversation_end")) == 1
    assert len([m for m in await _messages(c, img) if m["subtype"] == "tool-result"]) == 1


async def test_a_denied_call_is_a_result_the_model_reads(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    [requested] = _events(c, "tool_approval_requested")
    await c.request(
        "tool_approval",
        turnId=requested["turnId"],
        toolCallId=requested["toolCallId"],
        approved=False,
        reason="not on a Friday",
    )
    await h.run_turns()
    results = [m for m in await _messages(c, img) if m["subtype"] == "tool-result"]
    output = results[0]["toolResult"]["output"]
    assert output["type"] == "execution-denied" and output["reason"] == "not on a Friday"
    assert h.model.requests[-1].messages[-1].tool_results[0].content == "Execution denied: not on a Friday"
    assert _events(c, "tool_failed")[0]["toolName"] == "calculator"
    assert _events(c, "conversation_end")[-1]["reason"] == "completed"


async def test_a_client_side_tool_gets_the_clients_result(tmp_path):
    h, c, img = await _setup(tmp_path, {"tools": [PICK]})
    h.model.add(Calls(("pick_file", {"title": "Pick a report"})), "You picked report.pdf.")
    await c.request("message_send", imageId=img["imageId"], content="Summarise a report")
    await h.run_turns()
    [requested] = _events(c, "client_tool_requested")
    assert requested["input"] == {"title": "Pick a report"}
    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}

    # Bad input is refused in the protocol's shape and leaves the turn waiting.
    wrong_kind = await c.request("tool_approval", approved=True, **ids)
    assert "tool_result_request" in json.dumps(wrong_kind["error"])
    missing = await c.request("tool_result", **ids)
    assert "output" in json.dumps(missing["error"])
    unknown = await c.request("tool_result", turnId=ids["turnId"], toolCallId="call_nope", output="x")
    assert "call_nope" in json.dumps(unknown["error"])
    assert (await h.store.get_turn(ids["turnId"])).status == "suspended"

    reply = await c.request("tool_result", output={"path": "report.pdf"}, **ids)
    assert reply["status"] == "answered"
    await h.run_turns()
    assert h.model.requests[-1].messages[-1].tool_results[0].content == '{"path": "report.pdf"}'
    assert _events(c, "conversation_end")[-1]["reason"] == "completed"


async def test_another_tenant_cannot_see_or_answer_a_wait(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    [requested] = _events(c, "tool_approval_requested")
    other = await h.client("tenant-b")
    attempt = await other.request(
        "tool_approval", turnId=requested["turnId"], toolCallId=requested["toolCallId"], approved=True
    )
    mine = await c.request("tool_approval", turnId="turn_nope", toolCallId="call_nope", approved=True)
    # Another tenant's call reads exactly like one that does not exist.
    assert attempt["code"] == mine["code"] == "not_found"
    assert (await other.request("tool_waits"))["waits"] == []
    assert h.queue.pending() == []


async def test_an_unanswered_wait_times_out_at_its_deadline_and_the_turn_goes_on(tmp_path):
    h, c, img = await _approval_turn(tmp_path, timeoutS=0.05)
    await asyncio.sleep(0.1)
    assert await sweep_waits(h.rt) == 1
    await h.run_turns()
    [result] = _events(c, "tool_failed")
    assert "no approval within 0.05 s" in result["error"]
    assert _events(c, "conversation_end")[-1]["reason"] == "completed"
    [requested] = _events(c, "tool_approval_requested")
    late = await c.request(
        "tool_approval", turnId=requested["turnId"], toolCallId=requested["toolCallId"], approved=True
    )
    assert late["code"] == "already_answered"


async def test_interrupting_a_suspended_turn_ends_it_as_interrupted(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    await c.request("agent_interrupt", imageId=img["imageId"])
    await h.run_turns()
    assert _events(c, "conversation_end")[-1]["reason"] == "interrupted"
    [result] = [m for m in await _messages(c, img) if m["subtype"] == "tool-result"]
    assert "interrupted" in result["toolResult"]["output"]["value"]
    assert len(h.model.requests) == 1  # the model was not called again
    assert (await c.request("tool_waits"))["waits"] == []


async def test_a_new_message_while_a_turn_is_suspended_is_refused_with_session_busy(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    await c.request("message_send", imageId=img["imageId"], content="hello?")
    await h.run_turns()
    [error] = _events(c, "error_message")
    assert error["errorCode"] == "session_busy" and "suspended" in error["content"]
    # The suspended turn is unharmed and still goes on when approved.
    [requested] = _events(c, "tool_approval_requested")
    await c.request(
        "tool_approval", turnId=requested["turnId"], toolCallId=requested["toolCallId"], approved=True
    )
    await h.run_turns()
    assert _events(c, "tool_result")[0]["result"] == "42"


async def test_the_reject_policy_refuses_at_once_while_a_turn_is_suspended(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    reply = await c.request(
        "message_send", imageId=img["imageId"], content="hi", options={"concurrency": "reject"}
    )
    assert reply["code"] == "session_busy"


async def test_the_interrupt_policy_ends_the_suspended_turn_and_runs_the_new_one(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    h.model.add("Hello again.")
    await c.request(
        "message_send", imageId=img["imageId"], content="never mind", options={"concurrency": "interrupt"}
    )
    await h.run_turns()
    ends = [e["reason"] for e in _events(c, "conversation_end")]
    assert ends == ["interrupted", "completed"]


async def test_a_client_that_reconnects_while_the_turn_waits_gets_the_request_again(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    later = await h.client()
    await later.subscribe(img["sessionId"], after_seq=0)
    types = [f["type"] for f in later.turn_frames()]
    assert types[-2:] == ["tool_approval_requested", "turn_suspended"]
    assert later.turn_frames()[-1]["seq"] == c.turn_frames()[-1]["seq"]


def _band(seq: int) -> int:
    """The attempt band of a seq (docs/protocol.md, "Numbers"): 0 for a turn's first attempt."""
    return (seq - 1) % TURN_SPAN // ATTEMPT_SPAN


def _texts(frames: list[dict[str, Any]]) -> str:
    return "".join(f["data"]["text"] for f in frames if f["type"] == "text_delta")


async def _replayed(h, img, after_seq: int = 0) -> list[dict[str, Any]]:
    later = await h.client()
    await later.subscribe(img["sessionId"], after_seq=after_seq)
    return later.turn_frames()


async def test_a_continued_turn_is_replayed_whole_its_suspended_part_then_its_continuation(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    [requested] = _events(c, "tool_approval_requested")
    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
    await c.request("tool_approval", approved=True, **ids)
    await h.run_turns()
    live = c.turn_frames()

    replayed = await _replayed(h, img)

    # Every frame the live stream sent, once, in order, under its seq (a run of text as one delta):
    # the user message, the tool use and its approval request before the suspension, then the
    # approved call's result and the reply.
    assert [f["seq"] for f in replayed if f["type"] != "text_delta"] == [
        f["seq"] for f in live if f["type"] != "text_delta"
    ]
    seqs = [f["seq"] for f in replayed]
    assert seqs == sorted(set(seqs)) and set(seqs) <= {f["seq"] for f in live}
    types = [f["type"] for f in replayed]
    order = [
        "message_persisted",
        "tool_call_message",
        "tool_approval_requested",
        "turn_suspended",
        "tool_result",
        "conversation_end",
    ]
    assert [t for t in types if t in order] == order
    assert types.count("assistant_message") == 2
    assert _texts(replayed) == _texts(live) == "Let me compute.It is 42."
    # A client that resumes from inside the suspended part gets the rest of it, then the continuation.
    cut = next(f["seq"] for f in live if f["type"] == "tool_call_message")
    rest = await _replayed(h, img, after_seq=cut)
    assert [t for t in (f["type"] for f in rest) if t in order] == order[2:]
    assert [f["seq"] for f in rest] == [s for s in seqs if s > cut]
    assert _texts(rest) == "It is 42."


async def test_a_turn_that_suspends_twice_is_replayed_with_all_three_of_its_parts(tmp_path):
    h, c, img = await _setup(tmp_path, {"tools": [PICK]})
    h.model.add(
        Calls(("pick_file", {"title": "first"}), text="One."),
        Calls(("pick_file", {"title": "second"}), text="Two."),
        "Both picked.",
    )
    await c.request("message_send", imageId=img["imageId"], content="Pick two files")
    await h.run_turns()
    for path in ("a.pdf", "b.pdf"):
        requested = _events(c, "client_tool_requested")[-1]
        ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
        await c.request("tool_result", output={"path": path}, **ids)
        await h.run_turns()
    live = c.turn_frames()
    assert _events(c, "conversation_end")[-1]["reason"] == "completed"

    replayed = await _replayed(h, img)

    assert [f["seq"] for f in replayed if f["type"] != "text_delta"] == [
        f["seq"] for f in live if f["type"] != "text_delta"
    ]
    types = [f["type"] for f in replayed]
    assert types.count("message_persisted") == 1
    assert types.count("turn_suspended") == types.count("client_tool_requested") == 2
    assert types.count("tool_result") == 2 and types.count("conversation_end") == 1
    assert _texts(replayed) == _texts(live) == "One.Two.Both picked."


async def test_a_continuation_that_dies_is_replaced_by_its_retry_and_the_suspended_part_stays(tmp_path):
    h, c, img = await _approval_turn(tmp_path)
    [requested] = _events(c, "tool_approval_requested")
    suspended_at = c.turn_frames()[-1]["seq"]
    h.rt.models.client = model = DyingModel(h.model, after_deltas=2)
    h.model.add("It is 42 as you can see.")  # the retry's reply (the dead attempt's was "It is 42.")
    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
    await c.request("tool_approval", approved=True, **ids)

    await h.run_turns()

    assert model.deaths == 1
    live = c.turn_frames()
    # The dead continuation numbered right after the suspended attempt (band 0); its retry numbers
    # from its own band, as any retry.
    dead = [f["seq"] for f in live if f["seq"] > suspended_at and _band(f["seq"]) == 0]
    retry = [f["seq"] for f in live if _band(f["seq"]) > 0]
    assert dead and retry and max(dead) < min(retry)

    replayed = await _replayed(h, img)

    # The suspended part, then the retry's frames: none of the dead continuation's.
    seqs = [f["seq"] for f in replayed]
    assert seqs == sorted(set(seqs)) and not set(seqs) & set(dead)
    assert [f["seq"] for f in replayed if f["type"] != "text_delta"] == [
        f["seq"] for f in live if f["seq"] not in dead and f["type"] != "text_delta"
    ]
    types = [f["type"] for f in replayed]
    assert types[0] == "message_persisted" and "tool_approval_requested" in types
    assert [e for e in (f["data"].get("reason") for f in replayed if f["type"] == "conversation_end")] == [
        "interrupted",
        "completed",
    ]
    assert _texts(replayed) == "Let me compute.It is 42 as you can see."


async def test_a_client_that_resumes_while_the_continuation_runs_gets_the_suspended_part_then_the_rest(
    tmp_path,
):
    h, c, img = await _approval_turn(tmp_path)
    [requested] = _events(c, "tool_approval_requested")
    h.model.word_delay_s = 0.01
    ids = {"turnId": requested["turnId"], "toolCallId": requested["toolCallId"]}
    await c.request("tool_approval", approved=True, **ids)
    consumer = asyncio.create_task(h.queue.run(lambda job: process_turn(h.rt, job)))
    try:
        while "tool_result" not in [f["type"] for f in c.turn_frames()]:
            await asyncio.sleep(0.002)
        assert (await h.store.get_turn(ids["turnId"])).status == "running"
        later = await h.client()
        await later.subscribe(img["sessionId"], after_seq=0)  # from before the suspension
        while not _events(c, "conversation_end"):
            await asyncio.sleep(0.005)
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)

    got = later.turn_frames()
    seqs = [f["seq"] for f in got]
    assert seqs == sorted(set(seqs))  # each frame once, in order
    order = [
        "message_persisted",
        "tool_approval_requested",
        "turn_suspended",
        "tool_result",
        "conversation_end",
    ]
    assert [t for t in (f["type"] for f in got) if t in order] == order
    assert _texts(got) == "Let me compute.It is 42."
