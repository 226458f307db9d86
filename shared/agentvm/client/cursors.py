"""Per session, the seqs of the frames a client received (docs/protocol.md, "Resume").

The client's side of the resume contract: drop a frame whose seq was already received for its
session (a resume may deliver one twice), and resume each session from the highest seq received.

It also drops a frame of an attempt of a turn older than one already received (the seq's attempt
band, ``events.ATTEMPT_SPAN``): a node cut off from the cluster may still post its attempt's
last frames after the turn was resumed on another node. The new attempt starts over (it closes
the old attempt's message as interrupted), so nothing the app needs is lost by dropping them.
"""

from __future__ import annotations

from typing import Any

from agentvm.events import ATTEMPT_SPAN, TURN_SPAN


class SessionCursors:
    """Per session, the seqs of the frames received: what to resume from, what to drop as seen."""

    def __init__(self) -> None:
        self._seen: dict[str, set[int]] = {}
        self._last: dict[str, int] = {}
        self._attempts: dict[tuple[str, int], int] = {}  # (session, turn band) -> newest attempt band
        self.sessions: set[str] = set()  # sessions followed: subscribed to, or seen frames of

    def last_seq(self, session_id: str) -> int | None:
        return self._last.get(session_id)

    def accept(self, frame: dict[str, Any]) -> bool:
        """False for a frame whose seq was already received for its session, or that belongs to an
        older attempt of its turn than a frame already received (drop it)."""
        seq = frame.get("seq")
        session_id = (frame.get("context") or {}).get("sessionId")
        if not isinstance(seq, int) or not isinstance(session_id, str):
            return True  # responses, and the few session events outside any turn
        seen = self._seen.setdefault(session_id, set())
        if seq in seen:
            return False
        turn, attempt = seq // TURN_SPAN, seq % TURN_SPAN // ATTEMPT_SPAN
        newest = self._attempts.get((session_id, turn), attempt)
        if attempt < newest:
            return False
        self._attempts[(session_id, turn)] = attempt
        seen.add(seq)
        self.sessions.add(session_id)
        if seq > self._last.get(session_id, 0):
            self._last[session_id] = seq
        return True


__all__ = ["SessionCursors"]
