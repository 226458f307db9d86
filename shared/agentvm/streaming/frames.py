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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.events import EventContext, agent_event, dumps, event
from agentvm.messages import AssistantMessage, ErrorMessage, message_to_wire, text_of
from agentvm.records import FrameMap

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.events import Json
    from agentvm.messages import Message, UserMessage
    from agentvm.records import SessionRecord, TurnRecord

TURN_SPAN = 100_000  # seqs per turn (per user message)
ATTEMPT_SPAN = 10_000  # seqs per attempt of a turn: at most this many frames per attempt
MAX_ATTEMPTS = TURN_SPAN // ATTEMPT_SPAN  # a later retry numbers in the last band again

# Frames rebuilt from stored messages on replay; the map keeps only their type.
FROM_STORAGE = frozenset({"message_persisted", "assistant_message", "error_message", "error_occurred"})


def first_seq(user_seq: int, attempt: int) -> int:
    """The seq of the first frame of ``attempt`` (1-based) of the turn answering message ``user_seq``."""
    band = min(max(attempt, 1), MAX_ATTEMPTS) - 1
    return user_seq * TURN_SPAN + band * ATTEMPT_SPAN + 1


def last_seq(frames: FrameMap) -> int:
    return frames.firstSeq + len(frames.kinds) - 1


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
    """Every frame of one attempt of a turn, numbered from ``first`` in the order they were added."""

    def __init__(self, first: int, *, agent_id: str) -> None:
        self.first = first
        self._agent_id = agent_id
        self._payloads: list[str] = []
        self._kinds: list[str | int] = []
        self._data: dict[str, Json] = {}
        self._text_len = 0

    def __len__(self) -> int:
        return len(self._payloads)

    @property
    def last(self) -> int:
        """The seq of the newest frame (``first - 1`` while there is none)."""
        return self.first + len(self._payloads) - 1

    def add(self, frame: Json) -> int:
        """Number ``frame`` (sets its ``seq``), serialise and keep it; returns the seq."""
        index = len(self._payloads)
        seq = frame["seq"] = self.first + index
        type_ = frame["type"]
        if type_ == "text_delta":
            self._text_len += len(frame["data"]["text"])
            self._kinds.append(self._text_len)
        else:
            self._kinds.append(type_)
            if type_ not in FROM_STORAGE and frame["data"]:
                self._data[str(index)] = frame["data"]
        self._payloads.append(dumps(frame))
        return seq

    def payloads(self, after: int, upto: int) -> list[str]:
        """The serialised frames with ``after < seq <= upto``, in order."""
        lo = max(after + 1 - self.first, 0)
        hi = upto - self.first + 1
        return self._payloads[lo:hi] if hi > lo else []

    def frame_map(self) -> FrameMap:
        return FrameMap(
            firstSeq=self.first, kinds=list(self._kinds), data=dict(self._data), agentId=self._agent_id
        )


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
    """The frames of a finished ``turn`` with ``seq > after``, serialised, as they were sent.

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
    text = text_of(reply.content) if reply is not None else ""
    texts = [i for i, kind in enumerate(frames.kinds) if isinstance(kind, int)]
    last_text = texts[-1] if texts else -1
    out: list[str] = []
    sent = 0  # the client's text: up to the last text frame at or below the cursor
    start = 0  # where the current text frame starts
    for index, kind in enumerate(frames.kinds):
        seq = frames.firstSeq + index
        if isinstance(kind, int):
            if seq <= after:
                sent = kind
            elif not merge_text or index == last_text:
                piece = text[(sent if merge_text else start) : kind]
                if piece:
                    delta = agent_event("text_delta", {"text": piece}, now_ms=now_ms, context=context)
                    out.append(_seal(delta, seq))
            start = kind
            continue
        if seq <= after:
            continue
        frame = _rebuild(kind, frames.data.get(str(index)), turn, user, reply, error, context, now_ms)
        if frame is not None:
            out.append(_seal(frame, seq))
    return out


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
    "MAX_ATTEMPTS",
    "TURN_SPAN",
    "FrameLog",
    "error_occurred_data",
    "first_seq",
    "last_seq",
    "persisted_event",
    "replay",
]
