"""The elicitation port: an MCP server asks the user a question in the middle of a tool call
(``elicitation/create``), and the question waits here for the client's answer.

Unlike an approval, the turn cannot suspend: the server holds the call open and keeps its own state
until the answer comes, so the tool call waits (bounded by the desk's ``timeout_s``; an interrupt or
the deadline answers ``cancel``). ``agent.tools.elicitation.ElicitationDesk`` keeps the questions of
the process that runs the call (docs/mcp.md, "Elicitation").
"""

from __future__ import annotations

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


class Elicitations(Protocol):
    """The questions waiting for an answer (``Runtime.elicitations``)."""

    timeout_s: float

    def open(
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

    def get(self, tenant_id: str, elicitation_id: str) -> PendingElicitation | None:
        """The tenant's open question (another tenant's reads as missing)."""
        ...

    def answer(self, tenant_id: str, elicitation_id: str, answer: ElicitationAnswer) -> bool:
        """Give an open question its answer; False if it is not the tenant's open question."""
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
    "Elicitations",
    "PendingElicitation",
]
