"""Prompt-cache breakpoints (adapters/llm/caching.py) and how each adapter writes them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from agentvm.adapters.llm.anthropic import request_params
from agentvm.adapters.llm.bedrock import _converse_params
from agentvm.adapters.llm.caching import (
    MAX_BREAKPOINTS,
    Breakpoints,
    bedrock_supports_cache_points,
    min_cacheable_tokens,
    place_breakpoints,
)
from agentvm.llm import ChatTurn, ModelRequest, ToolCall, ToolResult, ToolSpec

SONNET = "claude-sonnet-4-5"
LONG = "word " * 2000  # 10,000 characters: about 2,500 tokens, past every minimum but Haiku 4.5's
SHORT = "be brief"


def tool(name: str, size: int = 100) -> ToolSpec:
    return ToolSpec(name, "d" * size, {"type": "object", "properties": {"q": {"type": "string"}}})


def conversation(steps: int, text: str = "hello") -> tuple[ChatTurn, ...]:
    """A user message, then ``steps`` tool steps (assistant calls, user results), as a turn sends."""
    turns = [ChatTurn("user", text)]
    for i in range(steps):
        call = ToolCall(f"c{i}", "search", {"q": "x" * 40})
        turns.append(ChatTurn("assistant", "looking", tool_calls=(call,)))
        turns.append(ChatTurn("user", tool_results=(ToolResult(f"c{i}", "search", "r" * 400),)))
    return tuple(turns)


def request(**fields) -> ModelRequest:
    base = {"model": SONNET, "messages": conversation(0), "prompt_caching": True}
    return ModelRequest(**{**base, **fields})


def test_no_breakpoints_unless_the_request_asks_for_caching():
    assert place_breakpoints(request(system=LONG, prompt_caching=False)) == Breakpoints()


def test_a_short_prompt_gets_no_breakpoint():
    assert place_breakpoints(request(system=SHORT)) == Breakpoints()


def test_long_system_prompt_marks_the_system_and_the_moving_end():
    marks = place_breakpoints(request(system=LONG))
    assert marks == Breakpoints(tools=False, system=True, messages=(0,))


def test_tools_are_marked_only_when_their_own_prefix_is_long_enough():
    few = place_breakpoints(request(system=LONG, tools=(tool("a"), tool("b"))))
    many = place_breakpoints(request(system=LONG, tools=tuple(tool(f"t{i}", 400) for i in range(20))))
    assert (few.tools, few.system) == (False, True)
    assert (many.tools, many.system) == (True, True)


def test_many_tools_without_a_system_prompt_mark_the_tools():
    marks = place_breakpoints(request(tools=tuple(tool(f"t{i}", 400) for i in range(20))))
    assert marks == Breakpoints(tools=True, system=False, messages=(0,))


def test_a_long_conversation_marks_its_end_and_the_previous_requests_end():
    messages = conversation(10)
    marks = place_breakpoints(request(system=LONG, tools=(tool("a"),), messages=messages))
    last = len(messages) - 1
    # the user message before the last one: where the previous step's request ended
    assert marks.messages == (last - 2, last)
    assert messages[last - 2].role == "user"
    assert marks.count <= MAX_BREAKPOINTS


@pytest.mark.parametrize(
    ("system", "tools", "steps"),
    [
        (None, (), 0),
        (SHORT, (), 0),
        (LONG, (), 0),
        (SHORT, tuple(tool(f"t{i}", 600) for i in range(30)), 3),
        (LONG, tuple(tool(f"t{i}", 600) for i in range(30)), 40),
        (None, tuple(tool(f"t{i}") for i in range(3)), 1),
    ],
    ids=["nothing", "short-system", "long-system", "many-tools", "everything-long", "few-tools-resumed"],
)
def test_every_shape_stays_within_the_limit_and_marks_only_long_prefixes(system, tools, steps):
    req = request(system=system, tools=tools, messages=conversation(steps))
    marks = place_breakpoints(req)
    assert marks.count <= MAX_BREAKPOINTS
    body = request_params(req)
    marked = _anthropic_marked(body)
    assert len(marked) == marks.count <= MAX_BREAKPOINTS
    floor = min_cacheable_tokens(SONNET)
    for prefix_chars in marked:
        assert prefix_chars // 4 >= floor  # never a breakpoint on a prefix too short to cache


def test_a_caller_limit_keeps_the_moving_end_first():
    req = request(system=LONG, tools=tuple(tool(f"t{i}", 600) for i in range(30)), messages=conversation(3))
    assert place_breakpoints(req, limit=1) == Breakpoints(messages=(6,))
    assert place_breakpoints(req, limit=2) == Breakpoints(system=True, messages=(6,))


def test_minimum_prefix_per_model():
    assert min_cacheable_tokens("claude-sonnet-4-5") == 1024
    assert min_cacheable_tokens("claude-haiku-4-5") == 4096
    assert min_cacheable_tokens("claude-3-5-haiku-latest") == 2048
    assert min_cacheable_tokens("claude-opus-4-5") == 4096
    assert min_cacheable_tokens("claude-opus-4-1") == 1024
    # Haiku 4.5 needs 4,096 tokens: the 2,500-token system prompt is not worth a breakpoint there
    assert place_breakpoints(request(model="claude-haiku-4-5", system=LONG)) == Breakpoints()


def test_anthropic_body_marks_last_tool_system_and_last_block_and_keeps_bytes_stable():
    tools = tuple(tool(f"t{i}", 600) for i in range(30))
    first = request_params(request(system=LONG, tools=tools, messages=conversation(1)))
    second = request_params(request(system=LONG, tools=tools, messages=conversation(2)))
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in first["tools"][:-1])
    assert first["system"] == [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    assert first["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # every message is sent as blocks: a message's bytes, unmarked, are the same in both requests
    strip = [_unmarked(m) for m in first["messages"]]
    assert strip == [_unmarked(m) for m in second["messages"][: len(strip)]]


def test_anthropic_body_without_caching_is_the_plain_shape():
    body = request_params(request(system=LONG, prompt_caching=False))
    assert body["system"] == LONG
    assert body["messages"] == [{"role": "user", "content": "hello"}]


def test_bedrock_cache_points_for_claude_models_only():
    assert bedrock_supports_cache_points("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert bedrock_supports_cache_points("anthropic.claude-3-7-sonnet-20250219-v1:0")
    assert not bedrock_supports_cache_points("anthropic.claude-3-haiku-20240307-v1:0")
    assert not bedrock_supports_cache_points("meta.llama3-70b-instruct-v1:0")
    tools = tuple(tool(f"t{i}", 600) for i in range(30))
    req = request(
        model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        system=LONG,
        tools=tools,
        messages=conversation(2),
    )
    params = _converse_params(req)
    point = {"cachePoint": {"type": "default"}}
    assert params["toolConfig"]["tools"][-1] == point
    assert params["system"] == [{"text": LONG}, point]
    assert params["messages"][-1]["content"][-1] == point
    assert params["messages"][2]["content"][-1] == point  # the previous request's end
    count = sum(
        block == point
        for blocks in (
            params["toolConfig"]["tools"],
            params["system"],
            *(m["content"] for m in params["messages"]),
        )
        for block in blocks
    )
    assert count == 4
    other = _converse_params(
        request(model="meta.llama3-70b-instruct-v1:0", system=LONG, messages=conversation(2))
    )
    assert point not in other["system"]
    assert all(point not in m["content"] for m in other["messages"])


def _unmarked(message: dict) -> dict:
    return {
        **message,
        "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in message["content"]],
    }


def _anthropic_marked(body: dict) -> list[int]:
    """The prefix length (characters of tools, system and messages) at each marked block."""
    marked: list[int] = []
    chars = 0
    for t in body.get("tools", []):
        chars += len(t["name"]) + len(t["description"]) + len(str(t["input_schema"]))
        if "cache_control" in t:
            marked.append(chars)
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            chars += len(block["text"])
            if "cache_control" in block:
                marked.append(chars)
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            chars += (
                len(block.get("text", ""))
                + len(str(block.get("content", "")))
                + len(str(block.get("input", "")))
            )
            if "cache_control" in block:
                marked.append(chars)
    return marked


def test_the_session_summary_comes_after_the_system_breakpoint():
    summary = "\n\nSummary of the earlier conversation: the user asked about orders."
    req = request(system=LONG + summary, stable_system_chars=len(LONG), messages=conversation(1))
    body = request_params(req)
    assert body["system"] == [
        {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": summary},
    ]
    bedrock = _converse_params(dataclasses.replace(req, model="us.anthropic.claude-sonnet-4-5-20250929-v1:0"))
    assert bedrock["system"] == [{"text": LONG}, {"cachePoint": {"type": "default"}}, {"text": summary}]
    # a request without a summary: one block, as before
    assert len(request_params(request(system=LONG, stable_system_chars=len(LONG)))["system"]) == 1


# -- requests as turns build them: after a compaction, on a resumed turn, on a suspended one ---------

TOOLSETS = {"no-tools": (), "many-tools": tuple(tool(f"t{i}", 600) for i in range(30))}
PROMPTS = {"short-prompt": SHORT, "long-prompt": LONG}


async def _turn_request(state: str, prompt: str, tools: tuple[ToolSpec, ...]) -> ModelRequest:
    """The request of a turn after 20 answered tool turns, read through the stepped window with the
    context diet, in ``state``: fresh, compacted (a summary in the system prompt), resumed (the
    turn's own completed steps stored) or suspended (its last step's calls wait for results)."""
    from agentvm.adapters.local.sqlite.store import SqliteStore
    from agentvm.agent.context import load_context
    from agentvm.agent.diet import ContextDiet
    from agentvm.messages import ToolCallMessage, UserMessage
    from agentvm.records import SessionSummary
    from tests.unit.agent.test_history_window import SESSION, play, tool_turn

    store = SqliteStore(":memory:")
    try:
        await play(store, 0, 20, result="r" * 3000)
        user, *steps = tool_turn(99, calls=2)
        anchor = (await store.append_message(SESSION, user)).seq
        if state in ("resumed", "suspended"):
            for message in steps[:-1]:  # one whole step: its calls and results
                await store.append_message(SESSION, message)
        if state == "suspended":  # a second step's call, its result not in yet
            call = steps[0].model_copy(
                update={"id": "tc99_x", "toolCall": steps[0].toolCall.model_copy(update={"id": "cx"})}
            )
            assert isinstance(call, ToolCallMessage)
            await store.append_message(SESSION, call)
        if state == "compacted":
            summary = SessionSummary(
                sessionId=SESSION,
                upToSeq=anchor // 2,
                text="earlier: " + "s " * 800,
                model="m",
                seenSeq=anchor - 1,
            )
            await store.put_summary(summary)
        context = await load_context(store, SESSION, 50, anchor_seq=anchor, step=20, diet=ContextDiet())
        assert isinstance(user, UserMessage)
        request = context.request(
            model=SONNET,
            image_prompt=prompt,
            up_to_user_id=user.id,
            max_tokens=100,
            tools=tools,
            prompt_caching=True,
        )
        if state == "compacted":
            assert request.system is not None and "earlier:" in request.system
        return request
    finally:
        store.close()


@pytest.mark.parametrize("state", ["fresh", "compacted", "resumed", "suspended"])
@pytest.mark.parametrize("prompt", list(PROMPTS))
@pytest.mark.parametrize("toolset", list(TOOLSETS))
async def test_turn_requests_stay_within_the_limit_in_every_state(state, prompt, toolset):
    req = await _turn_request(state, PROMPTS[prompt], TOOLSETS[toolset])
    marks = place_breakpoints(req)
    assert 1 <= marks.count <= MAX_BREAKPOINTS  # 20 turns of tool results: the moving end is worth one
    marked = _anthropic_marked(request_params(req))
    assert len(marked) == marks.count
    assert all(chars // 4 >= min_cacheable_tokens(SONNET) for chars in marked)
    bedrock = _converse_params(dataclasses.replace(req, model="us.anthropic.claude-sonnet-4-5-20250929-v1:0"))
    points = json.dumps(bedrock).count('"cachePoint"')
    assert 1 <= points <= MAX_BREAKPOINTS
