"""The elicitation port: an MCP server asks the user a question in the middle of a tool call
(``elicitation/create``), and the question waits here for the client's answer.

Unlike an approval, the turn cannot suspend: the server holds the call open and keeps its own state
until the answer comes, so the tool call waits (bounded by the desk's ``timeout_s``; an interrupt or
the deadline answers ``cancel``). ``agent.tools.elicitation.ElicitationDesk`` keeps the questions of
the process that runs the call; when the answer may arrive at another process (``avm serve
--workers N``, cluster nodes, AWS's Lambdas) the desk also writes them to an ``ElicitationStore``
shared by the host's processes, where any process answers and the waiting one reads the answer
(docs/mcp.md, "Elicitation").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ElicitationAction = Literal["accept", "decline", "cancel"]
ELICITATION_ACTIONS: tuple[ElicitationAction, ...] = ("accept", "decline", "cancel")


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """What the server asks: a form (``schema``: a flat JSON Schema object of primitive fields) or
    a URL to open (``url``: consent to visit it; the answer carries no content)."""

    message: str
    mode: Literal["form", "url"] = "form"
    schema: dict[str, Any] = field(default_factory=dict)
    url: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    action: ElicitationAction
    content: dict[str, Any] | None = None  # accept of a form: the values, valid against its schema

    def to_json(self) -> str:
        """As an ``ElicitationStore`` keeps it."""
        return json.dumps({"action": self.action, "content": self.content})

    @classmethod
    def from_json(cls, text: str) -> ElicitationAnswer:
        data = json.loads(text)
        return cls(data["action"], data.get("content"))


class ElicitFn(Protocol):
    """Answers one running call's elicitations (``McpSession.call_tool(on_elicit=...)``)."""

    async def __call__(self, request: ElicitationRequest) -> ElicitationAnswer: ...


@dataclass(frozen=True, slots=True)
class ElicitationOwner:
    """Whose question it is: only this tenant may answer it, and its subscribers see it."""

    tenant_id: str
    container_id: str
    session_id: str
    turn_id: str


@dataclass(slots=True)
class PendingElicitation:
    elicitation_id: str
    owner: ElicitationOwner
    tool_call_id: str
    tool_name: str
    request: ElicitationRequest
    deadline_at: int  # epoch ms: answered ``cancel`` then

    def to_json(self) -> str:
        """What an ``ElicitationStore`` keeps besides its keys: owner, call, and the question."""
        owner, request = self.owner, self.request
        return json.dumps(
            {
                "owner": [owner.tenant_id, owner.container_id, owner.session_id, owner.turn_id],
                "toolCallId": self.tool_call_id,
                "toolName": self.tool_name,
                "message": request.message,
                "mode": request.mode,
                "schema": request.schema,
                "url": request.url,
            }
        )

    @classmethod
    def from_json(cls, elicitation_id: str, deadline_at: int, text: str) -> PendingElicitation:
        data = json.loads(text)
        request = ElicitationRequest(
            data["message"], mode=data["mode"], schema=data["schema"], url=data["url"]
        )
        return cls(
            elicitation_id,
            ElicitationOwner(*data["owner"]),
            data["toolCallId"],
            data["toolName"],
            request,
            deadline_at,
        )


class ElicitationStore(Protocol):
    """Open questions shared by the processes of a host (SQLite, PostgreSQL, DynamoDB), by tenant.

    Every read and write names the tenant: another tenant's id reads as missing. A question is
    open from ``put`` until ``finish`` or its ``deadline_at``; ``answer`` succeeds once, on an open
    question, and ``finish`` returns the answer given before it (so an answer that raced the
    deadline is either used or refused, never accepted and lost)."""

    async def put(self, pending: PendingElicitation) -> None:
        """Record an open question (its id is new)."""
        ...

    async def open_count(self, tenant_id: str, now_ms: int) -> int:
        """How many of the tenant's questions are open (unanswered, before their deadline)."""
        ...

    async def get(self, tenant_id: str, elicitation_id: str, now_ms: int) -> PendingElicitation | None:
        """The tenant's question while it is open and unanswered; else None."""
        ...

    async def answer(
        self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer, now_ms: int
    ) -> bool:
        """Store the answer of the tenant's open, unanswered question; False otherwise (answered,
        closed, past its deadline, unknown or another tenant's)."""
        ...

    async def answer_of(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        """The answer given, if any (the waiting process polls this)."""
        ...

    async def finish(self, tenant_id: str, elicitation_id: str) -> ElicitationAnswer | None:
        """The wait ended: no answer is taken from now on; returns the one given before, if any."""
        ...


class Elicitations(Protocol):
    """The questions waiting for an answer (``Runtime.elicitations``)."""

    timeout_s: float
    max_per_tenant: int  # open questions of one tenant at once; more are declined
    # shared by the host's processes (None: one process): a question that outlives the process
    # asking it (a suspended MCP task's, asked by the waits sweeper) is kept there only
    store: ElicitationStore | None

    def now_ms(self) -> int:
        """The clock questions' deadlines are read on (epoch ms)."""
        ...

    def wait_s(self) -> float:
        """How long a question asked now may wait: ``timeout_s``, or less when this process has less
        time left (a Lambda's invocation); 0: too little time, the question is declined at once."""
        ...

    async def open(
        self,
        owner: ElicitationOwner,
        tool_call_id: str,
        tool_name: str,
        request: ElicitationRequest,
        *,
        deadline_at: int,
    ) -> PendingElicitation | None:
        """Register a question; ``wait`` for its answer. None: the tenant has too many open."""
        ...

    async def wait(self, elicitation_id: str, timeout_s: float) -> ElicitationAnswer | None:
        """The answer, or None at the timeout; the question is closed either way."""
        ...

    async def get(self, tenant_id: str, elicitation_id: str) -> PendingElicitation | None:
        """The tenant's open question (another tenant's reads as missing), wherever it waits."""
        ...

    async def answer(self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer) -> bool:
        """Give an open question its answer, once; False if it is not the tenant's open question."""
        ...

    def cancel_call(self, tool_call_id: str) -> int:
        """Answer ``cancel`` to the open questions of a call that ended (an interrupt); how many."""
        ...


__all__ = [
    "ELICITATION_ACTIONS",
    "ElicitFn",
    "ElicitationAction",
    "ElicitationAnswer",
    "ElicitationOwner",
    "ElicitationRequest",
    "ElicitationStore",
    "Elicitations",
    "PendingElicitation",
]
