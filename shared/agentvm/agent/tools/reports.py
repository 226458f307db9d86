"""What a turn's tools tell the client while the turn runs, besides their results: an MCP server
that could not start, list or answer (``mcp_server_failed``), and a running call's progress
(``tool_progress``). Both are additive events (docs/protocol.md).

``ToolReports`` belongs to one toolbox: reports made before the turn's frames can be sent (a server
whose tools could not be listed while the toolbox was built) wait until the turn attaches its
listener. ``CallProgress`` is one call's progress, rate-limited: the first report goes at once,
later ones at most every ``PROGRESS_INTERVAL_S`` (the last one, progress reaching its total, always),
so a server that reports 1,000 times a second costs the client a few frames a second.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

Json = dict[str, Any]

MCP_SERVER_FAILED = "mcp_server_failed"
# the reason a server with ``"auth": "oauth"`` the tenant has not authorized is reported with
MCP_NEEDS_AUTHORIZATION = (
    "needs OAuth authorization: an admin of the tenant must authorize it first "
    "(POST /v1/mcp/oauth/authorizations with its server_url, then open the authorization_url)"
)
TOOL_PROGRESS = "tool_progress"
PROGRESS_INTERVAL_S = 0.5
_MAX_MESSAGE_CHARS = 500


class ToolReports:
    def __init__(self) -> None:
        self._listener: Callable[[str, Json], None] | None = None
        self._queued: list[tuple[str, Json]] = []

    def attach(self, listener: Callable[[str, Json], None]) -> None:
        """Send reports to ``listener`` from now on, the queued ones first."""
        self._listener = listener
        queued, self._queued = self._queued, []
        for type_, data in queued:
            listener(type_, data)

    def emit(self, type_: str, data: Json) -> None:
        if self._listener is None:
            self._queued.append((type_, data))
        else:
            self._listener(type_, data)

    def server_failed(
        self, server: str, stage: str, reason: str, *, tool: str | None = None, exit_code: int | None = None
    ) -> None:
        data: Json = {"server": server, "stage": stage, "reason": reason}
        if tool is not None:
            data["toolName"] = tool
        if exit_code is not None:
            data["exitCode"] = exit_code
        self.emit(MCP_SERVER_FAILED, data)

    @property
    def queued(self) -> list[tuple[str, Json]]:
        """The reports no listener has taken yet."""
        return list(self._queued)


class CallProgress:
    """One running call's progress reports (a ``ProgressFn``), rate-limited."""

    def __init__(
        self,
        reports: ToolReports,
        call_id: str,
        tool_name: str,
        *,
        interval_s: float = PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reports = reports
        self._call_id = call_id
        self._tool_name = tool_name
        self._interval_s = interval_s
        self._clock = clock
        self._last_sent: float | None = None
        self.received = 0  # reports the tool made
        self.sent = 0  # events they became

    @property
    def call_id(self) -> str:
        """The running call's id (the model's tool call id): what a tool keys a retried write on."""
        return self._call_id

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.received += 1
        now = self._clock()
        final = total is not None and progress >= total
        if not final and self._last_sent is not None and now - self._last_sent < self._interval_s:
            return
        self._last_sent = now
        self.sent += 1
        data: Json = {"toolId": self._call_id, "toolName": self._tool_name, "progress": progress}
        if total is not None:
            data["total"] = total
        if message:
            data["message"] = message[:_MAX_MESSAGE_CHARS]
        self._reports.emit(TOOL_PROGRESS, data)


_CURRENT: ContextVar[CallProgress | None] = ContextVar("agentvm_tool_call_progress", default=None)


def current_progress() -> CallProgress | None:
    """The progress reporter of the call this code runs in (``Toolbox.run`` sets it), if any."""
    return _CURRENT.get()


def set_current_progress(progress: CallProgress | None) -> Any:
    """Make ``progress`` the current call's; returns the token ``reset_current_progress`` takes."""
    return _CURRENT.set(progress)


def reset_current_progress(token: Any) -> None:
    _CURRENT.reset(token)


__all__ = [
    "MCP_NEEDS_AUTHORIZATION",
    "MCP_SERVER_FAILED",
    "PROGRESS_INTERVAL_S",
    "TOOL_PROGRESS",
    "CallProgress",
    "ToolReports",
    "current_progress",
    "reset_current_progress",
    "set_current_progress",
]
