"""What one WebSocket frame counts as in the metrics (``observability/metrics.py``): its tenant,
and the code of the error it was answered with. Both protocols (``dispatch`` for AgentX v1,
``agentx_v2`` for JSON-RPC) fill in the frame's tally; ``dispatch.handle_frame`` records it once.
A task-local: frames of other connections run concurrently."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from agentvm.logs import bind


@dataclass
class Tally:
    tenant_id: str | None = None
    error_code: str | None = None  # None: it succeeded
    counted: bool = True  # False for ignored frames (acks, echoed responses)


current: ContextVar[Tally | None] = ContextVar("frame_tally", default=None)


def counted_for(tenant_id: str | None) -> None:
    """The frame belongs to this tenant (its log lines carry it too)."""
    tally = current.get()
    if tally is not None:
        tally.tenant_id = tenant_id
        bind(tenant_id=tenant_id)


def failed(code: str) -> None:
    tally = current.get()
    if tally is not None:
        tally.error_code = code


def not_counted() -> None:
    tally = current.get()
    if tally is not None:
        tally.counted = False


__all__ = ["Tally", "counted_for", "current", "failed", "not_counted"]
