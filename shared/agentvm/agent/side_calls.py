"""A model call beside a turn (compacting its history, titling its session): billed like a turn's.

Its tokens become a usage record of their own kind, keyed by a turn id the caller derives from the
turn (``<turn>:compact:<seq>``, ``<turn>:title``), so a retried turn never bills it twice, and
count against the tenant's and the container's budgets once the record is new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import UsageRecord

if TYPE_CHECKING:
    from agentvm.agent.loop import StepOutcome
    from agentvm.records import TurnJob, UsageKind
    from agentvm.runtime import Runtime


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
) -> None:
    """Record the call's usage (nothing when the provider used no tokens) and charge the budgets."""
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
        await rt.budgets.record(job.tenantId, job.containerId, outcome.input_tokens + outcome.output_tokens)


__all__ = ["bill_side_call"]
