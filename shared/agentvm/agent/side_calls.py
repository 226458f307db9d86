"""A model call beside a turn (compacting its history, titling its session): billed like a turn's.

Its tokens become a usage record of their own kind, keyed by a turn id the caller derives from the
turn (``<turn>:compact:<seq>``, ``<turn>:title``), so a retried turn never bills it twice, and
count against the tenant's and the container's budgets (those set) once the record is new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import UsageRecord

if TYPE_CHECKING:
    from collections.abc import Collection

    from agentvm.agent.loop import StepOutcome
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


__all__ = ["bill_side_call"]
