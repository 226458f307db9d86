"""The turn queue port: where accepted turns wait for a worker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agentvm.records import TurnJob


class TurnQueue(Protocol):
    """Where accepted turns wait for a worker. Turns of one session run in order."""

    async def enqueue(self, job: TurnJob) -> None:
        """Idempotent by ``job.jobKey``."""
        ...


__all__ = [
    "TurnQueue",
]
