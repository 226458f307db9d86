"""The tool loop on the local wiring (real SQLite, scripted model, real Toolbox): events, storage,
failures becoming results, limits, interrupts and exactly-once steps across a crashed worker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentvm.adapters.llm.echo import EchoModelClient
from agentvm.adapters.llm.scripted import Calls, SingleModelResolver
from agentvm.agent.tools.sources import ToolSources
from agentvm.ports import ToolOutput
from agentvm.turns.worker import process_turn
from tests.harness import Harness
from tests.tools import FakeTool, FixedToolSources, WorkerDied, agent_types


async def _setup(tmp_path, *tools: FakeTool, max_steps: int | None = None, **kw: Any):
    h = Harness(tmp_path)
    h.rt.tools = FixedToolSources(*tools, **kw)
    c = await h.client()
    await c.request("container_create", containerId="u1")
    config: dict[str, Any] = {"name": "A", "tools": [{"type": "builtin", "name": "calculator"}]}
    if max_steps is not None:
        config["maxSteps"] = max_steps
    img = (await c.request("image_create", containerId="u1", config=config))["record"]
    return h, c, img


def _agent_types(c) -> list[str]:
    return agent_types(c.session_events())


async def _messages(c, img) -> list[dict[str, Any]]:
    return (await c.request("image_messages", imageId=img["imageId"]))["messages"]


async def test_a_tool_turn_streams_the_documented_events_and_stores_the_exchange(tmp_path):
    weather = FakeTool("get_weather")
    h, c, img = await _setup(tmp_path, weather)
    h.model.add(Calls(("get_weather", {"city": "Paris"}), text="Let me look."), "It is sunny in Paris.")
    await c.request("message_send", imageId=img["imageId"], content="Weather in Paris?")
    await h.run_turns()

    assert weather.calls == [{"city": "Paris"}]
    assert _agent_types(c) == [
        "message_start",
        "conversation_start",
        "text_delta",
        "conversation_responding",
        "text_delta",
        "tool_use_start",
        "tool_planned",
        "tool_executing",
        "input_json_delta",
        "tool_use_stop",
        "tool_call_message",
        "message_stop",
        "assistant_message",
        "tool_result",
        "tool_result_message",
        "tool_completed",
        "message_start",
        "conversation_start",
        "text_delta",
        "conversation_responding",
        "text_delta",
        "message_stop",
        "assistant_message",
        "conversation_end",
    ]
    by_type = {f["type"]: f["data"] for f in c.session_events()}
    assert by_type["tool_use_stop"] == {
        "toolCallId": "call_1_0",
        "toolName": "get_weather",
        "input": {"city": "Paris"},
    }
    assert by_type["tool_result"] == {
        "toolCallId": "call_1_0",
        "toolName": "get_weather",
        "result": "get_weather: sunny in Paris",
        "isError": False,
    }
    stops = [f["data"] for f in c.session_events() if f["type"] == "message_stop"]
    assert stops == [{"stopReason": "tool_use"}, {"stopReason": "end_turn"}]
    assert all("seq" in f and f["context"]["imageId"] == img["imageId"] for f in c.session_events())

    messages = await _messages(c, img)
    # in the order the stream showed them: the step's text, then its call (reading_order)
    assert [m["subtype"] for m in messages] == ["user", "assistant", "tool-call", "tool-result", "assistant"]
    call, result = messages[2], messages[3]
    assert call["toolCall"] == {
        "type": "tool-call",
        "id": "call_1_0",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert call["parentId"] == messages[0]["id"]
    assert result["toolCallId"] == "call_1_0" and result["role"] == "tool"
    assert result["toolResult"]["output"] == {"type": "text", "value": "get_weather: sunny in Paris"}

    # The second model call saw the exchange; so does the next turn, rebuilt from storage.
    second = h.model.requests[1].messages
    assert second[-2].tool_calls[0].input == {"city": "Paris"} and second[-2].text == "Let me look."
    assert second[-1].tool_results[0].content == "get_weather: sunny in Paris"
    assert [s.name for s in h.model.requests[0].tools] == ["get_weather"]
    h.model.add("Bye.")
    await c.request("message_send", imageId=img["imageId"], content="Thanks")
    await h.run_turns()
    third = h.model.requests[2].messages
    assert [(t.role, bool(t.tool_calls), bool(t.tool_results)) for t in third] == [
        ("user", False, False),
        ("assistant", True, False),
        ("user", False, True),
        ("assistant", False, False),
        ("user", False, False),
    ]


async def test_parallel_calls_of_one_message_run_concurrently(tmp_path):
    both_running = asyncio.Barrier(2)

    async def rendezvous(arguments):
        await asyncio.wait_for(both_running.wait(), 2)  # only passes if the other call runs too
        return ToolOutput(f"ok {arguments['city']}")

    tool = FakeTool("get_weather", rendezvous)
    h, c, img = await _setup(tmp_path, tool)
    h.model.add(Calls(("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})), "Done.")
    await c.request("message_send", imageId=img["imageId"], content="both")
    await h.run_turns()
    results = [f["data"] for f in c.session_events() if f["type"] == "tool_result"]
    assert sorted(r["result"] for r in results) == ["ok A", "ok B"]
    assert not any(r["isError"] for r in results)
    assert _agent_types(c).count("tool_call_message") == 2 and _agent_types(c)[-1] == "conversation_end"


@pytest.mark.parametrize(
    ("behave", "expected"),
    [
        ("raise", "get_weather failed: the weather service is down"),
        ("hang", "get_weather timed out after 0.2 s"),
        ("huge", "[output truncated: 100 of 5000 characters shown]"),
    ],
)
async def test_tool_failures_become_error_results_and_the_turn_goes_on(tmp_path, behave, expected):
    async def act(arguments):
        if behave == "raise":
            raise RuntimeError("the weather service is down")
        if behave == "hang":
            await asyncio.sleep(30)
        return ToolOutput("x" * 5000)

    h, c, img = await _setup(tmp_path, FakeTool("get_weather", act), timeout_s=0.2, max_chars=100)
    h.model.add(Calls(("get_weather", {"city": "Paris"})), "Sorry about that.")
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    await h.run_turns()
    result = next(f["data"] for f in c.session_events() if f["type"] == "tool_result")
    assert expected in result["result"]
    assert result["isError"] is (behave != "huge")
    assert ("tool_failed" in _agent_types(c)) is (behave != "huge")
    assert _agent_types(c)[-1] == "conversation_end"
    stored = next(m for m in await _messages(c, img) if m["subtype"] == "tool-result")["toolResult"]["output"]
    assert stored["type"] == ("text" if behave == "huge" else "error-text")


async def test_invalid_input_goes_back_to_the_model_without_calling_the_tool(tmp_path):
    tool = FakeTool("get_weather")
    h, c, img = await _setup(tmp_path, tool)
    h.model.add(Calls(("get_weather", {"town": 3}), ("get_weather", '{"city": ')), "I will ask properly.")
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    await h.run_turns()
    assert tool.calls == []
    errors = [r.content for r in h.model.requests[1].messages[-1].tool_results]
    assert "invalid input for get_weather: 'city' is a required property" in errors[0]
    assert "not valid JSON" in errors[1]
    assert _agent_types(c)[-1] == "conversation_end"


async def test_a_model_that_keeps_calling_tools_stops_at_max_steps(tmp_path):
    tool = FakeTool("get_weather")
    h, c, img = await _setup(tmp_path, tool, max_steps=3)
    h.model.add(*[Calls(("get_weather", {"city": f"C{i}"})) for i in range(5)])
    await c.request("message_send", imageId=img["imageId"], content="loop")
    await h.run_turns()
    assert len(h.model.requests) == 3 and len(tool.calls) == 2  # the third call is answered, not run
    error = next(f["data"] for f in c.session_events() if f["type"] == "error_occurred")
    assert error["code"] == "max_steps"
    messages = await _messages(c, img)
    assert messages[-2]["toolResult"]["output"]["value"].startswith(
        "Error: not run: the turn reached its step limit"
    )
    assert messages[-1]["subtype"] == "error"
    usage = await h.store.list_usage("tenant-a")
    assert sorted(u.kind for u in usage) == ["step", "step", "turn"]


async def test_an_interrupt_during_a_tool_call_stops_the_tool_and_the_turn(tmp_path):
    started, stopped = asyncio.Event(), asyncio.Event()

    async def slow(arguments):
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return ToolOutput("never")

    h, c, img = await _setup(tmp_path, FakeTool("get_weather", slow))
    h.model.add(Calls(("get_weather", {"city": "Paris"})), "unused")
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    turns = asyncio.create_task(h.run_turns())
    await asyncio.wait_for(started.wait(), 5)
    await c.request("agent_interrupt", imageId=img["imageId"])
    await asyncio.wait_for(turns, 5)
    assert stopped.is_set() and len(h.model.requests) == 1
    types = _agent_types(c)
    assert types[-3:] == ["tool_failed", "interrupted", "conversation_end"]
    assert c.session_events()[-1]["data"] == {"reason": "interrupted"}
    result = (await _messages(c, img))[-1]
    assert result["subtype"] == "tool-result" and "interrupted" in result["toolResult"]["output"]["value"]


async def test_a_worker_that_dies_after_a_tool_ran_resumes_without_running_it_again(tmp_path):
    tool = FakeTool("get_weather")
    h, c, img = await _setup(tmp_path, tool)
    h.model.add(Calls(("get_weather", {"city": "Paris"})), WorkerDied(), "Sunny.")
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    job = await _only_job(h)
    with pytest.raises(WorkerDied):
        await process_turn(h.rt, job)
    assert len(tool.calls) == 1
    await process_turn(h.rt, job)  # the redelivery
    assert len(tool.calls) == 1
    messages = await _messages(c, img)
    assert [m["subtype"] for m in messages] == ["user", "tool-call", "tool-result", "assistant"]
    assert messages[-1]["content"][0]["text"] == "Sunny."
    assert (await h.store.get_turn(job.turnId)).status == "completed"
    # The resumed model call saw the stored exchange.
    assert h.model.requests[-1].messages[-1].tool_results[0].content == "get_weather: sunny in Paris"


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_tool_running_when_the_worker_died_is_reported_or_rerun_if_idempotent(tmp_path, idempotent):
    async def dies_first_time(arguments):
        if len(tool.calls) == 1:
            raise WorkerDied
        return ToolOutput("sunny")

    tool = FakeTool("get_weather", dies_first_time, idempotent=idempotent)
    h, c, img = await _setup(tmp_path, tool)
    h.model.add(Calls(("get_weather", {"city": "Paris"})), "Done.")
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    job = await _only_job(h)
    with pytest.raises(WorkerDied):
        await process_turn(h.rt, job)
    await process_turn(h.rt, job)
    assert len(tool.calls) == (2 if idempotent else 1)
    result = (await _messages(c, img))[2]["toolResult"]["output"]
    if idempotent:
        assert result == {"type": "text", "value": "sunny"}
    else:
        assert result["type"] == "error-text" and "was not run again" in result["value"]
    assert (await h.store.get_turn(job.turnId)).status == "completed"


async def test_a_finished_tool_turn_replays_the_frames_it_sent(tmp_path):
    h, c, img = await _setup(tmp_path, FakeTool("get_weather"))
    h.model.add(Calls(("get_weather", {"city": "Paris"}), text="Looking."), "Sunny.")
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    await h.run_turns()
    live = [(f["seq"], f["type"], f["data"]) for f in c.turn_frames()]
    late = await h.client()
    await late.subscribe(img["sessionId"], after_seq=0)
    replayed = [(f["seq"], f["type"], f["data"]) for f in late.turn_frames()]
    assert [(s, t) for s, t, _ in replayed] == [(s, t) for s, t, _ in live]
    strip = {"message_persisted"}  # carries the save time, rebuilt exactly
    assert [d for _, t, d in replayed if t not in strip] == [d for _, t, d in live if t not in strip]


async def test_the_echo_model_calls_a_builtin_tool_on_request(tmp_path):
    h, c, img = await _setup(tmp_path)
    h.rt.tools = ToolSources()  # the image's own declarations: the calculator built-in
    echo = EchoModelClient(delay_ms=0)
    h.rt.models = SingleModelResolver(echo, "echo/echo-1")
    await c.request("message_send", imageId=img["imageId"], content='/tool calculator {"expression": "6*7"}')
    await h.run_turns()
    result = next(f["data"] for f in c.session_events() if f["type"] == "tool_result")
    assert result == {
        "toolCallId": result["toolCallId"],
        "toolName": "calculator",
        "result": "42",
        "isError": False,
    }
    final = [f["data"] for f in c.session_events() if f["type"] == "assistant_message"][-1]
    assert final["content"][0]["text"] == "Echo: calculator returned: 42"


async def _only_job(h):
    jobs = []
    await h.queue.drain(lambda job: _collect(jobs, job))
    assert len(jobs) == 1
    return jobs[0]


async def _collect(jobs, job):
    jobs.append(job)


async def test_a_tool_turns_history_lists_each_steps_text_before_its_calls_as_the_stream_did(tmp_path):
    weather = FakeTool("get_weather")
    h, c, img = await _setup(tmp_path, weather)
    h.model.add(
        Calls(("get_weather", {"city": "Paris"}), text="Let me look."),
        Calls(("get_weather", {"city": "Rome"}), ("get_weather", {"city": "Oslo"}), text="And two more."),
        Calls(("get_weather", {"city": "Nice"})),  # a step that writes nothing
        "Sunny everywhere.",
    )
    await c.request("message_send", imageId=img["imageId"], content="Weather?")
    await h.run_turns()

    def said(kind: str, data: dict[str, Any]) -> str:
        return data["text"] if kind == "text_delta" else f"call {data['input']['city']}"

    streamed: list[str] = []  # what a client watching the turn was shown, in order
    for f in c.session_events():
        if f["type"] in ("text_delta", "tool_use_stop"):
            piece = said(f["type"], f["data"])
            if f["type"] == "text_delta" and streamed and not streamed[-1].startswith("call "):
                streamed[-1] += piece
            else:
                streamed.append(piece)
    history = [
        m["content"][0]["text"] if m["subtype"] == "assistant" else f"call {m['toolCall']['input']['city']}"
        for m in await _messages(c, img)
        if m["subtype"] in ("assistant", "tool-call")
    ]
    assert (
        history
        == streamed
        == [
            "Let me look.",
            "call Paris",
            "And two more.",
            "call Rome",
            "call Oslo",
            "call Nice",
            "Sunny everywhere.",
        ]
    )
    # the model was sent each step as one assistant turn, its text then its calls
    steps = [t for t in h.model.requests[-1].messages if t.role == "assistant"]
    assert [(t.text, [call.input["city"] for call in t.tool_calls]) for t in steps] == [
        ("Let me look.", ["Paris"]),
        ("And two more.", ["Rome", "Oslo"]),
        ("", ["Nice"]),
    ]
