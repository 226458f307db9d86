"""Answering an MCP server's question over HTTP (docs/protocol.md, "Elicitation"):
``POST /v1/elicitations/{elicitationId}`` ``{"action": "accept", "content": {...}}`` (or ``decline``,
``cancel``), as the WebSocket's ``elicitation_answer_request`` does (``turns.elicitations``).

Any key of the tenant (an end user's app answers with a client key, as it sends messages); another
tenant's question reads exactly like one that does not exist (``404``), as does one answered already
or closed. The question may wait in any process of the host (docs/mcp.md, "Elicitation").
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from agentvm.api.deps import Caller, RuntimeDep  # noqa: TC001 (FastAPI reads annotations)
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.turns.elicitations import answer_elicitation

router = APIRouter(prefix="/elicitations", tags=["elicitations"])

_ANSWERED = {"elicitationId": "elicit_5f2a9c0d1e3b4a6f7c8d9e0a", "action": "accept"}


class ElicitationReply(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=examples(
            {"action": "accept", "content": {"name": "Ada", "check": True}}, {"action": "decline"}
        ),
    )

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = Field(
        default=None, description="accept of a form: the values, checked against the server's requestedSchema"
    )


class ElicitationAnswered(BaseModel):
    elicitationId: str
    action: Literal["accept", "decline", "cancel"]


@router.post(
    "/{elicitation_id}",
    response_model=None,
    responses={
        **ok(200, ElicitationAnswered, _ANSWERED, "the answer reached the server's call"),
        **error_responses(400, 404),
    },
)
async def answer(
    runtime: RuntimeDep,
    caller: Caller,
    body: ElicitationReply,
    elicitation_id: str = Path(min_length=1, max_length=128),
) -> dict[str, Any]:
    """Answer the question of a ``tool_elicitation`` event: the MCP server's call goes on with it."""
    return await answer_elicitation(runtime, caller.tenant_id, elicitation_id, body.action, body.content)


__all__ = ["router"]
