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

The questions wait in the process that runs the call. With one ``avm serve`` process the answer
arrives there; with several processes (workers on SQLite, cluster nodes on PostgreSQL, AWS's
Lambdas on DynamoDB) the desk keeps them in the host's ``ports.ElicitationStore`` too, where the
process that receives the answer writes it and the waiting one reads it (docs/mcp.md, "Elicitation").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import secrets
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.ports import ElicitationAnswer, PendingElicitation

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from agentvm.agent.tools.reports import ToolReports
    from agentvm.ports import ElicitationOwner, ElicitationRequest, Elicitations, ElicitationStore

TOOL_ELICITATION = "tool_elicitation"
TOOL_ELICITATION_ENDED = "tool_elicitation_ended"
DEFAULT_ELICITATION_TIMEOUT_S = 300.0
MAX_MESSAGE_CHARS = 2_000  # longer messages are cut (with an ellipsis)
MAX_SCHEMA_BYTES = 16 * 1024  # a larger schema is declined at once
MAX_URL_CHARS = 2_048
MAX_CONTENT_BYTES = 64 * 1024  # an answer's content, as JSON
MAX_OPEN_PER_TENANT = 100  # more open questions at once: declined
DEFAULT_POLL_S = 0.25  # with a shared store: how often the waiting process reads its answer
MIN_WAIT_S = 10.0  # a process with less time left than this declines (a Lambda near its end)


class ElicitationDesk:
    """The open questions of this process (``ports.Elicitations``), by id.

    Alone (``store`` None: one ``avm serve`` process) a question is a future here, which the answer
    resolves. With a ``store`` shared by the host's processes, every question is also a row there:
    any process reads and answers it (``get``, ``answer``: the store's conditional write, so the first
    answer wins), and the waiting process learns of it at once when the answer arrived here (the
    future, the in-process fast path), when ``wake`` is called (PostgreSQL's NOTIFY), or at its next
    read of the store, every ``poll_s``. When the wait ends the row is finished; an answer given
    before that is the one used, even one that raced the deadline.

    ``wait_budget``: the seconds this process may still wait (a Lambda's remaining time, less a
    reserve), or None when unbounded; a question's wait is cut to it, and declined below
    ``MIN_WAIT_S``.
    """

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_ELICITATION_TIMEOUT_S,
        max_per_tenant: int = MAX_OPEN_PER_TENANT,
        store: ElicitationStore | None = None,
        poll_s: float = DEFAULT_POLL_S,
        wait_budget: Callable[[], float | None] | None = None,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.timeout_s = timeout_s
        self.max_per_tenant = max_per_tenant
        self.store = store
        self.poll_s = poll_s
        self._wait_budget = wait_budget
        self._now_ms = now_ms
        self._open: dict[str, _Open] = {}

    def now_ms(self) -> int:
        return self._now_ms()

    def wait_s(self) -> float:
        budget = None if self._wait_budget is None else self._wait_budget()
        if budget is None:
            return float(self.timeout_s)
        wait = min(float(self.timeout_s), budget)
        return wait if wait >= MIN_WAIT_S else 0.0

    async def open(
        self,
        owner: ElicitationOwner,
        tool_call_id: str,
        tool_name: str,
        request: ElicitationRequest,
        *,
        deadline_at: int,
    ) -> PendingElicitation | None:
        if self.store is not None:
            if await self.store.open_count(owner.tenant_id, self._now_ms()) >= self.max_per_tenant:
                return None
        elif self.open_count(owner.tenant_id) >= self.max_per_tenant:
            return None
        pending = PendingElicitation(
            f"elicit_{secrets.token_hex(12)}", owner, tool_call_id, tool_name, request, deadline_at
        )
        if self.store is not None:  # the answering side needs the schema, not a long message
            kept = dataclasses.replace(request, message=request.message[:MAX_MESSAGE_CHARS])
            await self.store.put(dataclasses.replace(pending, request=kept))
        self._open[pending.elicitation_id] = _Open(pending, asyncio.get_running_loop().create_future())
        return pending

    def open_count(self, tenant_id: str) -> int:
        """The tenant's questions waiting in this process."""
        return sum(1 for entry in self._open.values() if entry.pending.owner.tenant_id == tenant_id)

    async def wait(self, elicitation_id: str, timeout_s: float) -> ElicitationAnswer | None:
        entry = self._open.get(elicitation_id)
        if entry is None:
            return None
        tenant_id = entry.pending.owner.tenant_id
        answer: ElicitationAnswer | None = None
        try:
            answer = await self._answer_in(entry, timeout_s)
        finally:
            self._open.pop(elicitation_id, None)
            if self.store is not None:  # no answer is taken from now on; one given before wins
                stored = await asyncio.shield(self.store.finish(tenant_id, elicitation_id))
                if answer is None or (stored is not None and not entry.cancelled):
                    answer = stored
        return answer

    async def _answer_in(self, entry: _Open, timeout_s: float) -> ElicitationAnswer | None:
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_s
        while True:
            if entry.future.done():
                return entry.future.result()
            entry.poke.clear()  # a wake from here on is seen by the next wait, not lost
            if self.store is not None:
                found = await self.store.answer_of(
                    entry.pending.owner.tenant_id, entry.pending.elicitation_id
                )
                if found is not None:
                    return found
            left = until - loop.time()
            if left <= 0:
                return None
            step = left if self.store is None else min(left, self.poll_s)
            poked = asyncio.ensure_future(entry.poke.wait())
            try:
                await asyncio.wait((entry.future, poked), timeout=step, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                if entry.future.done():  # the call ended (its cancel came with the task's): say so
                    return entry.future.result()
                raise
            finally:
                poked.cancel()

    def wake(self, elicitation_id: str) -> None:
        """An answer was stored by another process (a notification): read it now, not at the poll."""
        entry = self._open.get(elicitation_id)
        if entry is not None:
            entry.poke.set()

    async def get(self, tenant_id: str, elicitation_id: str) -> PendingElicitation | None:
        if self.store is not None:
            return await self.store.get(tenant_id, elicitation_id, self._now_ms())
        entry = self._open.get(elicitation_id)
        if entry is None or entry.pending.owner.tenant_id != tenant_id or entry.future.done():
            return None
        return entry.pending

    async def answer(self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer) -> bool:
        if self.store is not None:
            if not await self.store.answer(tenant_id, elicitation_id, answer, self._now_ms()):
                return False
        elif await self.get(tenant_id, elicitation_id) is None:
            return False
        entry = self._open.get(elicitation_id)  # waiting here: told at once (the fast path)
        if entry is not None and entry.pending.owner.tenant_id == tenant_id and not entry.future.done():
            entry.future.set_result(answer)
        return True

    def cancel_call(self, tool_call_id: str) -> int:
        cancelled = 0
        for entry in list(self._open.values()):
            if entry.pending.tool_call_id == tool_call_id and not entry.future.done():
                entry.cancelled = True
                entry.future.set_result(ElicitationAnswer("cancel"))
                cancelled += 1
        return cancelled


@dataclass
class _Open:
    """A question waiting in this process: its answer's future, and the wake-up of a notification."""

    pending: PendingElicitation
    future: asyncio.Future[ElicitationAnswer]
    poke: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False  # the call ended (an interrupt): cancel, whatever was stored


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
        if too_large(request) or self.closed:
            return ElicitationAnswer("decline")
        if not await self._scope.has_client():  # nobody could answer: the server hears it at once
            return ElicitationAnswer("decline")
        timeout_s = desk.wait_s()
        if timeout_s <= 0:  # this process has too little time left to wait (a Lambda near its end)
            return ElicitationAnswer("decline")
        deadline_at = self._now_ms() + int(timeout_s * 1000)
        pending = await desk.open(
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


def too_large(request: ElicitationRequest) -> bool:
    """A question too large to show (declined at once)."""
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
    "too_large",
]
