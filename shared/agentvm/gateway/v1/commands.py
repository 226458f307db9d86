"""The 17 AgentX v1 commands (protocol §2): one async function each, registered in ``COMMANDS``.

Each handler gets the caller's ``CommandContext`` and its validated payload, and returns the
response ``data`` (``requestId`` is added by the gateway). It raises ``agentvm.errors`` types for
failures; the gateway turns them into ``data.error`` plus a ``system_error``. Every lookup is
scoped by the caller's tenant: another tenant's ids read exactly like ids that do not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.agent.history import pending_user_ids
from agentvm.agent.tools.declarations import McpStdioServer, parse_mcp_servers
from agentvm.errors import BadRequest, Forbidden, NotFound, SessionBusy
from agentvm.events import EventContext, event
from agentvm.gateway.v1 import wait_commands
from agentvm.messages import UserMessage, message_to_wire
from agentvm.ports import RunningTurn
from agentvm.records import (
    DEFAULT_IMAGE_NAME,
    TERMINAL,
    ContainerRecord,
    ImageRecord,
    SessionRecord,
    TurnJob,
    TurnRecord,
    turn_id_for,
)
from agentvm.security.storage_quota import image_size
from agentvm.streaming.fanout import Fanout
from agentvm.turns import orphans as orphan_turns
from agentvm.turns.waits import cancel_turn_waits

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
    from agentvm.ports import AppendResult, ConnectionInfo
    from agentvm.resources.centre import ResourceCentre
    from agentvm.runtime import Runtime


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

    @property
    def fanout(self) -> Fanout:
        return Fanout(self.rt.connections, self.rt.push)

    def now(self) -> int:
        return self.rt.clock.now_ms()


# -- lookups ------------------------------------------------------------------------------------
async def image_of(ctx: CommandContext, image_id: str) -> ImageRecord:
    image = await ctx.rt.store.get_image(ctx.tenant_id, image_id)
    if image is None:
        raise NotFound(f"Image not found: {image_id}")
    return image


async def image_by_agent(ctx: CommandContext, agent_id: str) -> ImageRecord | None:
    for image in await ctx.rt.store.list_images(ctx.tenant_id):
        if image.agentId == agent_id:
            return image
    return None


async def _ensure_container(ctx: CommandContext, container_id: str) -> bool:
    now = ctx.now()
    created = await ctx.rt.store.put_container(
        ContainerRecord(tenantId=ctx.tenant_id, containerId=container_id, createdAt=now, updatedAt=now)
    )
    if created:
        ctx.before_response.append(
            event(
                "container_created",
                {"containerId": container_id, "createdAt": now},
                now_ms=now,
                source="container",
                category="lifecycle",
            )
        )
    return created


async def start_agent(ctx: CommandContext, image: ImageRecord) -> tuple[ImageRecord, bool]:
    """One agent per image: reuse the running one, else register a new one."""
    if image.agentId:
        return image, True
    now = ctx.now()
    image = image.model_copy(update={"agentId": ctx.rt.ids.new("agent"), "updatedAt": now})
    await ctx.rt.store.put_image(image)
    ctx.before_response.append(
        event(
            "agent_registered",
            {
                "containerId": image.containerId,
                "agentId": image.agentId,
                "definitionName": image.name,
                "registeredAt": now,
            },
            now_ms=now,
            source="container",
            category="lifecycle",
        )
    )
    return image, False


async def _stop_agent(ctx: CommandContext, image: ImageRecord) -> bool:
    if not image.agentId:
        return False
    agent_id, now = image.agentId, ctx.now()
    await ctx.rt.store.put_image(image.model_copy(update={"agentId": None, "updatedAt": now}))
    # Outside any turn: no seq, not part of the resumable stream (docs/protocol.md, Resume).
    destroyed = event(
        "session_destroyed",
        {"sessionId": image.sessionId, "agentId": agent_id, "containerId": image.containerId},
        now_ms=now,
        source="session",
        category="lifecycle",
        context=_context(image, agent_id).to_wire(),
    )
    await ctx.fanout.publish_frame(image.sessionId, destroyed)
    ctx.before_response.append(
        event(
            "agent_unregistered",
            {"containerId": image.containerId, "agentId": agent_id, "reason": "stopped"},
            now_ms=now,
            source="container",
            category="lifecycle",
        )
    )
    return True


async def _active_turn(
    ctx: CommandContext, image: ImageRecord, *, grace_ms: int = orphan_turns.GRACE_MS
) -> TurnRecord | None:
    """The oldest turn of the session that is queued, running or suspended, if any.

    Unanswered user messages in the recent window are the candidates; their turn records say
    which are still live (an interrupted turn with no text leaves its message unanswered). A live
    record with no job behind it (``agent.orphan_turns``) is ended here instead of returned.
    """
    window = await ctx.rt.store.recent_messages(image.sessionId, ctx.rt.turns.history_window)
    for user_id in pending_user_ids(window):
        turn = await ctx.rt.store.get_turn(turn_id_for(user_id))
        if turn is None or turn.status in TERMINAL:
            continue
        if await orphan_turns.has_no_job(ctx.rt, turn, grace_ms=grace_ms):
            await orphan_turns.end(
                ctx.rt,
                turn,
                tenant_id=ctx.tenant_id,
                container_id=image.containerId,
                status="interrupted" if grace_ms == 0 else "failed",
            )
            continue
        return turn
    return None


async def _interrupt_running(ctx: CommandContext, image: ImageRecord) -> bool:
    """Mark the active turn cancelled (store + in-process signal). The turn's worker tells the
    subscribers (``interrupted``, numbered in the turn's stream) when it sees the mark. A live turn
    with no job is ended ``interrupted`` at once: no worker would ever see its mark."""
    turn = await _active_turn(ctx, image, grace_ms=0)
    if turn is None:
        return False
    await ctx.rt.store.request_cancel(image.sessionId, turn.turnId)
    ctx.rt.signals.fire(turn.turnId)
    if turn.status == "suspended":  # nothing runs to see the mark: wake the turn up to end it
        await cancel_turn_waits(ctx.rt, turn.turnId, "the turn was interrupted")
    return True


def _context(image: ImageRecord, agent_id: str | None = None) -> EventContext:
    return EventContext(
        containerId=image.containerId,
        imageId=image.imageId,
        agentId=agent_id or image.agentId or "",
        sessionId=image.sessionId,
    )


async def _subscribe(ctx: CommandContext, session_id: str) -> None:
    await ctx.rt.connections.subscribe(ctx.connection_id, session_id, known=ctx.connection)


# -- containers ---------------------------------------------------------------------------------
async def container_create(ctx: CommandContext, req: ContainerCreate) -> Json:
    await _ensure_container(ctx, req.containerId)
    return {"containerId": req.containerId}


async def container_get(ctx: CommandContext, req: ContainerGet) -> Json:
    found = await ctx.rt.store.get_container(ctx.tenant_id, req.containerId)
    return {"containerId": req.containerId, "exists": True} if found else {"exists": False}


async def container_list(ctx: CommandContext, req: ContainerList) -> Json:
    return {"containerIds": [c.containerId for c in await ctx.rt.store.list_containers(ctx.tenant_id)]}


# -- agents -------------------------------------------------------------------------------------
async def agent_get(ctx: CommandContext, req: AgentGet) -> Json:
    image = await image_by_agent(ctx, req.agentId)
    if image is None:
        return {"exists": False}
    return {"agentId": req.agentId, "containerId": image.containerId, "exists": True}


async def agent_list(ctx: CommandContext, req: AgentList) -> Json:
    images = await ctx.rt.store.list_images(ctx.tenant_id, req.containerId)
    return {
        "agents": [
            {"agentId": i.agentId, "containerId": i.containerId, "imageId": i.imageId}
            for i in images
            if i.agentId
        ]
    }


async def agent_destroy(ctx: CommandContext, req: AgentDestroy) -> Json:
    image = await image_by_agent(ctx, req.agentId)
    success = image is not None and await _stop_agent(ctx, image)
    return {"agentId": req.agentId, "success": success}


async def agent_destroy_all(ctx: CommandContext, req: AgentDestroyAll) -> Json:
    for image in await ctx.rt.store.list_images(ctx.tenant_id, req.containerId):
        await _stop_agent(ctx, image)
    return {"containerId": req.containerId}


@dataclass(frozen=True, slots=True)
class Sent:
    """What ``send_message`` did: the response data, the turn, and whether this request made it
    (False: a retry of a request already accepted, which queued nothing)."""

    data: Json
    turn_id: str
    created: bool


async def message_send(ctx: CommandContext, req: MessageSend) -> Json:
    return (await send_message(ctx, req)).data


async def send_message(ctx: CommandContext, req: MessageSend, *, rpc_id: str | int | None = None) -> Sent:
    """``message_send``; ``rpc_id``: an AgentX v2 ``message.send`` that the turn's worker answers
    on the caller's connection when the turn ends (``gateway.agentx_v2``)."""
    if req.imageId:
        image = await image_of(ctx, req.imageId)
    elif req.agentId:
        found = await image_by_agent(ctx, req.agentId)
        if found is None:
            raise NotFound(f"Agent not found: {req.agentId}")
        image = found
    else:
        raise BadRequest("Either imageId or agentId must be provided")
    if ctx.rt.budgets is not None:  # refuse before anything is stored (quota_exceeded)
        await ctx.rt.budgets.check(ctx.tenant_id, image.containerId)
    # No container upsert here: an image only exists inside a container made with it, and on
    # AWS the conditional put would cost a write unit per turn for nothing.
    image, _ = await start_agent(ctx, image)
    assert image.agentId is not None
    # The sender always sees its own stream, even if it never listed the image (AgentX's
    # "stuck in Queued" bug, protocol §1.5). With a cursor: a turn's worker that finds the sender
    # only at a later subscriber lookup (the AWS index lags) still sends it the turn from its start.
    await ctx.rt.connections.subscribe(ctx.connection_id, image.sessionId, after_seq=0, known=ctx.connection)

    # What to do if a turn is already running: the request's option beats the image's policy.
    policy = (req.options.concurrency if req.options else None) or image.concurrency
    if policy == "reject" and await _active_turn(ctx, image) is not None:
        raise SessionBusy("a turn is already running in this session; retry when it ends")
    if policy == "interrupt":
        await _interrupt_running(ctx, image)  # the new turn runs right after it stops (FIFO)

    user = UserMessage(id=ctx.rt.ids.new("msg"), timestamp=ctx.now(), content=req.content)
    quota = ctx.rt.storage_quota
    # Its bytes reserved before anything is stored (concurrent sends never pass the quota
    # together); given back if the append fails or a retried request stores nothing.
    reserved = 0 if quota is None else await quota.reserve(ctx.tenant_id, len(user.model_dump_json()))
    try:
        # Keyed by requestId: a retried request never appends twice nor runs a second turn.
        appended = await ctx.rt.store.append_message(
            image.sessionId, user, idempotency_key=f"req:{req.requestId}"
        )
    except BaseException:
        if quota is not None:
            await quota.give_back(ctx.tenant_id, reserved)
        raise
    if quota is not None and not appended.created:
        await quota.give_back(ctx.tenant_id, reserved)
    user_id = appended.message.id
    turn_id = turn_id_for(user_id)
    # This request queues the turn if it stored the message, or if it retries one whose turn was
    # withdrawn when a write after the message failed (turns/orphans.py).
    queues = appended.created or orphan_turns.is_withdrawn(await ctx.rt.store.get_turn(turn_id))
    try:
        await _queue_turn(ctx, req, image, appended, queues=queues, rpc_id=rpc_id)
    except BaseException:
        if queues:  # a refusal leaves no live turn without a job behind it
            await orphan_turns.withdraw(
                ctx.rt,
                tenant_id=ctx.tenant_id,
                container_id=image.containerId,
                session_id=image.sessionId,
                turn_id=turn_id,
                user_seq=appended.seq,
            )
        raise
    # Additive: which turn this message started (its frames carry context.turnId), so that a
    # client tells its own turn's frames from those of a turn still running before it.
    return Sent(
        {
            "imageId": image.imageId,
            "agentId": image.agentId,
            "sessionId": image.sessionId,
            "messageId": user_id,
            "turnId": turn_id,
        },
        turn_id,
        queues,
    )


async def _queue_turn(
    ctx: CommandContext,
    req: MessageSend,
    image: ImageRecord,
    appended: AppendResult,
    *,
    queues: bool,
    rpc_id: str | int | None,
) -> None:
    """The writes after the message: the running mark, the ``queued`` record (if ``queues``),
    then the job. Each may fail (a full disk, an unreachable queue); the caller withdraws what
    this request wrote (the message stays, and so does its reserved size)."""
    assert image.agentId is not None
    turn_id = turn_id_for(appended.message.id)
    # The mark first: a process dying before the record leaves a mark the sweeper removes, never a
    # record nobody lists (turns/orphans.py).
    if ctx.rt.running is not None:  # the operator's list of unfinished turns (observability/running.py)
        await ctx.rt.running.mark(
            RunningTurn(
                tenant_id=ctx.tenant_id,
                container_id=image.containerId,
                image_id=image.imageId,
                session_id=image.sessionId,
                turn_id=turn_id,
                queued_at=appended.message.timestamp,
                model=image.model,
            )
        )
    # message_persisted is the first frame of the turn, sent by its worker: numbered in the
    # session's stream, it cannot overtake the frames of a turn still running before it.
    if queues:
        await ctx.rt.store.put_turn(
            TurnRecord(
                turnId=turn_id,
                sessionId=image.sessionId,
                status="queued",
                updatedAt=ctx.now(),
                userSeq=appended.seq,
            )
        )
    job = TurnJob(
        turnId=turn_id,
        tenantId=ctx.tenant_id,
        containerId=image.containerId,
        imageId=image.imageId,
        sessionId=image.sessionId,
        agentId=image.agentId,
        userMessageId=appended.message.id,
        requestId=req.requestId,
        enqueuedAt=ctx.now(),
        userSeq=appended.seq,
        userSavedAt=appended.message.timestamp,
    )
    if rpc_id is not None and queues:
        job = job.model_copy(update={"rpcConnectionId": ctx.connection_id, "rpcId": rpc_id})
    await ctx.rt.queue.enqueue(job)  # idempotent by turnId


async def agent_interrupt(ctx: CommandContext, req: AgentInterrupt) -> Json:
    if req.imageId:
        image: ImageRecord | None = await image_of(ctx, req.imageId)
    elif req.agentId:
        image = await image_by_agent(ctx, req.agentId)
        if image is None:
            raise NotFound(f"Agent not found: {req.agentId}")
    else:
        raise BadRequest("Either imageId or agentId must be provided")
    assert image is not None
    if not image.agentId:  # offline: nothing runs
        return {"imageId": image.imageId}
    await _interrupt_running(ctx, image)
    return {"imageId": image.imageId, "agentId": image.agentId}


# -- images -------------------------------------------------------------------------------------
async def image_create(ctx: CommandContext, req: ImageCreate) -> Json:
    cfg = req.config
    if cfg.rebuild is not None:
        raise BadRequest("config.rebuild: only image_update rebuilds an image")
    if cfg.agent is not None:
        return await _image_create_built(ctx, req)
    await _ensure_container(ctx, req.containerId)
    now = ctx.now()
    image = ImageRecord(
        tenantId=ctx.tenant_id,
        imageId=ctx.rt.ids.new("img"),
        containerId=req.containerId,
        sessionId=ctx.rt.ids.new("sess"),
        name=cfg.name or DEFAULT_IMAGE_NAME,
        description=cfg.description,
        systemPrompt=cfg.systemPrompt,
        model=cfg.model,
        mcpServers=cfg.mcpServers,
        tools=_tool_decls(cfg.tools),
        maxSteps=cfg.maxSteps,
        approval=cfg.approval.model_dump() if cfg.approval is not None else None,
        concurrency=cfg.concurrency or "queue",
        createdAt=now,
        updatedAt=now,
    )
    if image.model:
        ctx.rt.models.resolve(image.model)  # reject an unknown provider now, not at the first turn
    _check_tool_sources(ctx, image.mcpServers)
    session = SessionRecord(
        tenantId=ctx.tenant_id,
        sessionId=image.sessionId,
        imageId=image.imageId,
        containerId=image.containerId,
        createdAt=now,
        updatedAt=now,
    )
    await _create_counted(ctx, image, session)
    return {"record": image.to_wire(), "__subscriptions": [image.sessionId]}


async def _create_counted(ctx: CommandContext, image: ImageRecord, session: SessionRecord) -> None:
    """Create the image with its config's size reserved in the tenant's storage account first
    (refused past it: ``storage_quota_exceeded``); a failed create gives it back."""
    quota = ctx.rt.storage_quota
    reserved = 0 if quota is None else await quota.reserve(ctx.tenant_id, image_size(image))
    try:
        await ctx.rt.store.create_image(image, session)
    except BaseException:
        if quota is not None:
            await quota.give_back(ctx.tenant_id, reserved)
        raise


async def _put_counted(ctx: CommandContext, before: ImageRecord, image: ImageRecord) -> None:
    """Store a changed image: its growth reserved first (refused past the account), its shrink
    given back after."""
    quota = ctx.rt.storage_quota
    delta = 0 if quota is None else image_size(image) - image_size(before)
    reserved = await quota.reserve(ctx.tenant_id, delta) if quota is not None and delta > 0 else 0
    try:
        await ctx.rt.store.put_image(image)
    except BaseException:
        if quota is not None:
            await quota.give_back(ctx.tenant_id, reserved)
        raise
    if quota is not None and delta < 0:
        await quota.give_back(ctx.tenant_id, -delta)


async def _image_create_built(ctx: CommandContext, req: ImageCreate) -> Json:
    """An image built from an agent resource: its fields are the definition's, resolved now."""
    from agentvm.resources.build import BUILT_FIELDS, build_into, move_edges

    cfg = req.config
    inline = [k for k in BUILT_FIELDS if getattr(cfg, k) is not None]
    if inline:
        raise BadRequest(
            f"config.{inline[0]}: an image built from config.agent takes it from the definition "
            "(publish a new version of the agent instead)"
        )
    centre = _centre(ctx)
    now = ctx.now()
    image = ImageRecord(
        tenantId=ctx.tenant_id,
        imageId=ctx.rt.ids.new("img"),
        containerId=req.containerId,
        sessionId=ctx.rt.ids.new("sess"),
        name=cfg.name or DEFAULT_IMAGE_NAME,
        description=cfg.description,
        concurrency=cfg.concurrency or "queue",
        createdAt=now,
        updatedAt=now,
    )
    assert cfg.agent is not None
    image, build = await build_into(centre, image, cfg.agent, now_ms=now, by=ctx.key_id)
    if cfg.name is None:
        image.name = build.agent.name
    if cfg.description is None:
        image.description = build.agent.description
    _check_built(ctx, image)
    await _ensure_container(ctx, req.containerId)
    session = SessionRecord(
        tenantId=ctx.tenant_id,
        sessionId=image.sessionId,
        imageId=image.imageId,
        containerId=image.containerId,
        createdAt=now,
        updatedAt=now,
    )
    await _create_counted(ctx, image, session)
    await move_edges(centre, image, None)
    return {"record": image.to_wire(), "__subscriptions": [image.sessionId]}


def _centre(ctx: CommandContext) -> ResourceCentre:
    if ctx.rt.resources is None:
        raise BadRequest("config.agent: this server has no resource centre")
    return ctx.rt.resources


def _check_built(ctx: CommandContext, image: ImageRecord) -> None:
    """A build passes the checks inline configs pass (the model's provider, who may run MCP stdio)."""
    if image.model:
        ctx.rt.models.resolve(image.model)
    _check_tool_sources(ctx, image.mcpServers)


async def rebuild_image(ctx: CommandContext, image: ImageRecord, agent: str | None = None) -> ImageRecord:
    """Resolve the image's definition again (or ``agent``, a new one) and move it there (recorded)."""
    from agentvm.resources.build import build_into, move_edges

    written = agent or (image.build or {}).get("agent")
    if written is None:
        raise BadRequest(
            "updates.rebuild: this image was not built from an agent resource (give updates.agent)"
        )
    before = image.build
    previous = image.model_copy()
    image, _ = await build_into(_centre(ctx), image, written, now_ms=ctx.now(), by=ctx.key_id)
    _check_built(ctx, image)
    await _put_counted(ctx, previous, image)
    await move_edges(_centre(ctx), image, before)
    return image


def _tool_decls(tools: list[Any] | None) -> list[dict[str, Any]] | None:
    """Declarations as stored: validated, without unset fields (secret headers stay references)."""
    return None if tools is None else [decl.model_dump(exclude_none=True) for decl in tools]


def _check_tool_sources(ctx: CommandContext, mcp_servers: dict[str, Any] | None) -> None:
    """What the host cannot run is refused now, not at the first turn (stdio MCP on AWS), and so is
    what the caller may not declare (stdio MCP servers run commands on the server: admin only)."""
    if not mcp_servers:
        return
    allow_stdio = ctx.rt.tools.allow_stdio if ctx.rt.tools is not None else True
    try:
        servers = parse_mcp_servers(mcp_servers, allow_stdio=allow_stdio)
    except ValueError as exc:
        raise BadRequest(f"config.mcpServers.{exc}") from None
    stdio = sorted(name for name, s in servers.items() if isinstance(s, McpStdioServer))
    if stdio and not ctx.admin:
        raise Forbidden(
            f"config.mcpServers.{stdio[0]}: stdio MCP servers run a command on the server; "
            "only an admin key may declare them (use a Streamable HTTP server)"
        )


async def image_run(ctx: CommandContext, req: ImageRun) -> Json:
    image, reused = await start_agent(ctx, await image_of(ctx, req.imageId))
    await _subscribe(ctx, image.sessionId)
    return {"imageId": image.imageId, "agentId": image.agentId, "reused": reused}


async def image_stop(ctx: CommandContext, req: ImageStop) -> Json:
    await _stop_agent(ctx, await image_of(ctx, req.imageId))
    return {"imageId": req.imageId}


async def image_update(ctx: CommandContext, req: ImageUpdate) -> Json:
    from agentvm.resources.build import BUILT_FIELDS

    image = await image_of(ctx, req.imageId)
    changes: dict[str, Any] = req.updates.model_dump(exclude_unset=True, exclude_none=True)
    rebuild, agent = changes.pop("rebuild", False), changes.pop("agent", None)
    built = [k for k in BUILT_FIELDS if k in changes]
    if built and (rebuild or agent or image.build):
        raise BadRequest(
            f"updates.{built[0]}: this image is built from an agent resource; publish a new version "
            "of the agent and rebuild (updates.rebuild), or give updates.agent"
        )
    if rebuild or agent:
        image = await rebuild_image(ctx, image, agent)
        if changes:  # name, description, concurrency
            changed = image.model_copy(update={**changes, "updatedAt": ctx.now()})
            await _put_counted(ctx, image, changed)
            image = changed
        return {"record": image.to_wire()}
    if "model" in changes:
        ctx.rt.models.resolve(changes["model"])
    if "tools" in changes:
        changes["tools"] = _tool_decls(req.updates.tools)
    _check_tool_sources(ctx, changes.get("mcpServers"))
    changed = image.model_copy(update={**changes, "updatedAt": ctx.now()})
    await _put_counted(ctx, image, changed)
    return {"record": changed.to_wire()}


async def image_list(ctx: CommandContext, req: ImageList) -> Json:
    images = await ctx.rt.store.list_images(ctx.tenant_id, req.containerId)
    return {"records": [i.to_wire() for i in images], "__subscriptions": [i.sessionId for i in images]}


async def image_get(ctx: CommandContext, req: ImageGet) -> Json:
    image = await ctx.rt.store.get_image(ctx.tenant_id, req.imageId)
    if image is None:
        return {"record": None}
    return {"record": image.to_wire(), "__subscriptions": [image.sessionId]}


async def image_delete(ctx: CommandContext, req: ImageDelete) -> Json:
    image = await image_of(ctx, req.imageId)
    await _stop_agent(ctx, image)
    await ctx.rt.store.delete_image(ctx.tenant_id, image.imageId)
    if ctx.rt.storage_quota is not None:  # its config; its session's messages stay counted
        await ctx.rt.storage_quota.give_back(ctx.tenant_id, image_size(image))
    if image.build is not None and ctx.rt.resources is not None:  # its pins no longer hold versions
        from agentvm.resources.build import move_edges

        await move_edges(ctx.rt.resources, image.model_copy(update={"build": None}), image.build)
    return {"imageId": req.imageId}


async def image_messages(ctx: CommandContext, req: ImageMessages) -> Json:
    image = await image_of(ctx, req.imageId)
    messages = await ctx.rt.store.list_messages(image.sessionId)
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

__all__ = ["COMMANDS", "ECHOED_FIELDS", "FAILURE_DEFAULTS", "CommandContext", "Sent", "send_message"]
