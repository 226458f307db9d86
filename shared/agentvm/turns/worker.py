"""Running one queued turn: rebuild the agent, run the loop, persist each step, send the events.

Exactly-once rules: a turn whose record is terminal is skipped (a redelivered job does nothing);
a turn whose reply is already stored (the worker died after persisting) is finished from the
stored reply without calling the model again; every message is appended with an idempotency key
derived from the turn and step (``call:``/``tool:<turn>:<call id>``, ``step:<turn>:<n>``,
``result:``/``error:<turn>``), so no path appends anything twice. A turn redelivered mid-way
resumes after its last stored step: a tool whose result is stored is never run again, and one that
was running when the worker died is reported to the model as interrupted (or run again when its
definition says it is idempotent).

One finish path: ``_attempt`` runs the attempt up to its end and says how it ends (an ``Ending``:
its status, the sink holding its terminal frames, what it stored, the answer's error), and
``_process_turn`` hands that to ``turns.finish.finish``, the one tail every end runs (status, held
frames, storage charge, sink, signal, metrics, answer), then compacts and titles a turn that ended.
The loop's hooks are ``turns/hooks.py``; the status writes and the answer ``turns/status.py``;
suspension ``turns/suspend.py``; a first question answered from the image's reply cache (no model
call) ``turns/reply_cache.py``.

Interrupts: the in-process signal (``rt.signals``) where gateway and worker share a process; on
AWS the worker's one poll for all its turns (``turns.cancel_poll``, whose docstring argues why an
interrupt racing the turn's start is never missed: the running write names the poller, then the
turn's own mark is read once, strongly consistent).

A turn that waits on a tool call (approval, a client-side tool: ``turns.waits``) ends its attempt
``suspended``; its continuation (the job with ``resume`` set) is a later attempt that numbers its
frames right after the suspended attempt's and starts from the open step. It keeps the suspended
attempts' frame map (in its sink, and with its ``running`` status for a retry), so the turn's
stored map is the whole turn (``streaming.frames``, "Continued turns").
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from agentvm.agent.compaction import compact_after_turn, prepare_context
from agentvm.agent.history import result_of, turn_steps
from agentvm.agent.loop import TurnOutcome, run_turn
from agentvm.agent.memory import memory_of
from agentvm.agent.model_policy import route_turn
from agentvm.agent.tools.declarations import DEFAULT_MAX_STEPS
from agentvm.errors import AgentVMError, ProviderError, ProviderRejected, SessionBusy, StorageUnavailable
from agentvm.events import system_error
from agentvm.logs import bind, unbind
from agentvm.messages import ErrorMessage
from agentvm.observability.metrics import record_turn
from agentvm.observability.tracing import start_turn
from agentvm.records import TERMINAL
from agentvm.streaming.fanout import Fanout
from agentvm.streaming.frames import persisted_event
from agentvm.streaming.sink import CoalescingSink
from agentvm.turns.finish import Ending, LoopRun, charge_storage, emit_terminal, ended, finish_turn
from agentvm.turns.hooks import TurnHooks, context_for
from agentvm.turns.reply_cache import answer_from_cache, cache_lookup, cached_reply, remember_reply
from agentvm.turns.status import attempt_of, continued_frames, first_seq_of, set_status
from agentvm.turns.suspend import hold_suspended, pending_step, suspended_before

if TYPE_CHECKING:
    import asyncio
    from collections.abc import AsyncIterator, Callable, Coroutine, Iterator

    from agentvm.agent.context import TurnContext
    from agentvm.agent.tools.elicitation import ElicitationScope
    from agentvm.agent.tools.toolbox import Toolbox
    from agentvm.events import Json
    from agentvm.ports import McpTaskSuspension, Tool
    from agentvm.records import ImageRecord, TurnJob, TurnStatus
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.turns")


async def process_turn(
    rt: Runtime, job: TurnJob, *, later: Callable[[Coroutine[Any, Any, None]], None] | None = None
) -> TurnOutcome | None:
    """Run one turn job to completion. Returns None when there was nothing to do.

    ``later``: where the work after the reply goes (a compaction, a title: ``turns/after_reply.py``)
    so that it does not hold the session's queue slot; None: it is awaited before this returns.

    If storage cannot be written (a full disk), the session's subscribers are told at once with a
    ``system_error`` (``storage_unavailable``, not stored: nothing can be), and the error goes to
    the queue, which runs the turn again later: it resumes from what was stored."""
    if rt.config is not None:  # the config centre's layers for this tenant (configcentre/centre.py)
        rt = await rt.config.runtime_for(rt, job.tenantId)
    started = rt.clock.monotonic()
    ids = bind(
        tenant_id=job.tenantId, container_id=job.containerId, session_id=job.sessionId, turn_id=job.turnId
    )
    try:
        return await _process_turn(rt, job, later)
    except Exception as exc:  # the attempt failed (the queue retries it): counted as failed
        failure = exc if isinstance(exc, AgentVMError) else AgentVMError("internal error")
        record_turn(
            rt,
            job,
            TurnOutcome(model="", error=failure),
            model="",
            duration_s=rt.clock.monotonic() - started,
            tool_calls=0,
            tool_failures=0,
        )
        if not isinstance(exc, StorageUnavailable):
            raise
        log.warning("turn could not be stored; it will be retried", extra={"turn_id": job.turnId})
        frame = system_error(
            exc.message,
            now_ms=rt.clock.now_ms(),
            code=exc.code,
            request_id=job.requestId,
            details={"sessionId": job.sessionId, "turnId": job.turnId},
        )
        with contextlib.suppress(Exception):
            await Fanout(rt.connections, rt.push).publish_frame(job.sessionId, frame)
        raise
    finally:
        unbind(ids)
        rt.progress.forget(job.turnId)


async def _process_turn(
    rt: Runtime, job: TurnJob, later: Callable[[Coroutine[Any, Any, None]], None] | None
) -> TurnOutcome | None:
    end = await _attempt(rt, job)
    if end is None:
        return None
    async with _aborted_on_failure(end.sink):
        await finish_turn(rt, job, end)
    run = end.run
    if run is None:  # nothing ran: a redelivery, a deleted image, a reply stored by an earlier attempt
        return None
    if end.status == "suspended":
        log.info("turn suspended", extra={"turn_id": job.turnId, "waiting": len(run.outcome.waiting)})
        return run.outcome
    work = _after_reply(rt, job, run)
    if later is None:
        await work
    else:
        later(work)
    return run.outcome


async def _after_reply(rt: Runtime, job: TurnJob, run: LoopRun) -> None:
    """Compact, then name an untitled session (opt-in; turns/title.py); neither raises."""
    await compact_after_turn(rt, job, run.image, run.context, run.outcome)
    if rt.turns.auto_title:
        from agentvm.turns.title import title_after_turn

        await title_after_turn(rt, job, run.image, run.context, run.outcome)


async def _attempt(rt: Runtime, job: TurnJob) -> Ending | None:
    """Run the attempt up to its end, its terminal frames held: how it ends. None: there is nothing
    to do and nobody to tell."""
    store = rt.store
    turn = await store.get_turn(job.turnId)
    if turn is not None and turn.status in TERMINAL:
        log.info("turn already finished; skipping redelivery", extra={"turn_id": job.turnId})
        return Ending(turn.status, store=False)  # answered only: its worker may have died before that
    resuming = turn is not None and turn.status == "suspended"
    if job.resume is not None and turn is None:
        return None  # a continuation of a turn that was never stored: nothing to continue
    attempt = attempt_of(turn)
    image = await store.get_image(job.tenantId, job.imageId)
    if image is None:  # deleted while queued
        return Ending("failed", error={"code": "not_found", "message": "the image was deleted"})
    # The summary of older history (if any) and the messages after it: bounded reads (compaction.py).
    # A first attempt (nothing of it stored: its status is still the gateway's `queued`) needs only
    # the history up to its user message: read eventually consistent, checked whole (context.py).
    first_attempt = job.resume is None and (turn is None or turn.status == "queued")
    context = await prepare_context(rt, job, image, first_attempt=first_attempt)
    history = context.messages
    continues = continued_frames(turn)  # what the turn sent before this attempt, if it suspended
    sink = CoalescingSink(
        session_id=job.sessionId,
        context=context_for(job),
        fanout=Fanout(rt.connections, rt.push),
        clock=rt.clock,
        flush_s=rt.turns.flush_s,
        flush_max_s=rt.turns.flush_max_s,
        subscriber_refresh_s=rt.turns.subscriber_refresh_s,
        first_seq=first_seq_of(job, turn, attempt),
        batch_flush_max_s=rt.turns.batch_flush_max_s,
        batch_flush_s=rt.turns.batch_flush_s,
        economy_flush_max_s=rt.turns.economy_flush_max_s,
        economy_flush_s=rt.turns.economy_flush_s,
        cadence=image.cadence or rt.turns.stream_cadence,  # a connection's own choice wins (sink)
        continues=continues,
    )
    async with _aborted_on_failure(sink):  # its sends stop with the attempt
        if not resuming:
            # every attempt's first frame (a continuation's: its results); it goes out with the turn's
            # message_start, one flush window later at most (one WebSocket pass less: streaming.sink)
            sink.emit_frame(_persisted(rt, job), linger=True)
        stored = result_of(history, job.userMessageId)
        if stored is not None:
            # A previous attempt persisted the reply and died before finishing: finish from storage.
            sink.hold()
            emit_terminal(sink, stored, stop_reason="end_turn", interrupted=False)
            done: TurnStatus = "failed" if isinstance(stored, ErrorMessage) else "completed"
            return Ending(done, attempt=attempt, sink=sink)

        cancelled = rt.signals.event_for(job.turnId)
        with _polled(rt, job, cancelled) as poller:  # until the attempt suspends or ends
            # the running record names the poller: an interrupt from now on marks the turn for it
            # ...and the frames this attempt continues: a retry of it continues them too
            await set_status(rt, job, "running", attempt=attempt, poller=poller, frames=continues)
            if attempt > 1 and not resuming:
                # A client still subscribed may hold the half-streamed message of the attempt that died:
                # close it as interrupted, so this attempt starts a new message instead of splicing into it.
                sink.emit("message_stop", {"stopReason": "end_turn"})
                sink.emit("conversation_end", {"reason": "interrupted"})
            started_ms = rt.clock.now_ms()
            toolbox = await _toolbox(rt, image, job.turnId)
            try:
                outcome, hooks = await _run(rt, job, image, context, sink, toolbox, started_ms, cancelled)
            finally:
                if toolbox is not None:
                    await toolbox.aclose()
        run = LoopRun(outcome, hooks, image, context)
        if outcome.suspended:  # it waits on outcome.waiting: say what for; the worker goes
            await charge_storage(rt, job, hooks.stored_bytes)
            hold_suspended(sink, job, hooks.waits, outcome.waiting)
            return Ending("suspended", attempt=attempt, sink=sink, run=run)
        return await ended(rt, job, sink, run, attempt, started_ms)


@contextlib.asynccontextmanager
async def _aborted_on_failure(sink: CoalescingSink | None) -> AsyncIterator[None]:
    """Stop the sink's sends at once if what runs inside raises or is cancelled (the node stops,
    or lost the turn's lease to another node): no frame of this attempt goes out after it ended."""
    try:
        yield
    except BaseException:
        if sink is not None:
            await sink.abort()
        raise


async def _toolbox(rt: Runtime, image: ImageRecord, turn_id: str) -> Toolbox | None:
    """The image's tools for this turn (None: it declares none, or the host runs no tools), plus
    the search tools of the knowledge resources it was built with (``agent.knowledge_tools``) and
    its memory tools (``agent.tools.memory``, when the host keeps memory)."""
    box = None
    if rt.tools is not None and (image.tools or image.mcpServers):
        box = await rt.tools.toolbox(
            rt.store, image, storage=rt.storage_quota, mcp_oauth=rt.mcp_oauth_access()
        )
    found: list[Tool] = []
    knowledge = [t for t in image.tools or [] if t.get("type") == "knowledge"]
    if knowledge and rt.resources is not None:
        from agentvm.resources.knowledge_tool import knowledge_tools

        found += knowledge_tools(knowledge, rt.resources)
    remembering = [t for t in image.tools or [] if t.get("type") == "memory"]
    memory = memory_of(rt) if remembering else None
    if memory is not None:
        from agentvm.agent.tools.memory import memory_tools

        found += memory_tools(remembering, memory, image, turn_id)
    if found:
        from agentvm.agent.tools.toolbox import Toolbox

        if box is None:
            box = Toolbox(found)
        else:
            box.add(found)
    return box


async def _run(
    rt: Runtime,
    job: TurnJob,
    image: ImageRecord,
    context: TurnContext,
    sink: CoalescingSink,
    toolbox: Toolbox | None,
    started_ms: int,
    cancelled: asyncio.Event,
) -> tuple[TurnOutcome, TurnHooks]:
    # After the running write, strongly consistent: an interrupt whose read of the turn record
    # missed that write (so marked no poller) is seen here (turns/cancel_poll.py)
    if await rt.store.is_cancel_requested(job.sessionId, job.turnId):
        cancelled.set()
    blocked = await suspended_before(rt, job, context.messages)
    if blocked is not None:
        hooks = TurnHooks(rt, job, sink, None, image.model or "", started_ms)
        busy = SessionBusy(
            f"an earlier turn of this session ({blocked}) is suspended, waiting for a tool call to be "
            "approved or answered: answer it or interrupt it, then send this message again"
        )
        return TurnOutcome(model=image.model or "", error=busy), hooks
    route = route_turn(image, context, job.userMessageId)  # the image's model, or a rule's (fastModel)
    try:
        client, model_name, model_ref = rt.models.resolve(route.model)
    except AgentVMError as exc:
        hooks = TurnHooks(rt, job, sink, None, route.model or "", started_ms)
        return TurnOutcome(model=route.model or "", error=_as_provider_error(exc)), hooks
    hooks = TurnHooks(
        rt,
        job,
        sink,
        client,
        model_ref,
        started_ms,
        routed_by=route.routed_by,
        prefix_break=context.prefix_break,
    )
    if context.prefix_break is not None:  # the provider's prompt cache is written anew from the break
        log.info("prompt prefix changed", extra={"turn_id": job.turnId, "prefix_break": context.prefix_break})
    hooks.toolbox = toolbox
    if toolbox is not None:  # MCP servers that failed while it was built, then progress as tools run
        toolbox.reports.attach(hooks.sink.emit)
        if rt.elicitations is not None and image.mcpServers:  # their questions, to the session's clients
            toolbox.elicitation = _elicitation_scope(rt, job, image)
        if rt.mcp_tasks is not None and rt.waits is not None and image.mcpServers:
            toolbox.task_inline_s = _inline_follow(rt, rt.mcp_tasks)  # then the turn suspends on the task
    hooks.trace = start_turn(
        job, agent_name=image.name or "", model_ref=model_ref, max_tokens=rt.turns.max_output_tokens
    )
    # A session's first question to an image that caches replies (turns/reply_cache.py): a hit is
    # answered without calling the model; a miss stores the reply once the turn ends normally.
    lookup = cache_lookup(rt, job, image, context, model_ref)
    if lookup is not None and not cancelled.is_set():
        hit = await cached_reply(rt, lookup)
        if hit is not None:
            return await answer_from_cache(rt, job, hooks, hit, model_name), hooks
    request = context.request(
        model=model_name,
        image_prompt=image.systemPrompt,
        up_to_user_id=job.userMessageId,
        max_tokens=rt.turns.max_output_tokens,
        tools=toolbox.specs if toolbox is not None else (),
        prompt_caching=rt.turns.prompt_caching and image.promptCaching is not False,
        cache_key=prompt_cache_key(job.tenantId, job.sessionId),
    )
    # A redelivered turn resumes after the steps a previous attempt stored.
    done_steps = turn_steps(context.messages, job.userMessageId)
    pending = await pending_step(rt, job, context.messages, toolbox, hooks.remember)
    outcome = await run_turn(
        request,
        hooks,
        toolbox=toolbox,
        cancelled=cancelled,
        clock=rt.clock,
        max_steps=image.maxSteps or DEFAULT_MAX_STEPS,
        first_step=len(done_steps),
        deadline_s=rt.turns.turn_deadline_s or None,
        pending=pending,
    )
    if lookup is not None:
        await remember_reply(rt, lookup, outcome)
    return outcome, hooks


def _elicitation_scope(rt: Runtime, job: TurnJob, image: ImageRecord) -> ElicitationScope:
    """Where the turn's MCP servers ask its user (agent/tools/elicitation.py)."""
    from agentvm.agent.tools.elicitation import ElicitationScope
    from agentvm.ports import ElicitationOwner

    assert rt.elicitations is not None

    async def has_client() -> bool:
        return bool(await rt.connections.subscribers(job.sessionId))

    owner = ElicitationOwner(job.tenantId, job.containerId, job.sessionId, job.turnId)
    return ElicitationScope(rt.elicitations, owner, has_client)


@contextlib.contextmanager
def _polled(rt: Runtime, job: TurnJob, cancelled: asyncio.Event) -> Iterator[str | None]:
    """On AWS the interrupt arrives in another Lambda: the worker's one poll looks for its mark
    (turns/cancel_poll.py). Yields the poller id the running record names; None: no poll (the
    local host's in-process signals)."""
    if rt.turns.cancel_poll_s <= 0:
        yield None
        return
    with rt.cancel_poll.watch(rt, job.turnId, cancelled) as poller:
        yield poller


def prompt_cache_key(tenant_id: str, session_id: str) -> str:
    """The session's prompt-cache key for providers that take one (OpenAI ``prompt_cache_key``):
    a hash, so neither id reaches the provider."""
    import hashlib

    return hashlib.sha256(f"agentvm-cache:{tenant_id}:{session_id}".encode()).hexdigest()[:32]


def _as_provider_error(exc: AgentVMError) -> ProviderError:
    return exc if isinstance(exc, ProviderError) else ProviderRejected(exc.message)


def _persisted(rt: Runtime, job: TurnJob) -> Json:
    return persisted_event(
        session_id=job.sessionId,
        message_id=job.userMessageId,
        saved_at=job.userSavedAt or job.enqueuedAt,
        now_ms=rt.clock.now_ms(),
        context=context_for(job),
    )


_HANDOFF_MARGIN_S = 5.0  # a task is handed off this long before the turn's deadline at the latest


def _inline_follow(rt: Runtime, suspension: McpTaskSuspension) -> Callable[[], float]:
    """How long a call may follow its MCP task now (``turns/mcp_tasks.py``): the host's bound
    (``AVM_MCP_TASK_INLINE_S``, the invocation's time left), and never past the turn's own deadline:
    a turn cut by its deadline would cancel the task instead of waiting for it."""
    if not rt.turns.turn_deadline_s:
        return suspension.follow_for_s
    ends = rt.clock.monotonic() + rt.turns.turn_deadline_s - _HANDOFF_MARGIN_S

    def follow_for_s() -> float:
        return max(0.0, min(suspension.follow_for_s(), ends - rt.clock.monotonic()))

    return follow_for_s


__all__ = ["process_turn", "prompt_cache_key"]
