"""Turns with no job: a live turn record (``queued`` or ``running``) that no worker will ever take.

Where one comes from. ``message_send`` writes, in order, the user message, the turn's running mark,
the ``queued`` turn record, then the job. A refusal after the first write (``storage_unavailable``
at any of them, a queue that cannot be reached) must not leave the record behind: the session would
answer ``session_busy`` forever under ``concurrency: "reject"`` and an interrupt would mark a turn
no worker reads. The stores have no transaction across these items (SQLite files and DynamoDB items
are written one by one, as everywhere in the gateway), so the gateway *withdraws* what it wrote
when a later write fails (``withdraw``: the record ends ``failed`` with ``attempt`` 0, the mark is
removed); that withdrawal is itself a write and can fail on the same full disk, and a process can
die between any two writes, so orphans are also *healed* where they are found.

How "no job" is told, per host (``has_no_job``):

- **local** (``avm serve``) and **cluster** (``avm serve --database-url``): the queue is a table
  (SQLite next to the store; PostgreSQL's ``turn_jobs``, every node's jobs), so it is asked
  (``JobLookup.has_job``): no row for the turn that is queued or running means no job, exactly.
  ``GRACE_MS`` (60 s) covers a ``message_send`` still between its record and its enqueue.
- **AWS**: SQS cannot be asked whether a message exists, so the record's age decides: a turn whose
  record has not changed for ``TurnSettings.orphan_after_s`` (default 27,000 s: the queue's
  ``VisibilityTimeout`` of 5,400 s times its ``maxReceiveCount`` of 5 in template.yaml, the longest a
  job can live before the dead-letter queue takes it) has no job left. Every attempt rewrites the
  record (``running``, a fresh ``updatedAt``), so a turn still being retried is never taken for one.

Where orphans are ended (``end``: the record ``failed``, or ``interrupted`` for an interrupt, the
mark removed): by the sweeper (``sweep``, the local server's wait sweeper loop, over every running
mark: the local ``SqliteRunningTurns.stale`` lists them across tenants), and on AWS where one is
read: the ``session_busy`` check, ``agent_interrupt`` and ``/v1/turns`` cancel. The AWS wait
sweeper does not list them: the marks live in one partition per tenant, and finding them all each
minute would be a table scan.

A retry of a withdrawn ``message_send`` (same ``requestId``) finds its message stored and the record
withdrawn (``failed``, ``attempt`` 0: no worker ever ran it), and queues the turn again
(``is_withdrawn``): a refusal is a refusal, not a lost message.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agentvm.records import TurnRecord

if TYPE_CHECKING:
    from agentvm.ports import RunningTurn
    from agentvm.records import TurnStatus
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.orphan_turns")

GRACE_MS = 60_000  # local: a send between its turn record and its enqueue is not an orphan yet
_JOBLESS_CANDIDATES = frozenset({"queued", "running"})


@runtime_checkable
class JobLookup(Protocol):
    """A queue that can say whether a turn still has a job (the local SQLite queue and the
    cluster's PostgreSQL one, across every node; not SQS)."""

    async def has_job(self, turn_id: str) -> bool: ...


@runtime_checkable
class StaleMarks(Protocol):
    """Running marks listed across tenants, oldest first (the local store; not DynamoDB)."""

    async def stale(self, queued_by_ms: int, limit: int) -> list[RunningTurn]: ...
    async def unmark(self, tenant_id: str, container_id: str, turn_id: str) -> None: ...


def is_withdrawn(turn: TurnRecord | None) -> bool:
    """A record the gateway ended itself: ``failed`` before any worker ran it (attempt 0)."""
    return turn is not None and turn.status == "failed" and turn.attempt == 0


async def has_no_job(rt: Runtime, turn: TurnRecord, *, grace_ms: int = GRACE_MS) -> bool:
    """True if ``turn`` is queued or running and no job will ever run it (see the module docstring).
    ``grace_ms`` 0: an interrupt, which may end a turn whose send has not enqueued it yet (the job,
    if it comes, finds the turn ended and does nothing)."""
    if turn.status not in _JOBLESS_CANDIDATES:
        return False
    age_ms = rt.clock.now_ms() - turn.updatedAt
    if isinstance(rt.queue, JobLookup):
        return age_ms >= grace_ms and not await rt.queue.has_job(turn.turnId)
    return age_ms >= rt.turns.orphan_after_s * 1000


async def end(
    rt: Runtime,
    turn: TurnRecord,
    *,
    tenant_id: str,
    container_id: str,
    status: TurnStatus = "failed",
) -> None:
    """End an orphan: its record ``status`` (attempt 0: no worker ran it), then its mark removed
    (never before: the mark is how the sweeper finds a record it could not end)."""
    log.info("ending a turn that has no job", extra={"turn_id": turn.turnId, "status": turn.status})
    await rt.store.put_turn(
        TurnRecord(
            turnId=turn.turnId,
            sessionId=turn.sessionId,
            status=status,
            updatedAt=rt.clock.now_ms(),
            userSeq=turn.userSeq,
        )
    )
    if rt.running is not None:
        await rt.running.unmark(tenant_id, container_id, turn.turnId)


async def withdraw(
    rt: Runtime,
    *,
    tenant_id: str,
    container_id: str,
    session_id: str,
    turn_id: str,
    user_seq: int,
) -> None:
    """Undo a refused ``message_send``'s writes, as far as the store lets us: the record ended
    (``failed``, attempt 0), then the mark removed. Never raises: the refusal's own error is what
    the client is told. If the record cannot be written the mark stays: it is how ``sweep`` finds
    the turn to end it."""
    try:
        await end(
            rt,
            TurnRecord(turnId=turn_id, sessionId=session_id, status="queued", updatedAt=0, userSeq=user_seq),
            tenant_id=tenant_id,
            container_id=container_id,
        )
    except Exception as exc:
        log.warning(
            "could not withdraw a refused turn; the sweeper ends it",
            extra={"turn_id": turn_id, "error": type(exc).__name__},
        )


async def sweep_orphans(rt: Runtime, *, limit: int = 500) -> int:
    """End the turns whose mark is older than the bound and that have no job; returns how many.
    Only where the marks can be listed across tenants (``StaleMarks``: the local host). Never
    raises for one turn's failure (the next sweep tries again)."""
    marks = rt.running
    if not isinstance(marks, StaleMarks):
        return 0
    ended = 0
    for mark in await marks.stale(rt.clock.now_ms() - GRACE_MS, limit):
        try:
            turn = await rt.store.get_turn(mark.turn_id)
            if turn is None:  # the send died between its mark and its record: only the mark is left
                if not (isinstance(rt.queue, JobLookup) and await rt.queue.has_job(mark.turn_id)):
                    await marks.unmark(mark.tenant_id, mark.container_id, mark.turn_id)
                    ended += 1
                continue
            if await has_no_job(rt, turn):
                await end(rt, turn, tenant_id=mark.tenant_id, container_id=mark.container_id)
                ended += 1
        except Exception as exc:
            log.warning(
                "sweeping a turn failed", extra={"turn_id": mark.turn_id, "error": type(exc).__name__}
            )
    return ended


__all__ = [
    "GRACE_MS",
    "JobLookup",
    "StaleMarks",
    "end",
    "has_no_job",
    "is_withdrawn",
    "sweep_orphans",
    "withdraw",
]
