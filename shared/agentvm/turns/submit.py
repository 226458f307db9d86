"""Accept a user message: ``message_send``'s core (v1's ``message_send_request``, v2's
``message.send``).

In order: the tenant's budget (refused before anything is stored: ``quota_exceeded``), the image's
agent (started if it was not), the sender subscribed to the session, the concurrency policy (the
request's beats the image's: ``queue``, ``reject`` with ``session_busy`` while a turn is live, or
``interrupt`` the live one), then the writes: the user message (its size reserved in the storage
account first; keyed by the request id, so a retried request never appends twice nor runs a second
turn), the turn's running mark, the ``queued`` turn record, and the job. A refusal after the
message leaves no live turn without a job (``turns.orphans.withdraw``); a retry of a withdrawn
request queues its turn again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentvm.errors import SessionBusy
from agentvm.images.agents import start_agent
from agentvm.messages import UserMessage
from agentvm.ports import RunningTurn
from agentvm.records import TurnJob, TurnRecord, turn_id_for
from agentvm.turns import orphans as orphan_turns
from agentvm.turns.interrupt import active_turn, interrupt_image

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.messages import UserContentPart
    from agentvm.ports import AppendResult, ConnectionInfo
    from agentvm.records import ConcurrencyPolicy, ImageRecord
    from agentvm.runtime import Runtime


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sends: its connection (subscribed to the session's stream), as the request read it
    (``Connections.subscribe(known=...)``), and ``rpc_id``, an AgentX v2 ``message.send`` that the
    turn's worker answers on that connection when the turn ends (``gateway.v2.rpc``)."""

    connection_id: str
    connection: ConnectionInfo | None = None
    rpc_id: str | int | None = None


@dataclass(frozen=True, slots=True)
class Sent:
    """What ``send_message`` did: the image (its agent running), the stored user message, the turn,
    and whether this request made it (False: a retry of a request already accepted, which queued
    nothing)."""

    image: ImageRecord
    message_id: str
    turn_id: str
    created: bool


async def send_message(
    rt: Runtime,
    tenant_id: str,
    image: ImageRecord,
    content: str | list[UserContentPart],
    *,
    request_id: str,
    sender: Sender,
    concurrency: ConcurrencyPolicy | None = None,
    notices: list[Json],
) -> Sent:
    """Store the user message of request ``request_id`` and queue its turn. ``concurrency``: the
    request's policy (None: the image's); ``notices``: frames for the sender only, sent before its
    answer (``agent_registered``)."""
    if rt.budgets is not None:  # refuse before anything is stored (quota_exceeded)
        await rt.budgets.check(tenant_id, image.containerId)
    # No container upsert here: an image only exists inside a container made with it, and on
    # AWS the conditional put would cost a write unit per turn for nothing.
    image, _ = await start_agent(rt, image, notices=notices)
    assert image.agentId is not None
    # The sender always sees its own stream, even if it never listed the image (AgentX's
    # "stuck in Queued" bug, protocol §1.5). With a cursor: a turn's worker that finds the sender
    # only at a later subscriber lookup (the AWS index lags) still sends it the turn from its start.
    await rt.connections.subscribe(
        sender.connection_id, image.sessionId, after_seq=0, known=sender.connection
    )

    # What to do if a turn is already running: the request's option beats the image's policy.
    policy = concurrency or image.concurrency
    if policy == "reject" and await active_turn(rt, tenant_id, image) is not None:
        raise SessionBusy("a turn is already running in this session; retry when it ends")
    if policy == "interrupt":
        await interrupt_image(rt, tenant_id, image)  # the new turn runs right after it stops (FIFO)

    user = UserMessage(id=rt.ids.new("msg"), timestamp=rt.clock.now_ms(), content=content)
    quota = rt.storage_quota
    # Its bytes reserved before anything is stored (concurrent sends never pass the quota
    # together); given back if the append fails or a retried request stores nothing.
    reserved = 0 if quota is None else await quota.reserve(tenant_id, len(user.model_dump_json()))
    try:
        # Keyed by requestId: a retried request never appends twice nor runs a second turn.
        appended = await rt.store.append_message(image.sessionId, user, idempotency_key=f"req:{request_id}")
    except BaseException:
        if quota is not None:
            await quota.give_back(tenant_id, reserved)
        raise
    if quota is not None and not appended.created:
        await quota.give_back(tenant_id, reserved)
    user_id = appended.message.id
    turn_id = turn_id_for(user_id)
    # This request queues the turn if it stored the message, or if it retries one whose turn was
    # withdrawn when a write after the message failed (turns/orphans.py).
    queues = appended.created or orphan_turns.is_withdrawn(await rt.store.get_turn(turn_id))
    try:
        await _queue_turn(rt, tenant_id, image, appended, request_id=request_id, sender=sender, queues=queues)
    except BaseException:
        if queues:  # a refusal leaves no live turn without a job behind it
            await orphan_turns.withdraw(
                rt,
                tenant_id=tenant_id,
                container_id=image.containerId,
                session_id=image.sessionId,
                turn_id=turn_id,
                user_seq=appended.seq,
            )
        raise
    return Sent(image, user_id, turn_id, queues)


async def _queue_turn(
    rt: Runtime,
    tenant_id: str,
    image: ImageRecord,
    appended: AppendResult,
    *,
    request_id: str,
    sender: Sender,
    queues: bool,
) -> None:
    """The writes after the message: the running mark, the ``queued`` record (if ``queues``),
    then the job. Each may fail (a full disk, an unreachable queue); the caller withdraws what
    this request wrote (the message stays, and so does its reserved size)."""
    assert image.agentId is not None
    turn_id = turn_id_for(appended.message.id)
    # The mark first: a process dying before the record leaves a mark the sweeper removes, never a
    # record nobody lists (turns/orphans.py).
    if rt.running is not None:  # the operator's list of unfinished turns (observability/running.py)
        await rt.running.mark(
            RunningTurn(
                tenant_id=tenant_id,
                container_id=image.containerId,
                image_id=image.imageId,
                session_id=image.sessionId,
                turn_id=turn_id,
                queued_at=appended.message.timestamp,
                model=image.model,
            )
        )
    # message_persisted is the first frame of the turn, sent by its worker: numbered in the
    # session's stream, it cannot overtake the frames of a turn still running before it.
    if queues:
        await rt.store.put_turn(
            TurnRecord(
                turnId=turn_id,
                sessionId=image.sessionId,
                status="queued",
                updatedAt=rt.clock.now_ms(),
                userSeq=appended.seq,
            )
        )
    job = TurnJob(
        turnId=turn_id,
        tenantId=tenant_id,
        containerId=image.containerId,
        imageId=image.imageId,
        sessionId=image.sessionId,
        agentId=image.agentId,
        userMessageId=appended.message.id,
        requestId=request_id,
        enqueuedAt=rt.clock.now_ms(),
        userSeq=appended.seq,
        userSavedAt=appended.message.timestamp,
    )
    if sender.rpc_id is not None and queues:
        job = job.model_copy(update={"rpcConnectionId": sender.connection_id, "rpcId": sender.rpc_id})
    await rt.queue.enqueue(job)  # idempotent by turnId


__all__ = ["Sender", "Sent", "send_message"]
