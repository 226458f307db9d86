"""The interrupt port: the worker's cancel watch, one poll per interval for all the turns it runs.

Implemented by ``turns.cancel_poll.CancelPoll`` (whose docstring says why no interrupt is missed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio
    from contextlib import AbstractContextManager


class CancelWatch(Protocol):
    """Sets a running turn's cancel event when its interrupt mark is read (``Runtime.cancel_poll``)."""

    def watch(self, rt: Any, turn_id: str, cancelled: asyncio.Event) -> AbstractContextManager[str]:
        """Poll for ``turn_id`` until the block ends; yields the poller id its ``running`` write names.
        ``rt``: the ``Runtime`` (ports sit below it)."""
        ...

    def poller_of(self, turn_id: str) -> str | None:
        """The poller id watching ``turn_id`` on the running loop, if any (tests)."""
        ...


__all__ = [
    "CancelWatch",
]
