"""Compaction: older history is summarised, so what a turn sends (and costs) stays bounded.

A turn reads the session's summary and the messages after it (``core/context.py``): two bounded
reads, whatever the length of the history. This module decides when to fold older messages into
the summary, and does it.

**When.** After a turn's terminal events were sent (never delaying the reply; on hosts with a
long-lived process also never delaying the session's next turn: ``turns/after_reply.py``), if either

- the estimated context (chars/4 of system prompt + summary + unsummarised messages + the reply)
  passes ``compaction_threshold_tokens``, or
- the unsummarised messages fill three quarters of the history window (past the window, the oldest
  would drop out of the model's view without ever being summarised).

Before a turn only when needed: the context is past twice the threshold (a compaction after an
earlier turn failed, or a burst of large messages arrived).

**What.** Everything but a recent tail kept verbatim: at most a quarter of the window and half the
threshold's tokens. Never a user message whose turn has not run yet (turns of a session run in
order, so those are the ones after the current turn's), and the tail starts at a user message
whose replies are all kept, so the model never sees a reply without its question.

**How.** One call to the compaction model (``compaction_model``; default the image's side model,
its model's cheap sibling unless the image names one: ``agent/side_model.py``) through
the same ModelClient port, with the previous summary and the folded messages; the new summary
replaces the old one and covers both (``upToSeq``). It is stored (``Store.put_summary``, only ever
forward); the messages are never deleted, so ``image_messages_request`` still returns everything.

**Cost.** The call's tokens are a usage record of ``kind="compaction"`` (turn id
``<turn>:compact:<upToSeq>``, so a retried compaction bills once) and count against budgets. Its
input is bounded (the previous summary, at most one window of messages, each cut to a share of
twice the threshold); its output is capped at an eighth of the threshold (at least 256 tokens).
A compaction that fails is logged and skipped: the turn it follows has already ended, and the
next turn tries again.

**Once.** Off the session's queue slot, the next turn may end (on any worker or node) while the
previous turn's compaction still runs, and find the context still over the threshold. So a
compaction after a turn decides again from a fresh read, and first claims its base (the session
and the summary it starts from, ``Runtime.counters``: every worker and node sees the claim): of
two compactions from the same summary, one calls the model. A claim expires after ``CLAIM_S``, so
one whose worker died is tried again by a later turn.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentvm.agent.context import estimate_tokens, load_context, model_text
from agentvm.agent.diet import ContextDiet
from agentvm.agent.history import result_of
from agentvm.agent.loop import complete
from agentvm.agent.side_calls import bill_side_call
from agentvm.agent.side_model import resolve_side_model
from agentvm.llm import ChatTurn, ModelRequest
from agentvm.messages import ToolCallMessage, ToolResultMessage, UserMessage
from agentvm.records import SessionSummary

if TYPE_CHECKING:
    from collections.abc import Coroutine, Sequence

    from agentvm.agent.context import TurnContext
    from agentvm.agent.loop import TurnOutcome
    from agentvm.messages import Message
    from agentvm.ports import SeqMessage
    from agentvm.records import ImageRecord, TurnJob
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.compaction")

SUMMARY_SYSTEM = (
    "You maintain the running summary of a conversation between a user and an AI assistant. The "
    "assistant will see only your summary and the most recent messages, so keep everything it needs "
    "to continue: facts about the user, names, numbers, decisions, commitments, open questions and "
    "the task at hand. Be concise and factual, write in the conversation's language, and reply with "
    "the summary only."
)
MIN_SUMMARY_TOKENS = 256
CLAIM_S = 300  # a claimed compaction base is taken this long (its worker may have died)


def enabled(rt: Runtime) -> bool:
    return rt.turns.compaction_threshold_tokens > 0


def summary_max_tokens(threshold: int) -> int:
    return max(MIN_SUMMARY_TOKENS, threshold // 8)


def keep_max(window: int) -> int:
    """The most recent messages a compaction keeps verbatim."""
    return max(2, window // 4)


def count_trigger(window: int) -> int:
    """Unsummarised messages at which a compaction runs whatever their size."""
    return max(2, window - max(1, window // 4))


async def prepare_context(
    rt: Runtime, job: TurnJob, image: ImageRecord, *, first_attempt: bool = False
) -> TurnContext:
    """What the turn reads (summary + the messages after it), compacted first only when needed.
    ``first_attempt``: nothing of the turn is stored yet, so only the messages up to its user
    message matter (read eventually consistent first: ``agent.context.load_context``)."""
    context = await turn_context(rt, job, image, first_attempt=first_attempt)
    if not enabled(rt) or result_of(context.messages, job.userMessageId) is not None:
        return context  # nothing to do, or a redelivery finishing from its stored reply
    if context.estimated_tokens(image.systemPrompt) <= 2 * rt.turns.compaction_threshold_tokens:
        return context
    if await _safely(_compact(rt, job, image, context, first_unrun_id=job.userMessageId), job) is None:
        return context
    return await turn_context(rt, job, image)


async def turn_context(
    rt: Runtime, job: TurnJob, image: ImageRecord, *, first_attempt: bool = False
) -> TurnContext:
    """The turn's read: the summary and the stepped window up to (and after) its user message,
    with the image's context diet (``agent/window.py``, ``agent/diet.py``)."""
    return await load_context(
        rt.store,
        job.sessionId,
        rt.turns.history_window,
        summarised=enabled(rt),
        through_seq=job.userSeq if first_attempt and job.userSeq else None,
        anchor_seq=job.userSeq or None,
        step=rt.turns.history_window_step,
        diet=ContextDiet.of(image.contextDiet),
    )


async def compact_after_turn(
    rt: Runtime, job: TurnJob, image: ImageRecord, context: TurnContext, outcome: TurnOutcome | None
) -> SessionSummary | None:
    """Called once the turn's terminal events are out; never raises (but for cancellation)."""
    if not enabled(rt) or outcome is None:
        return None
    if not _due(rt, image, context, reply=outcome.text):
        return None  # the common case: decided from what the turn read, no further I/O
    return await _safely(_after_turn(rt, job, image), job)


def _due(rt: Runtime, image: ImageRecord, context: TurnContext, *, reply: str = "") -> bool:
    """Past the threshold's tokens, or the window's count trigger (the module docstring)."""
    tokens = context.estimated_tokens(image.systemPrompt) + estimate_tokens(reply)
    count = len(context.entries) + (1 if reply.strip() else 0)
    return tokens > rt.turns.compaction_threshold_tokens or count >= count_trigger(context.window)


async def _after_turn(rt: Runtime, job: TurnJob, image: ImageRecord) -> SessionSummary | None:
    fresh = await load_context(rt.store, job.sessionId, rt.turns.history_window)
    if not any(m.id == job.userMessageId for m in fresh.messages):
        return None  # the turn's own message is no longer in view: nothing is safe to fold
    if not _due(rt, image, fresh):
        return None  # another turn's compaction got there first
    if not await _claim(rt, job, fresh):
        log.info(
            "compaction skipped: another worker compacts this session", extra={"session_id": job.sessionId}
        )
        return None
    first_unrun = _next_user_id(fresh.messages, job.userMessageId)
    return await _compact(rt, job, image, fresh, first_unrun_id=first_unrun)


async def _claim(rt: Runtime, job: TurnJob, context: TurnContext) -> bool:
    """Whether this compaction is the one from the session's current summary (see "Once")."""
    if rt.counters is None:
        return True
    base = context.summary.upToSeq if context.summary is not None else 0
    lease = await rt.counters.lease(
        f"compaction:{job.tenantId}:{job.sessionId}:{base}",
        "claim",
        1,
        limit=1,
        expires_at=int(rt.clock.now_ms() / 1000) + CLAIM_S,
        whole=True,
    )
    return lease.granted == 1


async def _safely(
    compaction: Coroutine[Any, Any, SessionSummary | None], job: TurnJob
) -> SessionSummary | None:
    """A compaction that fails is skipped: the turn goes on (or is over), the next one tries again."""
    try:
        return await compaction
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning(
            "compaction failed; skipped",
            extra={"session_id": job.sessionId, "turn_id": job.turnId, "error": type(exc).__name__},
        )
        return None


def fold_count(
    messages: Sequence[Message], *, first_unrun_id: str | None, keep_max: int, keep_tokens: int
) -> int:
    """How many of the oldest ``messages`` to fold into the summary (0: none)."""
    limit = len(messages)
    if first_unrun_id is not None:
        limit = next((i for i, m in enumerate(messages) if m.id == first_unrun_id), 0)
    # The tail kept verbatim: the newest messages within both caps.
    start, kept_tokens = len(messages), 0
    while start > 0 and len(messages) - start < keep_max:
        tokens = estimate_tokens(model_text(messages[start - 1]))
        if kept_tokens + tokens > keep_tokens:
            break
        kept_tokens += tokens
        start -= 1
    # The clean cut that keeps the most within the caps; failing that, the nearest keeping more.
    for cut in range(start, limit + 1):
        if _clean_cut(messages, cut):
            return cut
    for cut in range(min(start, limit + 1) - 1, 0, -1):
        if _clean_cut(messages, cut):
            return cut
    return 0


def _clean_cut(messages: Sequence[Message], cut: int) -> bool:
    """The kept part starts at a user message and none of its messages belongs to a folded turn:
    no reply answers a folded message, and no tool result is cut from its call."""
    if cut < len(messages) and not isinstance(messages[cut], UserMessage):
        return False
    folded = {m.id for m in messages[:cut]}
    folded_calls = {m.toolCall.id for m in messages[:cut] if isinstance(m, ToolCallMessage)}
    for m in messages[cut:]:
        if getattr(m, "parentId", None) in folded:
            return False
        if isinstance(m, ToolResultMessage) and m.toolCallId in folded_calls:
            return False
    return True


def _next_user_id(messages: Sequence[Message], user_id: str) -> str | None:
    """The first user message after ``user_id``: its turn (and those after it) has not run yet."""
    seen = False
    for m in messages:
        if seen and isinstance(m, UserMessage):
            return m.id
        seen = seen or m.id == user_id
    return None


def summary_request(
    model: str, previous: SessionSummary | None, folded: Sequence[SeqMessage], threshold: int
) -> ModelRequest:
    """The summarising call: the previous summary and the folded messages, in one user turn."""
    shown = [entry.message for entry in folded if model_text(entry.message)]
    # Each message gets an equal share of twice the threshold (in chars): the call's input is
    # bounded even when one message is huge.
    share = max(500, threshold * 2 * 4 // max(1, len(shown)))
    lines: list[str] = []
    for m in shown:
        text = model_text(m)
        if len(text) > share:
            text = text[:share] + " […]"
        role = (
            "User"
            if isinstance(m, UserMessage)
            else "Tool"
            if isinstance(m, ToolResultMessage)
            else "Assistant"
        )
        lines.append(f"{role}: {text}")
    parts = []
    if previous is not None and previous.text:
        parts.append(f"<summary_so_far>\n{previous.text}\n</summary_so_far>")
    parts.append("<messages>\n" + "\n\n".join(lines) + "\n</messages>")
    parts.append("Write the updated summary of the whole conversation so far.")
    return ModelRequest(
        model=model,
        messages=(ChatTurn("user", "\n\n".join(parts)),),
        system=SUMMARY_SYSTEM,
        max_tokens=summary_max_tokens(threshold),
    )


async def _compact(
    rt: Runtime, job: TurnJob, image: ImageRecord, context: TurnContext, *, first_unrun_id: str | None
) -> SessionSummary | None:
    threshold = rt.turns.compaction_threshold_tokens
    cut = fold_count(
        context.messages,
        first_unrun_id=first_unrun_id,
        keep_max=keep_max(context.window),
        keep_tokens=threshold // 2,
    )
    if cut == 0:
        return None
    folded = context.entries[:cut]
    up_to_seq = folded[-1].seq
    budget_scopes = None
    if rt.budgets is not None:
        limit, budget_scopes = await rt.budgets.for_call(job.tenantId, job.containerId)
        if limit is not None and limit.remaining <= 0:
            return None  # the tenant cannot pay for it; the next turn is refused anyway
    client, model_name, model_ref = resolve_side_model(rt, image, rt.turns.compaction_model)
    request = summary_request(model_name, context.summary, folded, threshold)
    started = rt.clock.monotonic()
    outcome = await complete(client, request, clock=rt.clock)
    text = outcome.text.strip()[: summary_max_tokens(threshold) * 4]
    ok = outcome.error is None and bool(text)
    await bill_side_call(
        rt,
        job,
        outcome,
        turn_id=f"{job.turnId}:compact:{up_to_seq}",
        kind="compaction",
        model_ref=model_ref,
        started=started,
        ok=ok,
        budget_scopes=budget_scopes,
    )
    if not ok:
        code = outcome.error.code if outcome.error is not None else "empty_summary"
        log.warning("compaction model call failed", extra={"session_id": job.sessionId, "error": code})
        return None
    summary = SessionSummary(
        sessionId=job.sessionId,
        upToSeq=up_to_seq,
        text=text,
        model=model_ref,
        messages=(context.summary.messages if context.summary is not None else 0) + cut,
        inputTokens=outcome.input_tokens,
        outputTokens=outcome.output_tokens,
        createdAt=rt.clock.now_ms(),
        seenSeq=context.entries[-1].seq,
    )
    stored = await rt.store.put_summary(summary)
    log.info(
        "session compacted",
        extra={
            "session_id": job.sessionId,
            "up_to_seq": up_to_seq,
            "folded": cut,
            "input_tokens": outcome.input_tokens,
            "output_tokens": outcome.output_tokens,
            "stored": stored,
            "prefix_break": "compaction",  # the next turn sends the new summary: its cache is written anew
        },
    )
    return summary if stored else None


__all__ = [
    "CLAIM_S",
    "SUMMARY_SYSTEM",
    "compact_after_turn",
    "count_trigger",
    "enabled",
    "fold_count",
    "keep_max",
    "prepare_context",
    "summary_max_tokens",
    "summary_request",
    "turn_context",
]
