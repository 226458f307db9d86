"""Streaming a turn to its clients: the coalescing sink, frame numbering and replay, fan-out,
resume, batching cadence, and frames rendered as AgentX 2.x notifications.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.streaming.agentx_v2_events import (
        V2Renderer,
        notification,
        render_frame,
        render_payload,
        send_result,
        send_result_body,
        v2_context,
        v2_history,
    )
    from agentvm.streaming.batch_cadence import (
        BatchCadence,
    )
    from agentvm.streaming.batching import (
        asked_cadence,
        pack,
        unpack,
        wants_batches,
    )
    from agentvm.streaming.fanout import (
        Fanout,
    )
    from agentvm.streaming.frames import (
        ATTEMPT_SPAN,
        FROM_STORAGE,
        MAX_ATTEMPTS,
        REF,
        TURN_SPAN,
        FrameLog,
        error_occurred_data,
        first_seq,
        last_seq,
        message_frame_data,
        parts,
        persisted_event,
        replay,
        text_length,
    )
    from agentvm.streaming.resume import (
        FinishedTurn,
        finished_turns_after,
        subscribe_after,
    )
    from agentvm.streaming.sink import (
        CoalescingSink,
    )

__all__ = [
    "ATTEMPT_SPAN",
    "BatchCadence",
    "CoalescingSink",
    "FROM_STORAGE",
    "Fanout",
    "FrameLog",
    "MAX_ATTEMPTS",
    "REF",
    "TURN_SPAN",
    "V2Renderer",
    "asked_cadence",
    "error_occurred_data",
    "first_seq",
    "last_seq",
    "message_frame_data",
    "notification",
    "pack",
    "parts",
    "persisted_event",
    "render_frame",
    "render_payload",
    "replay",
    "send_result",
    "send_result_body",
    "FinishedTurn",
    "finished_turns_after",
    "subscribe_after",
    "text_length",
    "unpack",
    "v2_context",
    "v2_history",
    "wants_batches",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "agentx_v2_events": [
            "V2Renderer",
            "notification",
            "render_frame",
            "render_payload",
            "send_result",
            "send_result_body",
            "v2_context",
            "v2_history",
        ],
        "batch_cadence": [
            "BatchCadence",
        ],
        "batching": [
            "asked_cadence",
            "pack",
            "unpack",
            "wants_batches",
        ],
        "fanout": [
            "Fanout",
        ],
        "frames": [
            "ATTEMPT_SPAN",
            "FROM_STORAGE",
            "FrameLog",
            "MAX_ATTEMPTS",
            "REF",
            "TURN_SPAN",
            "error_occurred_data",
            "first_seq",
            "last_seq",
            "message_frame_data",
            "parts",
            "persisted_event",
            "replay",
            "text_length",
        ],
        "resume": [
            "FinishedTurn",
            "finished_turns_after",
            "subscribe_after",
        ],
        "sink": [
            "CoalescingSink",
        ],
    },
)
