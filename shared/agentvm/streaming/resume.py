"""Resuming a session's stream: ``subscribe`` with ``afterSeq`` (docs/protocol.md, "Resume").

1. The caller is sent, from storage, every frame above its cursor of the session's finished turns
   (``frames.replay``: the text it misses as one ``text_delta``), before it is subscribed: no live
   frame of a later turn can overtake them.
2. It is subscribed with its cursor advanced past them. The running turn's worker sees the new
   subscriber at its next subscriber lookup and sends it the frames of its turn above that cursor
   from its in-memory log, then the live stream (``core.sink``).
3. The finished turns are looked up once more: a turn that ended between (1) and (2) is sent
   too, frame by frame as it was sent, because its worker may have caught the caller up as well;
   the client drops the seqs it has already seen (the protocol's contract).

A connection that speaks AgentX v2 is sent the same frames rendered as 2.x notifications
(``streaming.agentx_v2_events``): the renderer first reads the turn's frames the client already has
(rebuilt as sent), so what it renders above the cursor is what the live stream sent.

Reads per resume (no write but the subscription's): one Query for the messages from the cursor's
turn on (at most the history window), and one GetItem per user message among them; twice.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.errors import ConnectionGone
from agentvm.messages import UserMessage, chains
from agentvm.ports import PROTOCOL_V1, PROTOCOL_V2
from agentvm.records import TERMINAL, turn_id_for
from agentvm.streaming.agentx_v2_events import V2Renderer, notification
from agentvm.streaming.batching import pack
from agentvm.streaming.frames import TURN_SPAN, last_seq, parts, replay

# A suspended turn's frames up to ``turn_suspended`` are stored like a finished turn's: a client
# that reconnects while the turn waits gets the approval or client-tool request again. A running
# record holds frames only when it continues a suspended turn: those of its attempts before the
# running one, which are over (``frames``, "Continued turns"); its worker sends the rest.
REPLAYABLE = TERMINAL | {"suspended", "running"}

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.events import Json
    from agentvm.messages import Message
    from agentvm.ports import ConnectionInfo
    from agentvm.records import SessionRecord, TurnRecord
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.resume")


async def subscribe_after(
    rt: Runtime,
    connection_id: str,
    session: SessionRecord,
    after_seq: int,
    *,
    protocol: str = PROTOCOL_V1,
    batch: bool = False,
    known: ConnectionInfo | None = None,
) -> None:
    """Catch ``connection_id`` up on ``session`` from ``after_seq`` and subscribe it (steps 1-3).
    ``batch``: the connection takes batched frames (each turn's replay is one message). ``known``:
    the connection as this frame read it (``Connections.subscribe``)."""
    v2 = protocol == PROTOCOL_V2
    try:
        cursor = await _replay_finished(
            rt, connection_id, session, after_seq, merge_text=True, v2=v2, batch=batch
        )
        await rt.connections.subscribe(connection_id, session.sessionId, after_seq=cursor, known=known)
        await _replay_finished(rt, connection_id, session, cursor, merge_text=False, v2=v2, batch=batch)
    except ConnectionGone:
        log.info("caller gone while resuming", extra={"connection_id": connection_id})


@dataclass(frozen=True)
class FinishedTurn:
    """A turn of the session whose frames are stored (ended, or suspended), with the user message
    it answers and the messages that answered it (where its text comes from on replay)."""

    turn: TurnRecord
    user: UserMessage
    replies: Sequence[Message]

    def replay(self, rt: Runtime, session: SessionRecord, *, after: int, merge_text: bool) -> list[str]:
        """Its frames above ``after``, serialised (``frames.replay``)."""
        return replay(
            self.turn,
            session=session,
            user=self.user,
            replies=self.replies,
            after=after,
            now_ms=rt.clock.now_ms(),
            merge_text=merge_text,
        )


async def finished_turns_after(
    rt: Runtime, session: SessionRecord, after: int, *, band: int | None = None
) -> list[FinishedTurn]:
    """The session's finished turns from the cursor ``after``'s turn on, oldest first (only the one
    answering user message ``band``, if given). A turn still running is left out (its worker sends
    it live), but for the attempts a running continuation continues, which are over. (Only a turn
    left behind by a dead job can be unfinished before a finished one: turns of a session run in
    order.)"""
    # The cursor's turn answers the user message with seq ``after // TURN_SPAN``: read from there.
    window = await rt.store.recent_messages_after(
        session.sessionId, max(after // TURN_SPAN - 1, 0), rt.turns.history_window
    )
    replies = chains([item.message for item in window])
    out: list[FinishedTurn] = []
    for item in window:
        user = item.message
        if not isinstance(user, UserMessage) or (band is not None and item.seq != band):
            continue
        turn = await rt.store.get_turn(turn_id_for(user.id))
        if turn is None or turn.status not in REPLAYABLE or turn.frames is None:
            continue
        out.append(FinishedTurn(turn, user, replies.get(user.id, ())))
    return out


async def _replay_finished(
    rt: Runtime,
    connection_id: str,
    session: SessionRecord,
    after: int,
    *,
    merge_text: bool,
    v2: bool = False,
    batch: bool = False,
) -> int:
    """Push the frames above ``after`` of the finished turns from the cursor's turn on; returns the
    cursor past them."""
    finished = await finished_turns_after(rt, session, after)
    if not finished:
        return await _clamped(rt, session.sessionId, after)
    cursor = after
    for done in finished:
        assert done.turn.frames is not None  # finished_turns_after keeps only turns with frames
        if last_seq(done.turn.frames) <= cursor:
            continue
        payloads = done.replay(rt, session, after=cursor, merge_text=merge_text)
        if v2:
            starts = {part.firstSeq for part in parts(done.turn.frames)}
            seen = done.replay(rt, session, after=min(starts) - 1, merge_text=False)
            payloads = _rendered(seen, payloads, cursor, starts)
        for payload in pack(payloads) if batch else payloads:
            await rt.push.send(connection_id, payload)
        cursor = last_seq(done.turn.frames)
    return cursor


def _rendered(whole: list[str], missed: list[str], cursor: int, starts: set[int]) -> list[str]:
    """``missed`` (frames above ``cursor``) as v2 notifications, rendered after the frames of
    ``whole`` (the turn as sent) the client has: a step's calls, the turn's model and start. Each
    attempt is rendered from its first frame (a seq of ``starts``) on, as its worker did."""
    renderer = V2Renderer()

    def fed(frame: Json) -> list[Json]:
        nonlocal renderer
        if frame.get("seq") in starts:  # an attempt's first frame: a renderer of its own
            renderer = V2Renderer()
        return renderer.feed(frame)

    for payload in whole:
        frame = json.loads(payload)
        if frame.get("seq", 0) > cursor:
            break
        fed(frame)
    return [notification(e) for payload in missed for e in fed(json.loads(payload))]


async def _clamped(rt: Runtime, session_id: str, after: int) -> int:
    """A cursor beyond every message of the session replays nothing, and must not hold back the
    turns still to come: it is lowered to the end of the newest message's seq band."""
    newest = await rt.store.recent_messages_after(session_id, 0, 1)
    last = newest[-1].seq if newest else 0
    return min(after, (last + 1) * TURN_SPAN - 1)


__all__ = ["FinishedTurn", "finished_turns_after", "subscribe_after"]
