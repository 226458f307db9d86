"""A turn's stored status and the answer that waits on it.

``set_status`` writes the turn record (``running`` naming its poller, ``suspended``, or a terminal
status with the frame map of what the attempt sent) and takes an ended turn off the operator's
running list; ``attempt_of`` and ``first_seq_of`` say which attempt this is and where its frames
are numbered from, ``continued_frames`` what the turn sent before it (a continuation's running
record keeps that, ``streaming.frames``, "Continued turns"); ``answer_send`` answers the AgentX v2
``message.send`` that waits for the turn.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentvm.records import TERMINAL, TurnRecord
from agentvm.streaming.agentx_v2_events import send_result
from agentvm.streaming.frames import first_seq, last_seq

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.records import FrameMap, TurnJob, TurnStatus
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.turns")


async def set_status(
    rt: Runtime,
    job: TurnJob,
    status: TurnStatus,
    *,
    attempt: int = 0,
    frames: FrameMap | None = None,
    poller: str | None = None,
) -> None:
    """Store the turn's status: with the attempt that writes it, the frame map of what a suspended
    or ended turn sent (or, running, what it sent before this attempt), and the poller of a running
    one. An ended turn leaves the operator's list of running turns."""
    await rt.store.put_turn(
        TurnRecord(
            turnId=job.turnId,
            sessionId=job.sessionId,
            status=status,
            updatedAt=rt.clock.now_ms(),
            userSeq=job.userSeq,
            attempt=attempt,
            frames=frames,
            poller=poller,
        )
    )
    if status in TERMINAL and rt.running is not None:  # off the operator's list (observability/running.py)
        try:
            await rt.running.unmark(job.tenantId, job.containerId, job.turnId)
        except Exception as exc:  # the next listing removes a mark whose turn has ended
            log.warning(
                "could not unmark a finished turn", extra={"turn_id": job.turnId, "error": type(exc).__name__}
            )


def attempt_of(turn: TurnRecord | None) -> int:
    """1, or one more than the attempt before: a worker that died mid-turn (it left the turn
    running), or a continuation of a suspended turn."""
    if turn is None or turn.status not in ("running", "suspended"):
        return 1
    return max(turn.attempt, 1) + 1


def first_seq_of(job: TurnJob, turn: TurnRecord | None, attempt: int) -> int:
    """A continuation numbers its frames right after the suspended attempt's; any other attempt
    from its own band (``streaming.frames``)."""
    if turn is not None and turn.status == "suspended" and turn.frames is not None:
        return last_seq(turn.frames) + 1
    return first_seq(job.userSeq, attempt)


def continued_frames(turn: TurnRecord | None) -> FrameMap | None:
    """What the turn sent before the attempt about to run, which that attempt continues: a suspended
    turn's map, or the one a continuation that died kept with its ``running`` status (its retry
    continues the same attempts; the dead attempt's own frames were never stored). None otherwise."""
    if turn is None or turn.status not in ("suspended", "running"):
        return None
    return turn.frames


async def answer_send(rt: Runtime, job: TurnJob, status: str, error: Json | None = None) -> None:
    """An AgentX v2 ``message.send`` waits for its turn: answer it on its connection (one post)."""
    if job.rpcConnectionId is None:
        return
    payload = send_result(
        rpc_id=job.rpcId,
        instance_id=job.agentId,
        image_id=job.imageId,
        turn_id=job.turnId,
        status=status,
        error=error,
    )
    try:
        await rt.push.send(job.rpcConnectionId, payload)
    except Exception as exc:  # gone or unreachable: the client reads the turn's outcome back
        log.info(
            "message.send answer not delivered", extra={"turn_id": job.turnId, "error": type(exc).__name__}
        )


__all__ = ["answer_send", "attempt_of", "continued_frames", "first_seq_of", "set_status"]
