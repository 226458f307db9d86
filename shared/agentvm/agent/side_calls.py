"""A model call beside a turn (compacting its history, titling its session): billed like a turn's.

Its tokens become a usage record of their own kind, keyed by a turn id the caller derives from the
turn (``<turn>:compact:<seq>``, ``<turn>:title``), so a retried turn never bills it twice, and
count against the tenant's and the container's budgets (those set) once the record is new.

Embedding calls (knowledge indexing and search, ``bill_embeddings``) likewise: one record of kind
``embedding`` per model under a key the caller derives from its work (a document's version, a
turn's search), input tokens only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import UsageRecord

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from agentvm.agent.loop import StepOutcome
    from agentvm.llm import EmbeddingCall
    from agentvm.records import TurnJob, UsageKind
    from agentvm.runtime import Runtime
    from agentvm.security.budgets import Scope


async def bill_side_call(
    rt: Runtime,
    job: TurnJob,
    outcome: StepOutcome,
    *,
    turn_id: str,
    kind: UsageKind,
    model_ref: str,
    started: float,
    ok: bool,
    budget_scopes: Collection[Scope] | None = None,
) -> None:
    """Record the call's usage (nothing when the provider used no tokens) and charge the budgets
    (``budget_scopes``: those with a budget, as the caller's lookup found them; None: looked up)."""
    if not (outcome.input_tokens or outcome.output_tokens):
        return
    billed = await rt.store.put_usage(
        UsageRecord(
            turnId=turn_id,
            tenantId=job.tenantId,
            containerId=job.containerId,
            imageId=job.imageId,
            sessionId=job.sessionId,
            model=model_ref,
            inputTokens=outcome.input_tokens,
            outputTokens=outcome.output_tokens,
            cacheReadTokens=outcome.cache_read_tokens,
            cacheWriteTokens=outcome.cache_write_tokens,
            durationMs=int((rt.clock.monotonic() - started) * 1000),
            status="completed" if ok else "failed",
            kind=kind,
            estimated=outcome.usage_estimated,
            createdAt=rt.clock.now_ms(),
        )
    )
    if billed and rt.budgets is not None:
        await rt.budgets.record(
            job.tenantId, job.containerId, outcome.input_tokens + outcome.output_tokens, scopes=budget_scopes
        )


def embedding_usage_key(tenant_id: str, usage_id: str, model: str | None = None) -> str:
    """The usage record's key (its ``turnId``, unique across tenants): ``emb:<tenant>:<usage_id>``,
    and ``:<provider/model>`` when one piece of work used several models."""
    key = f"emb:{tenant_id}:{usage_id}"
    return key if model is None else f"{key}:{model}"


async def bill_embeddings(
    rt: Runtime,
    calls: Sequence[EmbeddingCall],
    *,
    tenant_id: str,
    usage_id: str,
    container_id: str = "",
    image_id: str = "",
    session_id: str = "",
) -> int:
    """Record the tokens of ``calls`` (an embedder's ``on_usage`` collected them) as usage of kind
    ``embedding``, and charge the tenant's (and the container's, if any) budget. One record per
    model, keyed by ``embedding_usage_key`` (``usage_id`` need only be unique within the tenant:
    a document's id and version, a turn's id and search); a record already written is not billed
    again. Returns the tokens newly billed.

    ``container_id`` / ``image_id`` / ``session_id``: the search's turn, when a turn searched;
    empty for a tenant's indexing, which belongs to no container."""
    by_model: dict[str, list[EmbeddingCall]] = {}
    for call in calls:
        by_model.setdefault(call.model, []).append(call)
    billed_tokens = 0
    for model, made in sorted(by_model.items()):
        tokens = sum(c.input_tokens for c in made)
        if not tokens:
            continue
        billed = await rt.store.put_usage(
            UsageRecord(
                turnId=embedding_usage_key(tenant_id, usage_id, model if len(by_model) > 1 else None),
                tenantId=tenant_id,
                containerId=container_id,
                imageId=image_id,
                sessionId=session_id,
                model=model,
                inputTokens=tokens,
                durationMs=sum(c.duration_ms for c in made),
                kind="embedding",
                createdAt=rt.clock.now_ms(),
            )
        )
        if billed:
            billed_tokens += tokens
            if rt.budgets is not None:
                await rt.budgets.record(tenant_id, container_id, tokens)
    return billed_tokens


__all__ = ["bill_embeddings", "bill_side_call", "embedding_usage_key"]
