"""Building AgentX v1 ``SystemEvent`` frames (protocol §1.2, §3).

Frames are plain dicts (they are built on the hot path of every delta, so no model validation
here); ``dumps`` turns one into the text frame sent on the wire.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]

# The numbering of a turn's frames (their top-level "seq"; streaming/frames.py numbers them, the
# SDK's cursors read them): frame i of attempt a of the turn whose user message has seq u is
# u * TURN_SPAN + (a - 1) * ATTEMPT_SPAN + i.
TURN_SPAN = 100_000  # seqs per turn (per user message)
ATTEMPT_SPAN = 10_000  # seqs per attempt of a turn: at most this many frames per attempt

# category of every pushed agent event we emit (protocol §3.1)
AGENT_EVENT_CATEGORY: dict[str, str] = {
    "message_start": "stream",
    "message_delta": "stream",
    "message_stop": "stream",
    "text_delta": "stream",
    "tool_use_start": "stream",
    "input_json_delta": "stream",
    "tool_use_stop": "stream",
    "tool_result": "stream",
    "error_received": "stream",
    "conversation_queued": "state",
    "conversation_start": "state",
    "conversation_thinking": "state",
    "conversation_responding": "state",
    "conversation_end": "state",
    "conversation_interrupted": "state",
    "tool_planned": "state",
    "tool_executing": "state",
    "tool_completed": "state",
    "tool_failed": "state",
    "error_occurred": "state",
    "assistant_message": "message",
    "tool_call_message": "message",
    "tool_result_message": "message",
    "error_message": "message",
    "turn_request": "turn",
    "turn_response": "turn",
    "interrupted": "lifecycle",
    # additive (not in AgentX): suspended turns (docs/protocol.md)
    "tool_approval_requested": "state",
    "client_tool_requested": "state",
    "turn_suspended": "state",
    # additive: a running tool call's progress, an MCP server that failed (docs/protocol.md)
    "tool_progress": "state",
    "mcp_server_failed": "state",
    # additive: a model call failed before answering and is retried after a wait (docs/protocol.md)
    "model_retry": "state",
    # additive: an MCP server's question to the user during a call (docs/protocol.md)
    "tool_elicitation": "state",
    "tool_elicitation_ended": "state",
}


@dataclass(frozen=True, slots=True)
class EventContext:
    containerId: str
    imageId: str
    agentId: str
    sessionId: str
    turnId: str | None = None

    def to_wire(self) -> Json:
        out = {
            "containerId": self.containerId,
            "imageId": self.imageId,
            "agentId": self.agentId,
            "sessionId": self.sessionId,
        }
        if self.turnId:
            out["turnId"] = self.turnId
        return out


def event(
    type_: str,
    data: Json,
    *,
    now_ms: int,
    source: str,
    category: str,
    intent: str = "notification",
    context: Json | None = None,
) -> Json:
    frame: Json = {
        "type": type_,
        "timestamp": now_ms,
        "data": data,
        "source": source,
        "category": category,
        "intent": intent,
    }
    if context is not None:
        frame["context"] = context
    return frame


def agent_event(type_: str, data: Json, *, now_ms: int, context: EventContext) -> Json:
    """A pushed agent-layer event: ``source: agent`` with the category of §3.1 and full context."""
    return event(
        type_,
        data,
        now_ms=now_ms,
        source="agent",
        category=AGENT_EVENT_CATEGORY[type_],
        context=context.to_wire(),
    )


def request(type_: str, request_id: str, data: Json, *, now_ms: int) -> Json:
    """A client's ``<type_>_request`` frame: ``requestId`` goes inside ``data`` (protocol §1.3)."""
    return event(
        f"{type_}_request",
        {**data, "requestId": request_id},
        now_ms=now_ms,
        source="command",
        category="request",
        intent="request",
    )


# Server-side subscriptions (docs/protocol.md): a request whose ``data`` carries
# ``"__subscribe": true`` asks the server to subscribe the caller to the sessions its response
# lists in ``__subscriptions``; a response whose server did carries ``"__subscribed": true``.
# Plain AgentX clients send neither and see neither.
SUBSCRIBE_KEY = "__subscribe"
SUBSCRIBED_KEY = "__subscribed"
# The requests whose responses list sessions (``__subscriptions``).
LISTS_SESSIONS = frozenset({"image_create", "image_get", "image_list"})


def response(request_type: str, data: Json, *, now_ms: int) -> Json:
    """The ``*_response`` to a ``*_request``; ``data`` must already hold ``requestId``."""
    return event(
        response_type(request_type),
        data,
        now_ms=now_ms,
        source="command",
        category="response",
        intent="result",
    )


def response_type(request_type: str) -> str:
    return request_type.removesuffix("_request") + "_response"


def system_error(
    message: str,
    *,
    now_ms: int,
    code: str,
    request_id: str | None = None,
    context: Json | None = None,
    details: Json | None = None,
) -> Json:
    data: Json = {"message": message, "severity": "error", "details": {**(details or {}), "code": code}}
    if request_id is not None:
        data["requestId"] = request_id
    return event("system_error", data, now_ms=now_ms, source="command", category="error", context=context)


def dumps(frame: Json | list[Json]) -> str:
    """A frame (or a JSON-RPC batch of answers) as compact JSON, non-ASCII kept."""
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False)


# Batched frames (streaming/batching.py): a client asks for them at the WebSocket upgrade, so the
# SDK needs these names without the streaming package.
FRAMES_PARAM = "frames"  # the upgrade's query parameter
BATCH = "batch"  # its value for the batched mode
SINGLE = "single"  # its value for one frame per message (the default, for completeness)
MAX_BATCH_BYTES = 32 * 1024  # API Gateway WebSocket: one billed unit, one frame
# A batched connection's text cadence (streaming/batch_cadence.py): ``?cadence=live`` (text within
# ~250 ms, the default) or ``?cadence=economy`` (text in 2-second windows: fewer billed messages).
CADENCE_PARAM = "cadence"  # the upgrade's query parameter
LIVE = "live"
ECONOMY = "economy"
CADENCES = (LIVE, ECONOMY)


__all__ = [
    "AGENT_EVENT_CATEGORY",
    "ATTEMPT_SPAN",
    "TURN_SPAN",
    "BATCH",
    "CADENCES",
    "CADENCE_PARAM",
    "ECONOMY",
    "LIVE",
    "FRAMES_PARAM",
    "MAX_BATCH_BYTES",
    "SINGLE",
    "LISTS_SESSIONS",
    "SUBSCRIBED_KEY",
    "SUBSCRIBE_KEY",
    "EventContext",
    "agent_event",
    "dumps",
    "event",
    "request",
    "response",
    "response_type",
    "system_error",
]
