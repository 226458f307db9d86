"""The 17 AgentX v1 commands (protocol §2): one async function each, registered in ``COMMANDS``.

Each handler gets the caller's ``CommandContext`` and its validated payload, calls the use case
(``agentvm.images``; ``agentvm.turns.submit`` and ``turns.interrupt``), and returns the response
``data`` (``requestId`` is added by the gateway). It raises ``agentvm.errors`` types for failures;
the gateway turns them into ``data.error`` plus a ``system_error``. Every lookup is scoped by the
caller's tenant: another tenant's ids read exactly like ids that do not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm import images
from agentvm.gateway.v1 import wait_commands
from agentvm.messages import message_to_wire, reading_order
from agentvm.turns import submit
from agentvm.turns.interrupt import interrupt_image

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentvm.events import Json
    from agentvm.gateway.v1.frames import (
        AgentDestroy,
        AgentDestroyAll,
        AgentGet,
        AgentInterrupt,
        AgentList,
        ContainerCreate,
        ContainerGet,
        ContainerList,
        ImageCreate,
        ImageDelete,
        ImageGet,
        ImageList,
        ImageMessages,
        ImageRun,
        ImageStop,
        ImageUpdate,
        MessageSend,
    )
    from agentvm.ports import ConnectionInfo
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime
    from agentvm.turns.submit import Sent


@dataclass
class CommandContext:
    rt: Runtime
    tenant_id: str
    connection_id: str
    request_id: str
    # The caller may do what needs the admin scope (an admin key, or the open dev mode). Declaring
    # stdio MCP servers does: they run commands on the server.
    admin: bool = False
    key_id: str | None = None  # the caller's API key (None: the open dev mode)
    # the caller's connection as this frame read it (``Connections.subscribe(known=...)``)
    connection: ConnectionInfo | None = None
    # frames for the caller only, sent before the response (e.g. agent_registered)
    before_response: list[Json] = field(default_factory=list)


async def _subscribe(ctx: CommandContext, session_id: str) -> None:
    await ctx.rt.connections.subscribe(ctx.connection_id, session_id, known=ctx.connection)


def _created(image: ImageRecord) -> Json:
    return {"record": image.to_wire(), "__subscriptions": [image.sessionId]}


# -- containers ---------------------------------------------------------------------------------
async def container_create(ctx: CommandContext, req: ContainerCreate) -> Json:
    await images.ensure_container(ctx.rt, ctx.tenant_id, req.containerId, notices=ctx.before_response)
    return {"containerId": req.containerId}


async def container_get(ctx: CommandContext, req: ContainerGet) -> Json:
    found = await ctx.rt.store.get_container(ctx.tenant_id, req.containerId)
    return {"containerId": req.containerId, "exists": True} if found else {"exists": False}


async def container_list(ctx: CommandContext, req: ContainerList) -> Json:
    return {"containerIds": [c.containerId for c in await ctx.rt.store.list_containers(ctx.tenant_id)]}


# -- agents -------------------------------------------------------------------------------------
async def agent_get(ctx: CommandContext, req: AgentGet) -> Json:
    image = await images.image_by_agent(ctx.rt, ctx.tenant_id, req.agentId)
    if image is None:
        return {"exists": False}
    return {"agentId": req.agentId, "containerId": image.containerId, "exists": True}


async def agent_list(ctx: CommandContext, req: AgentList) -> Json:
    found = await ctx.rt.store.list_images(ctx.tenant_id, req.containerId)
    return {
        "agents": [
            {"agentId": i.agentId, "containerId": i.containerId, "imageId": i.imageId}
            for i in found
            if i.agentId
        ]
    }


async def agent_destroy(ctx: CommandContext, req: AgentDestroy) -> Json:
    image = await images.image_by_agent(ctx.rt, ctx.tenant_id, req.agentId)
    success = image is not None and await images.stop_agent(ctx.rt, image, notices=ctx.before_response)
    return {"agentId": req.agentId, "success": success}


async def agent_destroy_all(ctx: CommandContext, req: AgentDestroyAll) -> Json:
    for image in await ctx.rt.store.list_images(ctx.tenant_id, req.containerId):
        await images.stop_agent(ctx.rt, image, notices=ctx.before_response)
    return {"containerId": req.containerId}


async def message_send(ctx: CommandContext, req: MessageSend) -> Json:
    sent = await send_message(ctx, req)
    # Additive: which turn this message started (its frames carry context.turnId), so that a
    # client tells its own turn's frames from those of a turn still running before it.
    return {
        "imageId": sent.image.imageId,
        "agentId": sent.image.agentId,
        "sessionId": sent.image.sessionId,
        "messageId": sent.message_id,
        "turnId": sent.turn_id,
    }


async def send_message(ctx: CommandContext, req: MessageSend, *, rpc_id: str | int | None = None) -> Sent:
    """``message_send`` (``turns.submit``); ``rpc_id``: an AgentX v2 ``message.send`` that the
    turn's worker answers on the caller's connection when the turn ends (``gateway.v2.rpc``)."""
    image = await images.image_for(ctx.rt, ctx.tenant_id, image_id=req.imageId, agent_id=req.agentId)
    return await submit.send_message(
        ctx.rt,
        ctx.tenant_id,
        image,
        req.content,
        request_id=req.requestId,
        sender=submit.Sender(ctx.connection_id, ctx.connection, rpc_id),
        concurrency=req.options.concurrency if req.options else None,
        notices=ctx.before_response,
    )


async def agent_interrupt(ctx: CommandContext, req: AgentInterrupt) -> Json:
    image = await images.image_for(ctx.rt, ctx.tenant_id, image_id=req.imageId, agent_id=req.agentId)
    if not image.agentId:  # offline: nothing runs
        return {"imageId": image.imageId}
    await interrupt_image(ctx.rt, ctx.tenant_id, image)
    return {"imageId": image.imageId, "agentId": image.agentId}


# -- images -------------------------------------------------------------------------------------
async def image_create(ctx: CommandContext, req: ImageCreate) -> Json:
    image = await images.create(
        ctx.rt,
        ctx.tenant_id,
        req.containerId,
        req.config,
        admin=ctx.admin,
        by=ctx.key_id,
        notices=ctx.before_response,
    )
    return _created(image)


async def image_run(ctx: CommandContext, req: ImageRun) -> Json:
    found = await images.image_of(ctx.rt, ctx.tenant_id, req.imageId)
    image, reused = await images.start_agent(ctx.rt, found, notices=ctx.before_response)
    await _subscribe(ctx, image.sessionId)
    return {"imageId": image.imageId, "agentId": image.agentId, "reused": reused}


async def image_stop(ctx: CommandContext, req: ImageStop) -> Json:
    image = await images.image_of(ctx.rt, ctx.tenant_id, req.imageId)
    await images.stop_agent(ctx.rt, image, notices=ctx.before_response)
    return {"imageId": req.imageId}


async def image_update(ctx: CommandContext, req: ImageUpdate) -> Json:
    image = await images.update(
        ctx.rt, ctx.tenant_id, req.imageId, req.updates, admin=ctx.admin, by=ctx.key_id
    )
    return {"record": image.to_wire()}


async def image_list(ctx: CommandContext, req: ImageList) -> Json:
    found = await ctx.rt.store.list_images(ctx.tenant_id, req.containerId)
    return {"records": [i.to_wire() for i in found], "__subscriptions": [i.sessionId for i in found]}


async def image_get(ctx: CommandContext, req: ImageGet) -> Json:
    image = await ctx.rt.store.get_image(ctx.tenant_id, req.imageId)
    if image is None:
        return {"record": None}
    return {"record": image.to_wire(), "__subscriptions": [image.sessionId]}


async def image_delete(ctx: CommandContext, req: ImageDelete) -> Json:
    await images.delete(ctx.rt, ctx.tenant_id, req.imageId, notices=ctx.before_response)
    return {"imageId": req.imageId}


async def image_messages(ctx: CommandContext, req: ImageMessages) -> Json:
    image = await images.image_of(ctx.rt, ctx.tenant_id, req.imageId)
    messages = reading_order(await ctx.rt.store.list_messages(image.sessionId))
    return {"imageId": image.imageId, "messages": [message_to_wire(m) for m in messages]}


COMMANDS: dict[str, Callable[[CommandContext, Any], Awaitable[Json]]] = {
    "container_create_request": container_create,
    "container_get_request": container_get,
    "container_list_request": container_list,
    "agent_get_request": agent_get,
    "agent_list_request": agent_list,
    "agent_destroy_request": agent_destroy,
    "agent_destroy_all_request": agent_destroy_all,
    "message_send_request": message_send,
    "agent_interrupt_request": agent_interrupt,
    "image_create_request": image_create,
    "image_run_request": image_run,
    "image_stop_request": image_stop,
    "image_update_request": image_update,
    "image_list_request": image_list,
    "image_get_request": image_get,
    "image_delete_request": image_delete,
    "image_messages_request": image_messages,
    "tool_approval_request": wait_commands.tool_approval,
    "tool_result_request": wait_commands.tool_result,
    "tool_waits_request": wait_commands.tool_waits,
    "elicitation_answer_request": wait_commands.elicitation_answer,
}

# Fields a failed response still carries, so typed clients find every documented field (§2.1).
FAILURE_DEFAULTS: dict[str, Json] = {
    "container_get_request": {"exists": False},
    "container_list_request": {"containerIds": []},
    "agent_get_request": {"exists": False},
    "agent_list_request": {"agents": []},
    "agent_destroy_request": {"success": False},
    "message_send_request": {"agentId": ""},
    "image_run_request": {"agentId": "", "reused": False},
    "image_list_request": {"records": []},
    "image_messages_request": {"messages": []},
}
# Request fields echoed into a failed response when present.
ECHOED_FIELDS = ("containerId", "imageId", "agentId")

__all__ = ["COMMANDS", "ECHOED_FIELDS", "FAILURE_DEFAULTS", "CommandContext", "send_message"]
