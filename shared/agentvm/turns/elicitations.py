"""A client answers an MCP server's question (``tool_elicitation``): accept with content, decline or
cancel. One use case for the WebSocket request (``elicitation_answer_request``) and the HTTP route
(``POST /v1/elicitations/{elicitationId}``); the question itself waits in
``agent.tools.elicitation.ElicitationDesk``.

The question must be the caller's tenant's and still open, wherever its call waits (this process,
or another one of the host: the desk's shared store); another tenant's id, an answered one, one
past its deadline and an unknown one read alike (``NotFound``). An accepted form's content must fit the
server's schema (``BadRequest`` naming the first problem; the question stays open for a corrected
answer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.agent.tools.elicitation import content_problem
from agentvm.errors import BadRequest, NotFound
from agentvm.ports import ELICITATION_ACTIONS, ElicitationAnswer

if TYPE_CHECKING:
    from agentvm.runtime import Runtime


async def answer_elicitation(
    rt: Runtime, tenant_id: str, elicitation_id: str, action: str, content: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Give the tenant's open question its answer; the answer as the response's data."""
    desk = rt.elicitations
    pending = None if desk is None else await desk.get(tenant_id, elicitation_id)
    if desk is None or pending is None:
        raise NotFound(f"No question {elicitation_id} is waiting for an answer")
    if action not in ELICITATION_ACTIONS:
        raise BadRequest(f"action must be one of {', '.join(ELICITATION_ACTIONS)}")
    if action != "accept" and content is not None:
        raise BadRequest(f"a {action} carries no content")
    answer = ElicitationAnswer(action)
    if action == "accept" and pending.request.mode == "form":
        given = content if content is not None else {}
        problem = content_problem(pending.request.schema, given)
        if problem is not None:
            raise BadRequest(f"the content does not fit the server's schema: {problem}")
        answer = ElicitationAnswer("accept", given)
    if not await desk.answer(tenant_id, elicitation_id, answer):  # answered (or closed) meanwhile
        raise NotFound(f"No question {elicitation_id} is waiting for an answer")
    return {"elicitationId": elicitation_id, "action": action}


__all__ = ["answer_elicitation"]
