"""The agent itself, for one turn: the loop (model → tools → model), its context and history,
compaction, provider retries, pacing, and side calls billed like a turn's. Tools are in ``agent.tools``.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.agent.compaction import (
        SUMMARY_SYSTEM,
        compact_after_turn,
        count_trigger,
        enabled,
        fold_count,
        keep_max,
        prepare_context,
        summary_max_tokens,
        summary_request,
        turn_context,
    )
    from agentvm.agent.context import (
        CHARS_PER_TOKEN,
        SUMMARY_HEADING,
        TurnContext,
        estimate_request_tokens,
        estimate_tokens,
        load_context,
        model_text,
        system_prompt,
    )
    from agentvm.agent.diet import (
        DEFAULT_HEAD_CHARS,
        DEFAULT_KEEP_STEPS,
        DEFAULT_MAX_RESULT_CHARS,
        ContextDiet,
        elided_note,
        reference_note,
    )
    from agentvm.agent.history import (
        NO_RESULT,
        Step,
        chat_turns,
        open_step,
        pending_user_ids,
        result_of,
        steps_of,
        tool_result_of,
        turn_steps,
        turns_of,
        user_turn,
    )
    from agentvm.agent.loop import (
        INTERRUPTED_RESULT,
        PendingStep,
        Resolution,
        StepHooks,
        StepOutcome,
        StreamHooks,
        TurnOutcome,
        complete,
        run_turn,
    )
    from agentvm.agent.model_policy import (
        DEFAULT_FAST_MAX_CHARS,
        SHORT_FIRST_MESSAGE,
        Route,
        route_turn,
    )
    from agentvm.agent.pacing import (
        LEAD_S,
        pace_reads_by,
        read_pause,
    )
    from agentvm.agent.retry import (
        RetryingModelClient,
    )
    from agentvm.agent.side_calls import (
        bill_side_call,
    )
    from agentvm.agent.side_model import (
        ANTHROPIC_HAIKU,
        BEDROCK_HAIKU,
        OPENAI_MINI,
        cheap_sibling,
        resolve_side_model,
        side_model_ref,
    )
    from agentvm.agent.window import (
        AFTER_ANCHOR_SLACK,
        PrefixBreak,
        cut_seq,
        diet_cut,
        prefix_break,
        previous_user,
        read_bounds,
        start_seq,
    )

__all__ = [
    "AFTER_ANCHOR_SLACK",
    "ANTHROPIC_HAIKU",
    "BEDROCK_HAIKU",
    "CHARS_PER_TOKEN",
    "ContextDiet",
    "DEFAULT_FAST_MAX_CHARS",
    "DEFAULT_HEAD_CHARS",
    "DEFAULT_KEEP_STEPS",
    "DEFAULT_MAX_RESULT_CHARS",
    "INTERRUPTED_RESULT",
    "LEAD_S",
    "NO_RESULT",
    "OPENAI_MINI",
    "PendingStep",
    "PrefixBreak",
    "Resolution",
    "RetryingModelClient",
    "Route",
    "SHORT_FIRST_MESSAGE",
    "SUMMARY_HEADING",
    "SUMMARY_SYSTEM",
    "Step",
    "StepHooks",
    "StepOutcome",
    "StreamHooks",
    "TurnContext",
    "TurnOutcome",
    "bill_side_call",
    "chat_turns",
    "cheap_sibling",
    "compact_after_turn",
    "complete",
    "count_trigger",
    "cut_seq",
    "diet_cut",
    "elided_note",
    "enabled",
    "estimate_request_tokens",
    "estimate_tokens",
    "fold_count",
    "keep_max",
    "load_context",
    "model_text",
    "open_step",
    "pace_reads_by",
    "pending_user_ids",
    "prefix_break",
    "prepare_context",
    "previous_user",
    "read_bounds",
    "read_pause",
    "reference_note",
    "resolve_side_model",
    "result_of",
    "route_turn",
    "run_turn",
    "side_model_ref",
    "start_seq",
    "steps_of",
    "summary_max_tokens",
    "summary_request",
    "system_prompt",
    "tool_result_of",
    "turn_context",
    "turn_steps",
    "turns_of",
    "user_turn",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "compaction": [
            "SUMMARY_SYSTEM",
            "compact_after_turn",
            "count_trigger",
            "enabled",
            "fold_count",
            "keep_max",
            "prepare_context",
            "summary_max_tokens",
            "summary_request",
            "turn_context",
        ],
        "context": [
            "CHARS_PER_TOKEN",
            "SUMMARY_HEADING",
            "TurnContext",
            "estimate_request_tokens",
            "estimate_tokens",
            "load_context",
            "model_text",
            "system_prompt",
        ],
        "history": [
            "NO_RESULT",
            "Step",
            "chat_turns",
            "open_step",
            "pending_user_ids",
            "result_of",
            "steps_of",
            "tool_result_of",
            "turn_steps",
            "turns_of",
            "user_turn",
        ],
        "loop": [
            "INTERRUPTED_RESULT",
            "PendingStep",
            "Resolution",
            "StepHooks",
            "StepOutcome",
            "StreamHooks",
            "TurnOutcome",
            "complete",
            "run_turn",
        ],
        "model_policy": [
            "DEFAULT_FAST_MAX_CHARS",
            "SHORT_FIRST_MESSAGE",
            "Route",
            "route_turn",
        ],
        "pacing": [
            "LEAD_S",
            "pace_reads_by",
            "read_pause",
        ],
        "retry": [
            "RetryingModelClient",
        ],
        "side_calls": [
            "bill_side_call",
        ],
        "side_model": [
            "ANTHROPIC_HAIKU",
            "BEDROCK_HAIKU",
            "OPENAI_MINI",
            "cheap_sibling",
            "resolve_side_model",
            "side_model_ref",
        ],
        "diet": [
            "ContextDiet",
            "DEFAULT_HEAD_CHARS",
            "DEFAULT_KEEP_STEPS",
            "DEFAULT_MAX_RESULT_CHARS",
            "elided_note",
            "reference_note",
        ],
        "window": [
            "AFTER_ANCHOR_SLACK",
            "PrefixBreak",
            "cut_seq",
            "diet_cut",
            "prefix_break",
            "previous_user",
            "read_bounds",
            "start_seq",
        ],
    },
)
