"""A session's title: the name of its image (what ``image_list`` shows), set or generated.

**Explicitly**: ``PUT /v1/sessions/{sessionId}/title {"title": "..."}`` (1-200 characters).

**Generated** (opt-in: the config centre's ``sessions.autoTitle``, per tenant or for the server,
env ``AVM_AUTO_TITLE``): after a turn completes while its image still has the default name ("New
Conversation", i.e. nobody named it), one short call names the conversation from the turn's
question and reply. Its model: ``sessions.titleModel`` if set (it wins), else the image's side
model (its ``sideModel``, by default its model's cheap sibling: ``agent/side_model.py``). It runs
after the turn's reply was sent, never delays it, and never fails a turn (a failure is logged; the
next turn tries again). Its tokens are a usage record of ``kind: "title"`` (turn id
``<turn>:title``, so a retried turn bills it once; ``model``: the model called) and count against
budgets; it is skipped when the tenant has no budget left. A name set by anyone in the meantime is
never overwritten.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from agentvm.errors import BadRequest
from agentvm.llm import ChatTurn, ModelRequest
from agentvm.messages import UserMessage, text_of
from agentvm.records import DEFAULT_IMAGE_NAME
from agentvm.sessions.export import session_image

if TYPE_CHECKING:
    from agentvm.agent.context import TurnContext
    from agentvm.agent.loop import TurnOutcome
    from agentvm.records import ImageRecord, TurnJob
    from agentvm.runtime import Runtime

log = logging.getLogger("agentvm.sessions")

MAX_TITLE_CHARS = 200
TITLE_MAX_TOKENS = 24
_SHOWN_CHARS = 1500  # of the question and of the reply, in the titling call
TITLE_SYSTEM = (
    "You name conversations. Reply with a short title (at most six words) for the conversation "
    "below, in its language: no quotes, no final punctuation, nothing else."
)


async def set_title(rt: Runtime, tenant_id: str, session_id: str, title: str) -> ImageRecord:
    title = " ".join(title.split())
    if not 1 <= len(title) <= MAX_TITLE_CHARS:
        raise BadRequest(f"title: 1-{MAX_TITLE_CHARS} characters (not only spaces)")
    image = await session_image(rt, tenant_id, session_id)
    image = image.model_copy(update={"name": title, "updatedAt": rt.clock.now_ms()})
    await rt.store.put_image(image)
    return image


def clean_title(text: str) -> str:
    """The model's answer as a title: its first line, without quotes or a final period."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = line.strip().strip("\"'“”‘’«»*#").strip()
    line = line.removeprefix("Title:").removeprefix("title:").strip().rstrip(".").strip()
    return " ".join(line.split())[:80]


async def title_after_turn(
    rt: Runtime, job: TurnJob, image: ImageRecord, context: TurnContext, outcome: TurnOutcome | None
) -> str | None:
    """Name the session after a completed turn if that is switched on and nobody named it; returns
    the title set. Never raises (but for cancellation)."""
    if not rt.turns.auto_title or outcome is None or outcome.error is not None or outcome.interrupted:
        return None
    if image.name != DEFAULT_IMAGE_NAME or not outcome.text.strip():
        return None
    try:
        return await _title(rt, job, context, outcome, DEFAULT_IMAGE_NAME)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning(
            "titling failed; skipped",
            extra={"session_id": job.sessionId, "turn_id": job.turnId, "error": type(exc).__name__},
        )
        return None


async def _title(
    rt: Runtime, job: TurnJob, context: TurnContext, outcome: TurnOutcome, default_name: str
) -> str | None:
    from agentvm.agent.loop import complete
    from agentvm.agent.side_calls import bill_side_call
    from agentvm.agent.side_model import resolve_side_model

    question = next(
        (m for m in context.messages if m.id == job.userMessageId and isinstance(m, UserMessage)), None
    )
    if question is None:
        return None
    budget_scopes = None
    if rt.budgets is not None:
        limit, budget_scopes = await rt.budgets.for_call(job.tenantId, job.containerId)
        if limit is not None and limit.remaining <= 0:
            return None  # the tenant cannot pay for it
    image = await rt.store.get_image(job.tenantId, job.imageId)
    if image is None or image.name != default_name:
        return None
    client, model_name, model_ref = resolve_side_model(rt, image, rt.turns.title_model)
    asked, answered = text_of(question.content)[:_SHOWN_CHARS], outcome.text.strip()[:_SHOWN_CHARS]
    shown = f"User: {asked}\n\nAssistant: {answered}"
    request = ModelRequest(
        model=model_name,
        messages=(ChatTurn("user", f"<conversation>\n{shown}\n</conversation>"),),
        system=TITLE_SYSTEM,
        max_tokens=TITLE_MAX_TOKENS,
    )
    started = rt.clock.monotonic()
    result = await complete(client, request, clock=rt.clock)
    title = clean_title(result.text) if result.error is None else ""
    await bill_side_call(
        rt,
        job,
        result,
        turn_id=f"{job.turnId}:title",
        kind="title",
        model_ref=model_ref,
        started=started,
        ok=bool(title),
        budget_scopes=budget_scopes,
    )
    if not title:
        return None
    # Read again: someone may have named it while the model was answering.
    current = await rt.store.get_image(job.tenantId, job.imageId)
    if current is None or current.name != default_name:
        return None
    await rt.store.put_image(current.model_copy(update={"name": title, "updatedAt": rt.clock.now_ms()}))
    log.info("session titled", extra={"session_id": job.sessionId, "model": model_ref})
    return title


__all__ = ["MAX_TITLE_CHARS", "TITLE_SYSTEM", "clean_title", "set_title", "title_after_turn"]
