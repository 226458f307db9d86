"""MCP elicitation surfaced to the client: an MCP server asks the user something mid-call
(``elicitation/create``); the client sees ``tool_elicitation`` and answers accept (with content valid
against the server's schema), decline or cancel (docs/protocol.md, "Elicitation").

The call cannot suspend like an approval (the server holds it open with its own state), so it waits:

- ``ElicitationDesk`` (``ports.Elicitations``) keeps the open questions of this process, each with a
  future its answer resolves; only the owner's tenant can read or answer one.
- ``CallElicitation`` is one running call's ``ElicitFn`` (``Toolbox.run`` makes one per call, like its
  progress reporter). It declines at once when nobody is subscribed to the session (no client could
  answer), and for a question too large to show; otherwise it sends ``tool_elicitation``, pauses the
  call's own timeout while it waits (the user's time is not the tool's), and answers ``cancel`` at
  the desk's ``timeout_s`` (``AVM_MCP_ELICITATION_TIMEOUT_S``) or when the call ends first (an
  interrupt). Each question ends with ``tool_elicitation_ended`` (how it was answered, never the
  content).

The questions live in the process that runs the call; an answer must reach that process (the same
``avm serve``; docs/mcp.md says what that means with workers, nodes and AWS).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.ports import ElicitationAnswer, PendingElicitation

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from agentvm.agent.tools.reports import ToolReports
    from agentvm.ports import ElicitationOwner, ElicitationRequest, Elicitations

TOOL_ELICITATION = "tool_elicitation"
TOOL_ELICITATION_ENDED = "tool_elicitation_ended"
DEFAULT_ELICITATION_TIMEOUT_S = 300.0
MAX_MESSAGE_CHARS = 2_000  # longer messages are cut (with an ellipsis)
MAX_SCHEMA_BYTES = 16 * 1024  # a larger schema is declined at once
MAX_URL_CHARS = 2_048
MAX_CONTENT_BYTES = 64 * 1024  # an answer's content, as JSON
MAX_OPEN_PER_TENANT = 100  # more open questions at once: declined


class ElicitationDesk:
    """The open questions of this process (``ports.Elicitations``), by id."""

    def __init__(
        self, *, timeout_s: float = DEFAULT_ELICITATION_TIMEOUT_S, max_per_tenant: int = MAX_OPEN_PER_TENANT
    ) -> None:
        self.timeout_s = timeout_s
        self.max_per_tenant = max_per_tenant
        self._open: dict[str, tuple[PendingElicitation, asyncio.Future[ElicitationAnswer]]] = {}

    def open(
        self,
        owner: ElicitationOwner,
        tool_call_id: str,
        tool_name: str,
        request: ElicitationRequest,
        *,
        deadline_at: int,
    ) -> PendingElicitation | None:
        if self.open_count(owner.tenant_id) >= self.max_per_tenant:
            return None
        pending = PendingElicitation(
            f"elicit_{secrets.token_hex(12)}", owner, tool_call_id, tool_name, request, deadline_at
        )
        future: asyncio.Future[ElicitationAnswer] = asyncio.get_running_loop().create_future()
        self._open[pending.elicitation_id] = (pending, future)
        return pending

    def open_count(self, tenant_id: str) -> int:
        return sum(1 for p, _ in self._open.values() if p.owner.tenant_id == tenant_id)

    async def wait(self, elicitation_id: str, timeout_s: float) -> ElicitationAnswer | None:
        entry = self._open.get(elicitation_id)
        if entry is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(entry[1]), timeout_s)
        except TimeoutError:
            return None
        finally:
            self._open.pop(elicitation_id, None)

    def get(self, tenant_id: str, elicitation_id: str) -> PendingElicitation | None:
        entry = self._open.get(elicitation_id)
        if entry is None or entry[0].owner.tenant_id != tenant_id or entry[1].done():
            return None
        return entry[0]

    def answer(self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer) -> bool:
        if self.get(tenant_id, elicitation_id) is None:
            return False
        self._open[elicitation_id][1].set_result(answer)
        return True

    def cancel_call(self, tool_call_id: str) -> int:
        cancelled = 0
        for pending, future in list(self._open.values()):
            if pending.tool_call_id == tool_call_id and not future.done():
                future.set_result(ElicitationAnswer("cancel"))
                cancelled += 1
        return cancelled


@dataclass
class ElicitationScope:
    """What a turn's calls need to ask its user (``Toolbox.elicitation``, set by the worker)."""

    desk: Elicitations
    owner: ElicitationOwner
    has_client: Callable[[], Awaitable[bool]]  # someone is subscribed to the session now


class CallElicitation:
    """One running call's questions (an ``ElicitFn``); ``close`` when the call ends."""

    def __init__(
        self,
        scope: ElicitationScope,
        reports: ToolReports,
        call_id: str,
        tool_name: str,
        *,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._scope = scope
        self._reports = reports
        self._call_id = call_id
        self._tool_name = tool_name
        self._now_ms = now_ms
        self.limit: asyncio.Timeout | None = None  # the call's timeout, paused while the user answers
        self._paused = 0
        self._left: float | None = None
        self.closed = False  # the call ended: its open questions were answered cancel
        self.asked = 0  # questions the server asked during the call

    async def __call__(self, request: ElicitationRequest) -> ElicitationAnswer:
        self.asked += 1
        desk = self._scope.desk
        if _too_large(request) or self.closed:
            return ElicitationAnswer("decline")
        if not await self._scope.has_client():  # nobody could answer: the server hears it at once
            return ElicitationAnswer("decline")
        timeout_s = float(desk.timeout_s)
        deadline_at = self._now_ms() + int(timeout_s * 1000)
        pending = desk.open(
            self._scope.owner, self._call_id, self._tool_name, request, deadline_at=deadline_at
        )
        if pending is None:  # the tenant has MAX_OPEN_PER_TENANT questions open already
            return ElicitationAnswer("decline")
        self._reports.emit(TOOL_ELICITATION, elicitation_event_data(pending))
        with self._pause():
            answer = await desk.wait(pending.elicitation_id, timeout_s)
        reason = "answered"
        if answer is None:
            answer, reason = ElicitationAnswer("cancel"), "timed_out"
        elif self.closed:
            reason = "interrupted"
        self._reports.emit(
            TOOL_ELICITATION_ENDED,
            {
                "elicitationId": pending.elicitation_id,
                "toolId": self._call_id,
                "toolName": self._tool_name,
                "action": answer.action,
                "reason": reason,
            },
        )
        return answer

    def close(self) -> None:
        """The call ended (a result, a failure, an interrupt): its open questions answer ``cancel``."""
        self.closed = True
        self._scope.desk.cancel_call(self._call_id)

    @contextlib.contextmanager
    def _pause(self) -> Iterator[None]:
        limit = self.limit
        if limit is None:
            yield
            return
        loop = asyncio.get_running_loop()
        if self._paused == 0:
            when = limit.when()
            self._left = None if when is None else max(0.0, when - loop.time())
            limit.reschedule(None)
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            if self._paused == 0 and self._left is not None and not self.closed:
                limit.reschedule(loop.time() + self._left)


def elicitation_event_data(pending: PendingElicitation) -> dict[str, Any]:
    """The ``data`` of ``tool_elicitation``."""
    request = pending.request
    message = request.message
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    data: dict[str, Any] = {
        "elicitationId": pending.elicitation_id,
        "turnId": pending.owner.turn_id,
        "toolId": pending.tool_call_id,
        "toolName": pending.tool_name,
        "mode": request.mode,
        "message": message,
        "deadlineAt": pending.deadline_at,
    }
    if request.mode == "url":
        data["url"] = request.url
    else:
        data["requestedSchema"] = request.schema
    return data


def _too_large(request: ElicitationRequest) -> bool:
    if request.mode == "url":
        return not request.url or len(request.url) > MAX_URL_CHARS
    return len(json.dumps(request.schema, default=str)) > MAX_SCHEMA_BYTES


def content_problem(schema: dict[str, Any], content: dict[str, Any]) -> str | None:
    """Why an accepted form's ``content`` does not fit the server's ``schema`` (jsonschema, with the
    formats MCP forms use: email, uri, date, date-time), or None if it does."""
    from jsonschema import FormatChecker
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    if len(json.dumps(content, default=str)) > MAX_CONTENT_BYTES:
        return f"the content is over {MAX_CONTENT_BYTES // 1024} KB"
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
    except Exception as exc:  # noqa: BLE001 (a server's broken schema: say so, do not crash)
        return f"the server's schema is not valid JSON Schema: {str(exc)[:200]}"
    error = best_match(cls(schema, format_checker=FormatChecker()).iter_errors(content))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return error.message[:300] + (f" (at {where})" if where else "")


_CURRENT: ContextVar[CallElicitation | None] = ContextVar("agentvm_tool_call_elicitation", default=None)


def current_elicitation() -> CallElicitation | None:
    """The elicitation handler of the call this code runs in (``Toolbox.run`` sets it), if any."""
    return _CURRENT.get()


def set_current_elicitation(elicitation: CallElicitation | None) -> Any:
    return _CURRENT.set(elicitation)


def reset_current_elicitation(token: Any) -> None:
    _CURRENT.reset(token)


__all__ = [
    "DEFAULT_ELICITATION_TIMEOUT_S",
    "MAX_CONTENT_BYTES",
    "MAX_MESSAGE_CHARS",
    "MAX_SCHEMA_BYTES",
    "TOOL_ELICITATION",
    "TOOL_ELICITATION_ENDED",
    "CallElicitation",
    "ElicitationDesk",
    "ElicitationScope",
    "content_problem",
    "current_elicitation",
    "elicitation_event_data",
    "reset_current_elicitation",
    "set_current_elicitation",
]
