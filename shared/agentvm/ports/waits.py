"""The tool-wait port: the tool calls suspended turns wait on (``turns/waits.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentvm.records import ToolWait


class ToolWaits(Protocol):
    """The tool calls suspended turns wait on (``records.ToolWait``), by ``(turnId, toolCallId)``."""

    async def put_wait(self, wait: ToolWait) -> bool:
        """Create if absent. True if this call created it."""
        ...

    async def get_wait(self, turn_id: str, call_id: str) -> ToolWait | None: ...
    async def turn_waits(self, turn_id: str) -> list[ToolWait]:
        """Every wait of one turn, consumed ones included."""
        ...

    async def decide(self, turn_id: str, call_id: str, changes: Mapping[str, Any]) -> ToolWait | None:
        """Apply ``changes`` if the wait is still ``pending`` (atomically); the wait as it is now,
        or None if it was not pending (decided already) or does not exist."""
        ...

    async def consume(self, turn_id: str, call_id: str) -> None:
        """The call's result is stored: the wait is done (no longer listed nor swept)."""
        ...

    async def reschedule(self, wait: ToolWait, check_at: int) -> None:
        """Set when the sweeper looks at this (unconsumed) wait next."""
        ...

    async def list_waits(self, tenant_id: str, container_id: str | None = None) -> list[ToolWait]:
        """The tenant's unconsumed waits (of one container), oldest first."""
        ...

    async def due_waits(self, now_ms: int, limit: int) -> list[ToolWait]:
        """Unconsumed waits whose ``checkAt`` has passed, across tenants (for the sweeper)."""
        ...


__all__ = [
    "ToolWaits",
]
