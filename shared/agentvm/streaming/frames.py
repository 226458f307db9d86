"""Sequence numbers of a session's pushed frames, the log of one turn's frames, and their replay.

Numbering costs no write: a turn's frames are numbered from the seq its user message got when it
was stored (``AppendResult.seq``, carried in the ``TurnJob``). Frame ``i`` (1, 2, ... in send order)
of the turn's attempt ``a`` has seq ``userSeq * TURN_SPAN + (a - 1) * ATTEMPT_SPAN + i``, as the
top-level ``"seq"`` of the frame. The turns of a session run one at a time in user-message order,
so seqs grow in delivery order. A retried attempt (its worker died mid-turn) numbers above the one
before it: a client that saw frames of the dead attempt must not drop the new ones as duplicates.

``FrameLog`` is the worker's record of every frame of the attempt: the serialised frames, which the
sink sends to each subscriber from the seq it already has (a subscriber that resumed mid-turn is
caught up from here), and the compact ``FrameMap`` stored with the turn's terminal status.
``replay`` rebuilds a finished turn's frames from that map and the stored messages.

Continued turns. A turn that waits on a tool call (an approval, a client's result, a sandbox job)
ends its attempt ``suspended``, its map stored; the continuation is a later attempt that numbers
its frames right after that map's last seq (``turns.status.first_seq_of``). Its ``FrameLog`` is
made with the map of what the turn sent so far (``continues``): its text lengths go on from that
map's (they index the turn's whole text), and its own map carries the earlier attempts' maps in
``earlier``, so the map stored at the turn's end (or next suspension) is the whole turn: ``parts``
lists one map per attempt, in seq order, and ``replay`` rebuilds them all, each frame once.
While the continuation runs, its ``running`` record keeps the map it continues: if its worker dies,
the retry (numbered from its own band, as any retry) continues that same map, so the retry's
frames replace only the dead attempt's, which were never stored.
"""

from __future__ import annotations

import bisect
import json
from typing import TYPE_CHECKING

from agentvm.events import ATTEMPT_SPAN, TURN_SPAN, EventContext, agent_event, dumps, event
from agentvm.messages import (
    AssistantMessage,
    ErrorMessage,
    ToolCallMessage,
    ToolResultMessage,
    message_to_wire,
    text_of,
)
from agentvm.records import FrameMap
from agentvm.streaming.agentx_v2_events import V2Renderer, notification

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.events import Json
    from agentvm.messages import Message, UserMessage
    from agentvm.records import SessionRecord, TurnRecord

MAX_ATTEMPTS = TURN_SPAN // ATTEMPT_SPAN  # a later retry numbers in the last band again

# Frames rebuilt from stored messages on replay; the map keeps only their type (or, for frames
# emitted with a ``ref``, the id of the stored message their data comes from).
FROM_STORAGE = frozenset({"message_persisted", "assistant_message", "error_message", "error_occurred"})
REF = "$ref"
# Frames that open a model message: a batched subscriber may get them with the message's first
# text (which comes with ``conversation_responding``) rather than on their own (streaming.batch_cadence).
WAIT_FOR_TEXT = frozenset({"message_persisted", "message_start", "conversation_start"})


def message_frame_data(kind: str, message: Message) -> Json | None:
    """The ``data`` of a frame that is made from one stored message: the same function builds the
    live frame and its replay, so a resumed client sees exactly what was sent."""
    if kind in ("assistant_message", "tool_call_message", "tool_result_message", "error_message"):
        return message_to_wire(message)
    if isinstance(message, ToolCallMessage):
        call = message.toolCall
        if kind == "tool_use_stop":
            return {"toolCallId": call.id, "toolName": call.name, "input": dict(call.input)}
        if kind == "input_json_delta":
            return {"partialJson": json.dumps(call.input, ensure_ascii=False)}
    if isinstance(message, ToolResultMessage):
        result = message.toolResult
        value = result.output.value
        failed = result.output.type in ("error-text", "error-json", "execution-denied")
        rich: Json = {}
        if result.output.type == "content":  # text stays the result; the blocks come beside it
            from agentvm.agent.history import tool_result_of

            rich = {"content": value}
            value = tool_result_of(message).content
        if result.output.structuredContent is not None:
            rich["structuredContent"] = result.output.structuredContent
        if kind == "tool_result":
            # toolName: additive (AgentX's tool_result has none): a client shows whose result it is
            return {
                "toolCallId": message.toolCallId, "toolName": result.name, "result": value, "isError": failed,
                **rich,
            }  # fmt: skip
        if kind == "tool_completed":
            # the blocks once per result are enough (tool_result, tool_result_message): frames are billed
            lean = {k: v for k, v in rich.items() if k != "content"}
            return {"toolId": message.toolCallId, "toolName": result.name, "result": value, **lean}
        if kind == "tool_failed":
            return {"toolId": message.toolCallId, "toolName": result.name, "error": str(value)}
    return None


def first_seq(user_seq: int, attempt: int) -> int:
    """The seq of the first frame of ``attempt`` (1-based) of the turn answering message ``user_seq``."""
    band = min(max(attempt, 1), MAX_ATTEMPTS) - 1
    return user_seq * TURN_SPAN + band * ATTEMPT_SPAN + 1


def last_seq(frames: FrameMap) -> int:
    """The seq of the last frame of the turn's last attempt (the map's own)."""
    return frames.firstSeq + len(frames.kinds) - 1


def parts(frames: FrameMap) -> list[FrameMap]:
    """The turn's attempts whose frames it keeps, in seq order: the suspended ones a continuation
    went on from (``earlier``), then the map's own (read its ``firstSeq``, ``kinds`` and ``data``)."""
    return [*frames.earlier, frames]


def text_length(frames: FrameMap) -> int:
    """The length of the turn's text once its last text frame so far was sent (0: none yet)."""
    for part in reversed(parts(frames)):
        for kind in reversed(part.kinds):
            if isinstance(kind, int):
                return kind
    return 0


def persisted_event(
    *, session_id: str, message_id: str, saved_at: int, now_ms: int, context: EventContext
) -> Json:
    """``message_persisted``: the first frame of every turn (the user message is stored)."""
    return event(
        "message_persisted",
        {"sessionId": session_id, "messageId": message_id, "savedAt": saved_at},
        now_ms=now_ms,
        source="session",
        category="persist",
        intent="result",
        context=context.to_wire(),
    )


def error_occurred_data(error: ErrorMessage) -> Json:
    return {"code": error.errorCode or "unknown_error", "message": error.content, "recoverable": True}


class FrameLog:
    """Every frame of one attempt of a turn, numbered from ``first`` in the order they were added.

    ``continues``: the map of what the turn sent before this attempt, when it continues a suspended
    turn (the module's "Continued turns"); its frames are not sent again, but kept in the map."""

    def __init__(self, first: int, *, agent_id: str, continues: FrameMap | None = None) -> None:
        self.first = first
        self._agent_id = agent_id
        self._earlier = [] if continues is None else [_alone(part) for part in parts(continues)]
        self._payloads: list[str] = []
        self._kinds: list[str | int] = []
        self._data: dict[str, Json] = {}
        self._text_len = 0 if continues is None else text_length(continues)
        # The same frames rendered for AgentX v2 subscribers, made the first time one asks.
        self._v2: V2Renderer | None = None
        self._v2_seqs: list[int] = []
        self._v2_payloads: list[str] = []
        self._v2_read = 0  # frames rendered so far

    def __len__(self) -> int:
        return len(self._payloads)

    @property
    def last(self) -> int:
        """The seq of the newest frame (``first - 1`` while there is none)."""
        return self.first + len(self._payloads) - 1

    def add(self, frame: Json, *, ref: str | None = None) -> int:
        """Number ``frame`` (sets its ``seq``), serialise and keep it; returns the seq.

        ``ref``: the id of the stored message the frame's data is made from (``message_frame_data``);
        the map keeps that id instead of the data."""
        index = len(self._payloads)
        seq = frame["seq"] = self.first + index
        type_ = frame["type"]
        if type_ == "text_delta":
            self._text_len += len(frame["data"]["text"])
            self._kinds.append(self._text_len)
        else:
            self._kinds.append(type_)
            if ref is not None:
                self._data[str(index)] = {REF: ref}
            elif type_ not in FROM_STORAGE and frame["data"]:
                self._data[str(index)] = frame["data"]
        self._payloads.append(dumps(frame))
        return seq

    def payloads(self, after: int, upto: int) -> list[str]:
        """The serialised frames with ``after < seq <= upto``, in order."""
        lo = max(after + 1 - self.first, 0)
        hi = upto - self.first + 1
        return self._payloads[lo:hi] if hi > lo else []

    def urgency(self, after: int, upto: int) -> str:
        """What the frames with ``after < seq <= upto`` are, for a batched subscriber's cadence
        (``streaming.batch_cadence``): ``"start"`` (only the frames that open a message, which may wait for
        its first text), ``"text"`` (text deltas, maybe with those), else ``"urgent"``."""
        lo = max(after + 1 - self.first, 0)
        kinds = self._kinds[lo : upto - self.first + 1]
        if not all(isinstance(kind, int) or kind in WAIT_FOR_TEXT for kind in kinds):
            return "urgent"
        return "text" if any(isinstance(kind, int) for kind in kinds) else "start"

    def v2_payloads(self, after: int, upto: int) -> list[str]:
        """``payloads`` as AgentX v2 notifications (``streaming.agentx_v2_events``): every frame
        with ``after < seq <= upto`` rendered, in order (two notifications may share a seq)."""
        if self._v2 is None:
            self._v2 = V2Renderer()
        while self._v2_read < len(self._payloads):
            for rendered in self._v2.feed(json.loads(self._payloads[self._v2_read])):
                self._v2_seqs.append(rendered["seq"])
                self._v2_payloads.append(notification(rendered))
            self._v2_read += 1
        lo = bisect.bisect_right(self._v2_seqs, after)
        hi = bisect.bisect_right(self._v2_seqs, upto)
        return self._v2_payloads[lo:hi]

    def frame_map(self) -> FrameMap:
        """This attempt's map, with the maps of the attempts it continues (``earlier``)."""
        return FrameMap(
            firstSeq=self.first,
            kinds=list(self._kinds),
            data=dict(self._data),
            agentId=self._agent_id,
            earlier=list(self._earlier),
        )


def _alone(part: FrameMap) -> FrameMap:
    """One attempt's map without the maps it continues (``earlier`` holds them flat)."""
    return part if not part.earlier else part.model_copy(update={"earlier": []})


def replay(
    turn: TurnRecord,
    *,
    session: SessionRecord,
    user: UserMessage,
    replies: Sequence[Message],
    after: int,
    now_ms: int,
    merge_text: bool,
) -> list[str]:
    """The frames of a finished ``turn`` with ``seq > after``, serialised, as they were sent: every
    attempt of its map (``parts``: a continued turn's suspended attempts, then its last), in order.

    Text comes from the stored reply (``replies``: the messages answering ``user``). With
    ``merge_text`` the text the client misses is one ``text_delta`` with the seq of the turn's last
    text frame (fewer WebSocket messages); without, every text frame is rebuilt as it was sent,
    with its own seq, so that frames the worker might also send are exactly these (duplicates).
    """
    frames = turn.frames
    if frames is None:
        return []
    context = EventContext(
        containerId=session.containerId,
        imageId=session.imageId,
        agentId=frames.agentId,
        sessionId=session.sessionId,
        turnId=turn.turnId,
    )
    reply = next((m for m in replies if isinstance(m, AssistantMessage)), None)
    error = next((m for m in replies if isinstance(m, ErrorMessage)), None)
    by_id = {m.id: m for m in replies}
    # The turn's text frames carry the running length of all its text: every step's, in order.
    text = "".join(text_of(m.content) for m in replies if isinstance(m, AssistantMessage))
    # (seq, kind, data) of every frame kept, in seq order: the attempts' maps one after the other
    kept = [
        (part.firstSeq + index, kind, part.data.get(str(index)))
        for part in parts(frames)
        for index, kind in enumerate(part.kinds)
    ]
    kinds = [kind for _seq, kind, _data in kept]
    # Text is merged per run of text frames (``conversation_responding`` does not break a run; a
    # tool step's frames do, so each step's text is replayed where it was sent).
    run_ends = {
        i for i, kind in enumerate(kinds) if isinstance(kind, int) and not isinstance(_next(kinds, i), int)
    }
    run_start = 0  # where the current run of text frames starts
    out: list[str] = []
    sent = 0  # the client's text: up to the last text frame at or below the cursor
    start = 0  # where the current text frame starts
    for index, (seq, kind, data) in enumerate(kept):
        if isinstance(kind, int):
            if seq <= after:
                sent = kind
            elif not merge_text or index in run_ends:
                piece = text[(max(sent, run_start) if merge_text else start) : kind]
                if piece:
                    delta = agent_event("text_delta", {"text": piece}, now_ms=now_ms, context=context)
                    out.append(_seal(delta, seq))
            start = kind
            if index in run_ends:
                run_start = kind
            continue
        if seq <= after:
            continue
        if data is not None and REF in data:
            source = by_id.get(data[REF])
            body = None if source is None else message_frame_data(kind, source)
            frame = None if body is None else agent_event(kind, body, now_ms=now_ms, context=context)
        else:
            frame = _rebuild(kind, data, turn, user, reply, error, context, now_ms)
        if frame is not None:
            out.append(_seal(frame, seq))
    return out


def _next(kinds: list[str | int], index: int) -> str | int | None:
    """The kind of the frame after ``index``, ``conversation_responding`` skipped."""
    for kind in kinds[index + 1 :]:
        if kind != "conversation_responding":
            return kind
    return None


def _rebuild(
    kind: str,
    data: Json | None,
    turn: TurnRecord,
    user: UserMessage,
    reply: AssistantMessage | None,
    error: ErrorMessage | None,
    context: EventContext,
    now_ms: int,
) -> Json | None:
    if kind == "message_persisted":
        return persisted_event(
            session_id=turn.sessionId,
            message_id=user.id,
            saved_at=user.timestamp,
            now_ms=now_ms,
            context=context,
        )
    if kind == "assistant_message":
        body = None if reply is None else message_to_wire(reply)
    elif kind == "error_message":
        body = None if error is None else message_to_wire(error)
    elif kind == "error_occurred":
        body = None if error is None else error_occurred_data(error)
    else:
        body = data if data is not None else {}
    return None if body is None else agent_event(kind, body, now_ms=now_ms, context=context)


def _seal(frame: Json, seq: int) -> str:
    frame["seq"] = seq
    return dumps(frame)


__all__ = [
    "ATTEMPT_SPAN",
    "FROM_STORAGE",
    "REF",
    "MAX_ATTEMPTS",
    "TURN_SPAN",
    "FrameLog",
    "error_occurred_data",
    "first_seq",
    "last_seq",
    "message_frame_data",
    "parts",
    "persisted_event",
    "replay",
    "text_length",
]
