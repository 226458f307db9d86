"""A turn's life, the use cases the protocols and hosts call: the worker (rebuild the agent, run
the loop, persist each step, push the terminal events), its hooks, status and suspension (sandbox
jobs, approvals), waits, cancellation, titles, and turns left without a job.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.turns.after_reply import (
        STOP_WAIT_S,
        AfterReplyTasks,
    )
    from agentvm.turns.cancel_poll import (
        CancelPoll,
    )
    from agentvm.turns.elicitations import (
        answer_elicitation,
    )
    from agentvm.turns.finish import (
        Ending,
        LoopRun,
        charge_storage,
        emit_terminal,
        ended,
        finish_turn,
    )
    from agentvm.turns.hooks import (
        TurnHooks,
        context_for,
        token_usage,
    )
    from agentvm.turns.interrupt import (
        active_turn,
        interrupt_image,
        interrupt_turn,
        interrupt_turns,
    )
    from agentvm.turns.mcp_tasks import (
        cancel_task,
        follow_task_waits,
        sealed_name,
        task_of_wait,
    )
    from agentvm.turns.orphans import (
        GRACE_MS,
        JobLookup,
        StaleMarks,
        end,
        has_no_job,
        is_withdrawn,
        sweep_orphans,
        withdraw,
    )
    from agentvm.turns.reply_cache import (
        MAX_CACHED_CHARS,
        REPLY_CACHE_KIND,
        CacheLookup,
        answer_from_cache,
        cache_lookup,
        cached_reply,
        config_digest,
        first_question,
        fits_the_quota,
        normalise_question,
        remember_reply,
        reply_bytes,
    )
    from agentvm.turns.sandbox_jobs import (
        answer_job,
        run_sandbox_job,
    )
    from agentvm.turns.schedules import (
        CLAIM_STALE_MS,
        check_cron,
        day_start,
        fire_due,
        latest_tick,
        next_tick,
        schedules_of,
        tokens_since,
    )
    from agentvm.turns.status import (
        answer_send,
        attempt_of,
        continued_frames,
        first_seq_of,
        set_status,
    )
    from agentvm.turns.submit import (
        Sender,
        Sent,
        send_message,
    )
    from agentvm.turns.suspend import (
        hold_suspended,
        pending_step,
        sandbox_job,
        suspended_before,
    )
    from agentvm.turns.title import (
        MAX_TITLE_CHARS,
        TITLE_SYSTEM,
        clean_title,
        set_title,
        title_after_turn,
    )
    from agentvm.turns.waits import (
        RETRY_MS,
        answer,
        cancel_turn_waits,
        continue_turn,
        decide,
        find_wait,
        resolution_of,
        sweep_waits,
        wait_event_data,
    )
    from agentvm.turns.watch import (
        MAX_TURN_MESSAGES,
        TEXT_CHUNKS_PER_STEP,
        FollowedTurn,
        WatchedTurn,
        follow_turn,
        look_at_turn,
    )
    from agentvm.turns.webhooks import (
        EVENT_TYPES,
        MAX_ATTEMPTS,
        backoff_ms,
        check_url,
        deliver_due,
        event_type_of,
        new_secret,
        record_event,
        record_turn_event,
        replay,
        sign,
        webhooks_of,
    )
    from agentvm.turns.worker import (
        process_turn,
        prompt_cache_key,
    )

__all__ = [
    "AfterReplyTasks",
    "CLAIM_STALE_MS",
    "CacheLookup",
    "CancelPoll",
    "EVENT_TYPES",
    "Ending",
    "FollowedTurn",
    "GRACE_MS",
    "JobLookup",
    "LoopRun",
    "MAX_ATTEMPTS",
    "MAX_CACHED_CHARS",
    "MAX_TITLE_CHARS",
    "MAX_TURN_MESSAGES",
    "REPLY_CACHE_KIND",
    "RETRY_MS",
    "STOP_WAIT_S",
    "Sender",
    "Sent",
    "StaleMarks",
    "TEXT_CHUNKS_PER_STEP",
    "TITLE_SYSTEM",
    "TurnHooks",
    "WatchedTurn",
    "active_turn",
    "answer",
    "answer_elicitation",
    "answer_from_cache",
    "answer_job",
    "answer_send",
    "attempt_of",
    "backoff_ms",
    "cache_lookup",
    "cached_reply",
    "cancel_task",
    "cancel_turn_waits",
    "charge_storage",
    "check_cron",
    "check_url",
    "clean_title",
    "config_digest",
    "context_for",
    "continue_turn",
    "continued_frames",
    "day_start",
    "decide",
    "deliver_due",
    "emit_terminal",
    "end",
    "ended",
    "event_type_of",
    "find_wait",
    "finish_turn",
    "fire_due",
    "first_question",
    "first_seq_of",
    "fits_the_quota",
    "follow_task_waits",
    "follow_turn",
    "has_no_job",
    "hold_suspended",
    "interrupt_image",
    "interrupt_turn",
    "interrupt_turns",
    "is_withdrawn",
    "latest_tick",
    "look_at_turn",
    "new_secret",
    "next_tick",
    "normalise_question",
    "pending_step",
    "process_turn",
    "prompt_cache_key",
    "record_event",
    "record_turn_event",
    "remember_reply",
    "replay",
    "reply_bytes",
    "resolution_of",
    "run_sandbox_job",
    "sandbox_job",
    "schedules_of",
    "sealed_name",
    "send_message",
    "set_status",
    "set_title",
    "sign",
    "suspended_before",
    "sweep_orphans",
    "sweep_waits",
    "task_of_wait",
    "title_after_turn",
    "token_usage",
    "tokens_since",
    "wait_event_data",
    "webhooks_of",
    "withdraw",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "after_reply": [
            "STOP_WAIT_S",
            "AfterReplyTasks",
        ],
        "cancel_poll": [
            "CancelPoll",
        ],
        "elicitations": [
            "answer_elicitation",
        ],
        "finish": [
            "Ending",
            "LoopRun",
            "charge_storage",
            "emit_terminal",
            "ended",
            "finish_turn",
        ],
        "hooks": [
            "TurnHooks",
            "context_for",
            "token_usage",
        ],
        "interrupt": [
            "active_turn",
            "interrupt_image",
            "interrupt_turn",
            "interrupt_turns",
        ],
        "mcp_tasks": [
            "cancel_task",
            "follow_task_waits",
            "sealed_name",
            "task_of_wait",
        ],
        "orphans": [
            "GRACE_MS",
            "JobLookup",
            "StaleMarks",
            "end",
            "has_no_job",
            "is_withdrawn",
            "sweep_orphans",
            "withdraw",
        ],
        "reply_cache": [
            "MAX_CACHED_CHARS",
            "REPLY_CACHE_KIND",
            "CacheLookup",
            "answer_from_cache",
            "cache_lookup",
            "cached_reply",
            "config_digest",
            "first_question",
            "fits_the_quota",
            "normalise_question",
            "remember_reply",
            "reply_bytes",
        ],
        "sandbox_jobs": [
            "answer_job",
            "run_sandbox_job",
        ],
        "schedules": [
            "CLAIM_STALE_MS",
            "check_cron",
            "day_start",
            "fire_due",
            "latest_tick",
            "next_tick",
            "schedules_of",
            "tokens_since",
        ],
        "status": [
            "answer_send",
            "attempt_of",
            "continued_frames",
            "first_seq_of",
            "set_status",
        ],
        "submit": [
            "Sender",
            "Sent",
            "send_message",
        ],
        "suspend": [
            "hold_suspended",
            "pending_step",
            "sandbox_job",
            "suspended_before",
        ],
        "title": [
            "MAX_TITLE_CHARS",
            "TITLE_SYSTEM",
            "clean_title",
            "set_title",
            "title_after_turn",
        ],
        "waits": [
            "RETRY_MS",
            "answer",
            "cancel_turn_waits",
            "continue_turn",
            "decide",
            "find_wait",
            "resolution_of",
            "sweep_waits",
            "wait_event_data",
        ],
        "watch": [
            "MAX_TURN_MESSAGES",
            "TEXT_CHUNKS_PER_STEP",
            "FollowedTurn",
            "WatchedTurn",
            "follow_turn",
            "look_at_turn",
        ],
        "webhooks": [
            "EVENT_TYPES",
            "MAX_ATTEMPTS",
            "backoff_ms",
            "check_url",
            "deliver_due",
            "event_type_of",
            "new_secret",
            "record_event",
            "record_turn_event",
            "replay",
            "sign",
            "webhooks_of",
        ],
        "worker": [
            "process_turn",
            "prompt_cache_key",
        ],
    },
)
