"""The additive requests of suspended turns (docs/protocol.md, "Suspended turns"): approve or
deny a call, return a client-side tool's result, list what the caller's turns wait on; and answer
an MCP server's question to the user during a call (``elicitation_answer``).

Not in AgentX v1: a v1 client never sends them, and still sees the turn's normal tool events and
its ``conversation_end`` once the turn goes on (an unanswered wait times out at its deadline).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentvm.images import image_of
from agentvm.turns.elicitations import answer_elicitation
from agentvm.turns.waits import answer

if TYPE_CHECKING:
    from agentvm.events import Json
    from agentvm.gateway.v1.commands import CommandContext
    from agentvm.gateway.v1.frames import (
        ElicitationAnswerSubmit,
        ToolApproval,
        ToolResultSubmit,
        ToolWaitList,
    )


async def tool_approval(ctx: CommandContext, req: ToolApproval) -> Json:
    wait = await answer(
        ctx.rt,
        ctx.tenant_id,
        req.turnId,
        req.toolCallId,
        kind="approval",
        status="approved" if req.approved else "denied",
        by=ctx.key_id,
        reason=req.reason,
    )
    return {"turnId": wait.turnId, "toolCallId": wait.toolCallId, "status": wait.status}


async def tool_result(ctx: CommandContext, req: ToolResultSubmit) -> Json:
    output = req.output if isinstance(req.output, str) else json.dumps(req.output, ensure_ascii=False)
    wait = await answer(
        ctx.rt,
        ctx.tenant_id,
        req.turnId,
        req.toolCallId,
        kind="client",
        status="answered",
        by=ctx.key_id,
        output=output,
        is_error=req.isError,
    )
    return {"turnId": wait.turnId, "toolCallId": wait.toolCallId, "status": wait.status}


async def tool_waits(ctx: CommandContext, req: ToolWaitList) -> Json:
    rt = ctx.rt
    container_id = req.containerId
    if req.imageId is not None:
        container_id = (await image_of(rt, ctx.tenant_id, req.imageId)).containerId
    waits = [] if rt.waits is None else await rt.waits.list_waits(ctx.tenant_id, container_id)
    if req.imageId is not None:
        waits = [w for w in waits if w.imageId == req.imageId]
    return {"waits": [w.to_wire() for w in waits]}


async def elicitation_answer(ctx: CommandContext, req: ElicitationAnswerSubmit) -> Json:
    """Answer a running MCP call's question (not a suspended turn's wait: the call is held open)."""
    return await answer_elicitation(ctx.rt, ctx.tenant_id, req.elicitationId, req.action, req.content)


__all__ = ["elicitation_answer", "tool_approval", "tool_result", "tool_waits"]
