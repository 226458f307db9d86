"""AgentX 2.x events: a turn's frames as JSON-RPC ``stream.event`` notifications, and 2.x history.

Every turn is produced once, as the AgentX v1 frames of ``core.sink`` (numbered, logged, stored as
a frame map); a subscriber whose connection speaks v2 (``gateway.v2.rpc``) is sent each frame
rendered the 2.x way instead, by ``V2Renderer``, which reads the frames in order:

* the context names the agent ``instanceId`` (2.7+; ``agentId`` is kept for 2.0–2.6); raw model events are
  ``source: "runtime"`` (category as 2.x's runtime gives it), engine outputs ``source: "agent"``;
* ``message_persisted`` becomes ``turn_request {turnId, messageId, content: "", timestamp}``;
  ``conversation_end`` is followed by ``turn_response {turnId, messageId, duration, usage, model,
  stopReason, timestamp}`` (with the final step's real usage, where 2.x sends zeros);
* there is no ``tool_call_message``: a step's calls are parts of its ``assistant_message``, after
  its text (one message per step: a step without text gets one of its calls alone, right after its
  ``message_stop``, with the id of its first stored call, as ``v2_history`` folds the stored ones);
* ``error_occurred`` becomes 2.x's ``error {message, errorCode}`` (what 2.x clients render),
  ``interrupted`` becomes ``interrupted {reason: "user"}``, ``agent_registered`` /
  ``agent_unregistered`` become ``agent_created`` / ``agent_destroyed``, a ``system_error`` pushed
  to a session (storage unavailable) becomes ``agentx_error``; additive events (suspended turns,
  ``file_changed``) keep their names.

A rendered event keeps the ``seq`` of the frame it was made from, so resume works as in v1. Two
events made from one frame (``conversation_end`` then ``turn_response``; a text-less tool step's
``message_stop`` then its ``assistant_message``) share that seq and are sent together: an event is
identified by (seq, type). Rendering needs the frames before it (a step's calls, the turn's model
and start), so a renderer always reads an attempt's frames from its first (``FrameLog`` keeps one
per attempt; a resume primes one with the frames the client already has).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentvm.events import dumps
from agentvm.records import user_message_id_for

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agentvm.events import Json

# 2.x's runtime stamps its raw model events by name (AgentXRuntime.categorizeEvent).
_RAW = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "text_delta",
        "thinking_delta",
        "tool_use_start",
        "input_json_delta",
        "tool_use_stop",
        "tool_result",
        "error",
        "interrupted",
    }
)


def _raw_category(type_: str) -> str:
    if "message" in type_:
        return "message"
    if "tool" in type_:
        return "tool"
    if "error" in type_ or "interrupted" in type_:
        return "error"
    return "stream"


def v2_context(context: Json | None) -> Json | None:
    """A v1 ``context`` with the agent named ``instanceId`` (2.7+), and still ``agentId`` (2.0–2.6)."""
    if context is None:
        return None
    out: Json = {}
    for key, value in context.items():
        if key == "agentId":
            out["instanceId"] = value
        out[key] = value
    return out


class V2Renderer:
    """Reads one attempt's v1 frames in order; returns each one's 2.x events."""

    def __init__(self) -> None:
        self._saved_at: int | None = None
        self._message_id: str | None = None  # the user message the turn answers
        self._model: str | None = None
        self._stop_reason: str | None = None
        self._usage: Json | None = None
        self._calls: list[Json] = []  # the current step's stored tool-call messages
        self._text = False  # the current step streamed text

    def feed(self, frame: Json) -> list[Json]:
        type_, data = frame.get("type"), frame.get("data")
        rendered = self._render(str(type_), data if isinstance(data, dict) else {}, frame)
        context, seq = v2_context(frame.get("context")), frame.get("seq")
        out = []
        for item in rendered:  # in the order of a v1 SystemEvent's fields
            event: Json = {
                "type": item["type"],
                "timestamp": frame.get("timestamp", 0),
                "data": item["data"],
                "source": item["source"],
                "category": item["category"],
                "intent": "notification",
            }
            if context is not None:
                event["context"] = context
            if seq is not None:
                event["seq"] = seq
            out.append(event)
        return out

    # -- the mapping ---------------------------------------------------------------------------
    def _render(self, type_: str, data: Json, frame: Json) -> list[Json]:
        turn_id = (frame.get("context") or {}).get("turnId")
        if type_ == "message_persisted":
            self._saved_at = data.get("savedAt")
            self._message_id = data.get("messageId")
            body = {
                "turnId": turn_id,
                "messageId": self._message_id,
                "content": "",
                "timestamp": self._saved_at,
            }
            return [_agent("turn_request", body, "turn")]
        if type_ == "message_start":
            self._model = data.get("model", self._model)
            self._calls, self._text = [], False
            return [_raw(type_, data)]
        if type_ == "text_delta":
            self._text = self._text or bool(str(data.get("text", "")).strip())
            return [_raw(type_, data)]
        if type_ == "tool_call_message":
            self._calls.append(data)
            return []
        if type_ == "message_stop":
            self._stop_reason = data.get("stopReason", self._stop_reason)
            out = [_raw(type_, data)]
            # A step's text message follows its message_stop only for a tool step with text; any
            # other step's calls get their own message now (as the stored ones are folded).
            if self._calls and not (self._text and self._stop_reason == "tool_use"):
                out.append(_agent("assistant_message", _calls_message(self._calls), "message"))
                self._calls = []
            return out
        if type_ == "assistant_message":
            if isinstance(data.get("usage"), dict):
                self._usage = data["usage"]
            body = _with_calls(data, self._calls)
            self._calls = []
            return [_agent(type_, body, "message")]
        if type_ == "error_occurred":
            body = {"message": data.get("message", ""), "errorCode": data.get("code")}
            return [_raw("error", body)]
        if type_ == "interrupted":
            return [_raw("interrupted", {"reason": "user"})]
        if type_ == "conversation_end":
            response = self._turn_response(turn_id, frame)
            return [_agent(type_, data, "state"), _agent("turn_response", response, "turn")]
        if type_ == "agent_registered":
            body = {
                "instanceId": data.get("agentId"),
                "containerId": data.get("containerId"),
                "name": data.get("definitionName"),
                "createdAt": data.get("registeredAt"),
            }
            return [_lifecycle("agent_created", body)]
        if type_ == "agent_unregistered":
            body = {
                "instanceId": data.get("agentId"),
                "containerId": data.get("containerId"),
                "reason": data.get("reason"),
            }
            return [_lifecycle("agent_destroyed", body)]
        if type_ == "system_error":
            details = data.get("details")
            if not isinstance(details, dict):
                details = {}
            code = details.get("code", "internal_error")
            body = {
                "code": code,
                "category": "persistence" if str(code).startswith("storage") else "runtime",
                "message": data.get("message", ""),
                "recoverable": True,
            }
            return [{"type": "agentx_error", "data": body, "source": "runtime", "category": "error"}]
        if type_ in _RAW:
            return [_raw(type_, data)]
        # everything else keeps its name, data, source and category (state and message events,
        # the additive ones, lifecycle events outside turns)
        return [
            {
                "type": type_,
                "data": data,
                "source": frame.get("source", "agent"),
                "category": frame.get("category", "state"),
            }
        ]

    def _turn_response(self, turn_id: str | None, frame: Json) -> Json:
        now = int(frame.get("timestamp", 0))
        message_id = self._message_id or (user_message_id_for(turn_id) if turn_id else None)
        usage = self._usage or {"inputTokens": 0, "outputTokens": 0}
        return {
            "turnId": turn_id,
            "messageId": message_id,
            "duration": max(now - self._saved_at, 0) if self._saved_at is not None else 0,
            "usage": usage,
            "model": self._model,
            "stopReason": self._stop_reason or "end_turn",
            "timestamp": now,
        }


def _raw(type_: str, data: Json) -> Json:
    return {"type": type_, "data": data, "source": "runtime", "category": _raw_category(type_)}


def _agent(type_: str, data: Json, category: str) -> Json:
    return {"type": type_, "data": data, "source": "agent", "category": category}


def _lifecycle(type_: str, data: Json) -> Json:
    return {"type": type_, "data": data, "source": "runtime", "category": "lifecycle"}


def _parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def _with_calls(message: Json, calls: list[Json]) -> Json:
    """An assistant message with a step's stored calls as parts after its text."""
    if not calls:
        return dict(message)
    return {**message, "content": _parts(message.get("content")) + [c["toolCall"] for c in calls]}


def _calls_message(calls: list[Json]) -> Json:
    """The assistant message of a step that called tools and wrote nothing: its first call's id."""
    first = calls[0]
    out: Json = {
        "id": first.get("id"),
        "role": "assistant",
        "subtype": "assistant",
        "content": [c["toolCall"] for c in calls],
        "timestamp": first.get("timestamp"),
    }
    if first.get("parentId") is not None:
        out["parentId"] = first["parentId"]
    return out


def v2_history(messages: Iterable[Json]) -> list[Json]:
    """Messages as ``image_messages`` returns them (reading order: a step's text message, then its
    tool-call messages) the 2.x way: each step's calls folded into its text message, as parts after
    the text, or into one message of their own, with the first call's id, for a step that wrote
    nothing (as ``V2Renderer`` sends them live)."""
    out: list[Json] = []
    text: Json | None = None  # the last assistant message, until what follows it is known
    calls: list[Json] = []

    def flush() -> None:
        nonlocal text
        if text is not None:
            out.append(_with_calls(text, calls))
        elif calls:
            out.append(_calls_message(calls))
        text = None
        calls.clear()

    for message in messages:
        if message.get("subtype") == "tool-call":
            owner = text if text is not None else (calls[0] if calls else None)
            if owner is not None and owner.get("parentId") != message.get("parentId"):
                flush()  # another turn's calls
            calls.append(message)
            continue
        flush()
        if message.get("subtype") == "assistant":
            text = message
        else:
            out.append(message)
    flush()
    return out


def send_result(
    *,
    rpc_id: str | int | None,
    instance_id: str,
    image_id: str,
    turn_id: str,
    status: str,
    error: Json | None = None,
) -> str:
    """The JSON-RPC response to a ``message.send`` from the turn's worker, when the turn ends
    (``completed``, ``failed``, ``interrupted``) or suspends (``suspended``)."""
    result = send_result_body(
        instance_id=instance_id, image_id=image_id, turn_id=turn_id, status=status, error=error
    )
    return dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})


def send_result_body(
    *, instance_id: str, image_id: str, turn_id: str, status: str, error: Json | None = None
) -> Json:
    """``message.send``'s result: the instance (also as ``agentId``, 2.0–2.6), image, turn, status."""
    result: Json = {
        "instanceId": instance_id,
        "agentId": instance_id,
        "imageId": image_id,
        "turnId": turn_id,
        "status": status,
    }
    if error is not None:
        result["error"] = error
    return result


def notification(event: Json) -> str:
    """One 2.x event as the JSON-RPC notification that carries it (topic: its session, or global)."""
    context = event.get("context") or {}
    topic = context.get("sessionId") or "global"
    return dumps({"jsonrpc": "2.0", "method": "stream.event", "params": {"topic": topic, "event": event}})


def render_frame(frame: Json) -> list[str]:
    """A frame outside a turn (lifecycle, errors pushed to a session) as 2.x notifications."""
    return [notification(e) for e in V2Renderer().feed(frame)]


def render_payload(payload: str) -> list[str]:
    return render_frame(json.loads(payload))


__all__ = [
    "V2Renderer",
    "notification",
    "render_frame",
    "render_payload",
    "send_result",
    "send_result_body",
    "v2_context",
    "v2_history",
]
