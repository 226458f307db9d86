"""The context diet (agent/diet.py): old tool results elided to a stub, large ones shown by
reference, decided at the window's cut point so every turn between two cuts sends the same bytes,
never touching the current turn, the full text always readable from the store."""

from __future__ import annotations

import pytest

from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.agent.context import load_context
from agentvm.agent.diet import ContextDiet
from agentvm.images.config import ImageConfig, context_diet_policy
from agentvm.messages import ToolCallMessage, ToolResultMessage
from tests.unit.agent.test_history_window import SESSION, play, tool_turn

DIET = ContextDiet(keep_steps=3, max_result_chars=1000, head_chars=100)


@pytest.fixture
async def store():
    instance = SqliteStore(":memory:")
    yield instance
    instance.close()


def results(messages) -> dict[str, str]:
    return {m.id: m.toolResult.output.value for m in messages if isinstance(m, ToolResultMessage)}


async def test_the_policy_is_opt_in_and_stored_whole():
    assert ContextDiet.of(None) is None and ContextDiet.of({"enabled": False}) is None
    config = ImageConfig.model_validate({"contextDiet": {"keepSteps": 2}})
    stored = context_diet_policy(config)
    assert stored == {"enabled": True, "keepSteps": 2, "maxResultChars": 8000, "headChars": 2000}
    assert ContextDiet.of(stored) == ContextDiet(keep_steps=2, max_result_chars=8000, head_chars=2000)
    assert context_diet_policy(ImageConfig()) is None


async def test_old_results_are_elided_and_the_decision_never_changes_once_made(store):
    await play(store, 0, 20)
    entries = await store.recent_messages_after(SESSION, 0, 500)
    shown_at: dict[str, str] = {}
    previous: set[str] = set()
    for cut in range(1, entries[-1].seq + 1):
        trimmed = DIET.trimmed(entries, cut)
        assert trimmed == DIET.trimmed(entries, cut)  # deterministic
        assert previous <= set(trimmed)  # once elided, always elided
        for message_id, message in trimmed.items():
            text = message.toolResult.output.value
            assert shown_at.setdefault(message_id, text) == text  # and always the same stub
            assert f"message {message_id}" in text
        previous = set(trimmed)
    # at the end: everything but the results of the last three steps (runs of results)
    kept = [
        e.message.id
        for e in entries
        if isinstance(e.message, ToolResultMessage) and e.message.id not in previous
    ]
    assert kept == ["tr17_0", "tr17_1", "tr17_2", "tr18_0", "tr19_0", "tr19_1"]


async def test_large_results_show_a_head_and_where_the_whole_text_is(store):
    big = "x" * 5000
    await play(store, 0, 2, result=big)
    entries = await store.recent_messages_after(SESSION, 0, 500)
    trimmed = DIET.trimmed(entries, entries[-1].seq)
    shown = trimmed["tr1_0"].toolResult.output.value
    assert shown.startswith("x" * 100) and not shown.startswith("x" * 101)
    assert "message tr1_0" in shown and len(shown) < 400
    # the reference is readable: the stored message holds the whole output
    stored = {m.id: m for m in await store.list_messages(SESSION)}
    assert stored["tr1_0"].toolResult.output.value == f"{big} 1"


async def test_the_current_turns_steps_are_never_dieted(store):
    big = "y" * 5000
    await play(store, 0, 12, result=big)
    user, *steps = tool_turn(50, calls=3, result=big)
    appended = await store.append_message(SESSION, user)
    for _ in range(5):  # five steps of the current turn, each far past the threshold
        for message in steps[:-1]:
            await store.append_message(SESSION, message)
    context = await load_context(store, SESSION, 50, anchor_seq=appended.seq, step=20, diet=DIET)
    own = {e.message.id for e in context.entries if e.seq > appended.seq}
    assert own and not own & set(context.dieted)
    assert context.dieted  # older turns' results are
    request = context.request(model="m", image_prompt="p", up_to_user_id=user.id, max_tokens=10)
    own_results = [r for t in request.messages for r in t.tool_results if r.call_id.startswith("c50_")]
    assert own_results and all(r.content == f"{big} 50" for r in own_results)


async def test_turns_between_two_cuts_send_the_same_prefix_and_the_diet_saves_tokens(store):
    big = "z" * 3000

    async def read(seq: int, n: int, diet: ContextDiet | None = DIET):
        context = await load_context(store, SESSION, 50, summarised=False, anchor_seq=seq, step=20, diet=diet)
        request = context.request(model="m", image_prompt="p", up_to_user_id=f"u{n}", max_tokens=10)
        plain = await load_context(store, SESSION, 50, summarised=False, anchor_seq=seq, step=20)
        full = plain.request(model="m", image_prompt="p", up_to_user_id=f"u{n}", max_tokens=10)
        return context.prefix_break, request.messages, full.messages

    seen = await play(store, 0, 30, read, result=big)
    previous = None
    for n, (reason, messages, _) in enumerate(seen):
        if previous is not None:
            assert (messages[: len(previous)] == previous) == (reason is None), n
        previous = messages
    reasons = [reason for reason, _, _ in seen]
    assert "diet" in reasons and reasons.count(None) > len(reasons) // 2
    size = sum(len(r.content) for t in seen[-1][1] for r in t.tool_results)
    full = sum(len(r.content) for t in seen[-1][2] for r in t.tool_results)
    assert size < full / 3


def test_a_dieted_result_keeps_its_call_and_error_kind():
    user, call, result, _ = tool_turn(0, result="e" * 3000)
    assert isinstance(call, ToolCallMessage)
    failed = result.model_copy(
        update={
            "toolResult": result.toolResult.model_copy(
                update={
                    "output": result.toolResult.output.model_copy(
                        update={"type": "error-json", "value": {"e": "x" * 3000}}
                    )
                }
            )
        }
    )
    from agentvm.ports import SeqMessage

    trimmed = DIET.trimmed([SeqMessage(1, user), SeqMessage(2, call), SeqMessage(3, failed)], 3)
    shown = trimmed[failed.id]
    assert shown.toolResult.output.type == "error-text" and shown.toolCallId == call.toolCall.id
