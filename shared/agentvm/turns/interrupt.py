"""The one interrupt: stop a session's active turn (``agent_interrupt``, v1 and v2's
``instance.interrupt``, the ``interrupt`` concurrency policy of ``message_send``) or a listed set
of turns (``POST /v1/turns/cancel``, any number at once), or one turn by its id (A2A's
``CancelTask``).

**How a turn is stopped.** Its interrupt mark in the store (one per turn, so several turns of one
session can be stopped at once), the in-process signal (``rt.signals``), and for a suspended turn
the cancellation of its waits, which wakes it to end: nothing runs that would see the mark. The
turn's worker tells the subscribers (``interrupted``, numbered in the turn's stream) when it sees
the mark: a running turn stops streaming within a flush (locally at once, on AWS within
``cancel_poll_ms``), keeps its partial reply and ends ``interrupted``; a queued one ends
``interrupted`` as soon as a worker takes it, without calling the model.

**A live turn with no job** (``turns.orphans``) is ended ``interrupted`` at once instead: no worker
would ever see its mark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.agent.history import pending_user_ids
from agentvm.records import TERMINAL, turn_id_for
from agentvm.turns import orphans as orphan_turns
from agentvm.turns.waits import cancel_turn_waits

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.observability.running import LiveTurn
    from agentvm.records import ImageRecord, TurnRecord
    from agentvm.runtime import Runtime


async def active_turn(
    rt: Runtime, tenant_id: str, image: ImageRecord, *, grace_ms: int = orphan_turns.GRACE_MS
) -> TurnRecord | None:
    """The oldest turn of the image's session that is queued, running or suspended, if any.

    Unanswered user messages in the recent window are the candidates; their turn records say
    which are still live (an interrupted turn with no text leaves its message unanswered). A live
    record with no job behind it (``turns.orphans``) is ended here instead of returned.
    """
    window = await rt.store.recent_messages(image.sessionId, rt.turns.history_window)
    for user_id in pending_user_ids(window):
        turn = await rt.store.get_turn(turn_id_for(user_id))
        if turn is None or turn.status in TERMINAL:
            continue
        if await _ended_if_jobless(rt, turn, tenant_id, image.containerId, grace_ms=grace_ms):
            continue
        return turn
    return None


async def interrupt_image(rt: Runtime, tenant_id: str, image: ImageRecord) -> bool:
    """Stop the active turn of the image's session; False if none was live."""
    turn = await active_turn(rt, tenant_id, image, grace_ms=0)
    if turn is None:
        return False
    await _stop(rt, image.sessionId, turn.turnId, turn.status, "the turn was interrupted")
    return True


async def interrupt_turn(rt: Runtime, tenant_id: str, image: ImageRecord, turn_id: str) -> TurnRecord | None:
    """Stop one turn of the image's session (the A2A ``CancelTask``), found by its id; the record
    as it was, or None if the session has no such turn (another session's, another tenant's: the
    same None). A turn that ended already is left as it is."""
    if image.tenantId != tenant_id:
        return None
    turn = await rt.store.get_turn(turn_id)
    if turn is None or turn.sessionId != image.sessionId:
        return None
    if turn.status in TERMINAL:
        return turn
    if not await _ended_if_jobless(rt, turn, tenant_id, image.containerId, grace_ms=0):
        await _stop(rt, image.sessionId, turn.turnId, turn.status, "the turn was interrupted")
    return turn


async def interrupt_turns(
    rt: Runtime, tenant_id: str, turns: Sequence[LiveTurn], *, reason: str
) -> list[str]:
    """Stop these turns (the tenant's, listed just now by ``observability.running.live_turns``);
    returns the ids asked to stop."""
    stopped = []
    for turn in turns:
        mark = turn.mark
        if mark.tenant_id != tenant_id:  # never another tenant's (the listing is the tenant's)
            continue
        if turn.record is not None and await _ended_if_jobless(
            rt, turn.record, tenant_id, mark.container_id, grace_ms=0
        ):
            stopped.append(mark.turn_id)
            continue
        await _stop(rt, mark.session_id, mark.turn_id, turn.status, reason)
        stopped.append(mark.turn_id)
    return stopped


async def _stop(rt: Runtime, session_id: str, turn_id: str, status: str, reason: str) -> None:
    """Mark the turn cancelled (store + in-process signal)."""
    await rt.store.request_cancel(session_id, turn_id)
    rt.signals.fire(turn_id)
    if status == "suspended":  # nothing runs to see the mark: wake the turn up to end it
        await cancel_turn_waits(rt, turn_id, reason)


async def _ended_if_jobless(
    rt: Runtime, turn: TurnRecord, tenant_id: str, container_id: str, *, grace_ms: int
) -> bool:
    """End a live turn no worker will ever take (``interrupted`` for an interrupt, ``grace_ms``
    0; else ``failed``); True if it was one."""
    if not await orphan_turns.has_no_job(rt, turn, grace_ms=grace_ms):
        return False
    await orphan_turns.end(
        rt,
        turn,
        tenant_id=tenant_id,
        container_id=container_id,
        status="interrupted" if grace_ms == 0 else "failed",
    )
    return True


__all__ = ["active_turn", "interrupt_image", "interrupt_turn", "interrupt_turns"]
