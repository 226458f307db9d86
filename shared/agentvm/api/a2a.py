"""Every AgentVM image as an A2A v1.0 agent (JSON-RPC binding), with the maintained ``a2a-sdk``'s
server (its JSON-RPC dispatcher and ``DefaultRequestHandler``). docs/a2a.md.

- ``GET /a2a/{image_id}/.well-known/agent-card.json``: the image's agent card (name, description,
  one skill for the image and one per declared tool), security scheme the AgentVM API key as a bearer.
- ``POST /a2a/{image_id}``: the JSON-RPC methods (``SendMessage``, ``SendStreamingMessage``,
  ``GetTask``, ``CancelTask``). A message becomes a turn of the image's session through
  ``turns.submit.send_message`` (the path of every WebSocket, HTTP and MCP turn: budgets, quotas,
  the image's concurrency policy, usage); the executor follows it in the store
  (``turns.watch.follow_turn``) and answers its reply as the task's artifact. ``CancelTask``
  interrupts the image's turn (``turns.interrupt.interrupt_image``).
- Mapping: the A2A agent is the image; ``contextId`` is the image's session id (one image owns one
  session); the A2A task carries the AgentVM turn id in its metadata (``agentvm.turnId``).

Auth: the AgentVM API key (``Authorization: Bearer``), checked and rate-limited as ``/v1`` is; the
tenant is the key's; another tenant's image (or task) answers exactly like a missing one.

Tasks are kept in the SDK's in-memory task store, scoped per tenant (the SDK's owner is the
tenant id): a restart loses the A2A task objects (``GetTask`` then answers not found), not the
turns, whose messages and usage stay in AgentVM's own store. The SDK is imported on the first
``/a2a`` request, never on another route's path.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from agentvm import __version__
from agentvm.api.deps import authenticate
from agentvm.api.errors import agentvm_error
from agentvm.errors import AgentVMError, Forbidden, NotFound

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events import EventQueue
    from starlette.types import Receive, Scope, Send

    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

A2A_PREFIX = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
TURN_ID_KEY = "agentvm.turnId"
REPLY = "reply"  # the artifact id of a task's reply
MAX_IMAGE_ID = 200


class A2aEndpoint:
    """The ASGI app under ``/a2a``: authenticate, find the caller's image, then the SDK's handler."""

    def __init__(self) -> None:
        self._shared: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        runtime: Runtime = request.app.state.runtime
        path = scope["path"][len(A2A_PREFIX) :].strip("/")
        image_id, _, rest = path.partition("/")
        try:
            wants_card = "/" + rest == CARD_PATH and request.method == "GET"
            if not image_id or len(image_id) > MAX_IMAGE_ID or not (wants_card or rest == ""):
                raise NotFound("not found")
            if importlib.util.find_spec("a2a") is None:  # an install without the local or aws extra
                raise NotFound("A2A is not served on this host (it needs the a2a-sdk package)")
            await authenticate(request, runtime)
            principal: Principal = request.state.principal
            if not principal.allows("client"):
                raise Forbidden("this API key may not call agents")
            image = await runtime.store.get_image(principal.tenant_id, image_id)
            if image is None:
                raise NotFound(f"agent {image_id} not found")
        except AgentVMError as exc:
            response = await agentvm_error(request, exc)
            await response(scope, receive, send)
            return
        card = agent_card(image, str(request.base_url).rstrip("/"))
        if wants_card:
            from a2a.server.request_handlers.response_helpers import agent_card_to_dict

            await JSONResponse(agent_card_to_dict(card))(scope, receive, send)
            return
        if request.method != "POST":
            await JSONResponse({"error": {"code": "method_not_allowed"}}, status_code=405)(
                scope, receive, send
            )
            return
        request.state.a2a = (runtime, principal, image)
        dispatcher = self._dispatcher()
        response = await dispatcher.handle_requests(request)
        await response(scope, receive, send)

    def _dispatcher(self) -> Any:
        """One SDK request handler for every image (its running tasks, to cancel, and its task
        store are the process's); each request's image and tenant are in its call context."""
        if "dispatcher" not in self._shared:
            from a2a.server.request_handlers import DefaultRequestHandler
            from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
            from a2a.server.tasks import InMemoryTaskStore
            from a2a.types import AgentCapabilities, AgentCard

            store = InMemoryTaskStore()
            handler = DefaultRequestHandler(
                agent_executor=_executor_class()(),
                task_store=store,
                agent_card=AgentCard(name="AgentVM", capabilities=AgentCapabilities(streaming=True)),
                request_context_builder=_request_context_builder(store),
            )
            self._shared["dispatcher"] = JsonRpcDispatcher(
                request_handler=handler, context_builder=_context_builder()
            )
        return self._shared["dispatcher"]


def _request_context_builder(store: Any) -> Any:
    """A message without a ``contextId`` is in the image's session."""
    from a2a.server.agent_execution import SimpleRequestContextBuilder

    class InTheImagesSession(SimpleRequestContextBuilder):
        async def build(
            self,
            context: Any,
            params: Any = None,
            task_id: Any = None,
            context_id: Any = None,
            task: Any = None,
        ) -> Any:
            given = params.message.context_id if params is not None else None
            context_id = context_id or given or context.state["image"].sessionId
            return await super().build(context, params, task_id, context_id, task)

    return InTheImagesSession(task_store=store)


def agent_card(image: ImageRecord, base_url: str) -> Any:
    """The image as an A2A agent card: one skill for the agent, one per declared tool."""
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
    )

    description = image.description or image.systemPrompt or f"The AgentVM agent {image.name}"
    skills = [AgentSkill(id="chat", name=image.name, description=description[:1000], tags=["agentvm"])]
    for tool in image.tools or []:
        name = str(tool.get("name") or "")
        if name:
            skills.append(
                AgentSkill(
                    id=f"tool:{name}",
                    name=name,
                    description=str(tool.get("description") or name)[:1000],
                    tags=["tool"],
                )
            )
    requirement = SecurityRequirement()
    requirement.schemes["apiKey"].SetInParent()
    return AgentCard(
        name=image.name,
        description=description[:1000],
        version=__version__,
        supported_interfaces=[
            AgentInterface(
                url=f"{base_url}{A2A_PREFIX}/{image.imageId}",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        security_schemes={
            "apiKey": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer", description="an AgentVM API key (client or admin scope)"
                )
            )
        },
        security_requirements=[requirement],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


def _context_builder() -> Any:
    """The SDK's call context: the tenant as its user (the task store's owner), the turn's inputs."""
    from a2a.auth.user import User
    from a2a.server.routes.common import DefaultServerCallContextBuilder

    class Tenant(User):
        def __init__(self, tenant_id: str) -> None:
            self._tenant_id = tenant_id

        @property
        def is_authenticated(self) -> bool:
            return True

        @property
        def user_name(self) -> str:
            return self._tenant_id

    class Builder(DefaultServerCallContextBuilder):
        def build(self, request: Request) -> ServerCallContext:
            context = super().build(request)  # the headers (A2A-Version) and requested extensions
            runtime, principal, image = request.state.a2a
            context.state.update(runtime=runtime, principal=principal, image=image)
            return context

        def build_user(self, request: Request) -> User:
            return Tenant(request.state.a2a[1].tenant_id)

    return Builder()


def _executor_class() -> type:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.tasks import TaskUpdater
    from a2a.types import Part, Task, TaskState, TaskStatus
    from a2a.utils.errors import InvalidParamsError

    class TurnExecutor(AgentExecutor):
        """One A2A message is one AgentVM turn of the image's session, sent and followed in the store."""

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            from agentvm.api.http_turns import AttachablePush, Feed
            from agentvm.streaming.frames import TURN_SPAN
            from agentvm.streaming.resume import subscribe_after
            from agentvm.turns.submit import Sender, send_message
            from agentvm.turns.watch import WatchedTurn, follow_turn

            state = context.call_context.state
            runtime: Runtime = state["runtime"]
            principal: Principal = state["principal"]
            image: ImageRecord = state["image"]
            task_id = context.task_id or runtime.ids.new("task")
            if context.context_id != image.sessionId:
                raise InvalidParamsError(message=f"contextId: this agent's is {image.sessionId} (or none)")
            updater = TaskUpdater(event_queue, task_id, image.sessionId)
            message = context.message
            request_id = message.message_id if message is not None and message.message_id else task_id
            feed = await Feed.open(runtime, principal) if isinstance(runtime.push, AttachablePush) else None
            try:
                sent = await send_message(
                    runtime,
                    principal.tenant_id,
                    image,
                    context.get_user_input(),
                    request_id=f"a2a:{request_id}",  # a retried message id never runs a second turn
                    sender=Sender(connection_id=feed.connection_id if feed else f"a2a_{task_id}"),
                    concurrency="queue",
                    notices=[],
                )
                if context.current_task is None:  # the turn is stored first: a cancel finds it
                    history = [message] if message is not None else []
                    submitted = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
                    await event_queue.enqueue_event(
                        Task(id=task_id, context_id=image.sessionId, status=submitted, history=history)
                    )
                stored = await runtime.store.get_turn(sent.turn_id)
                user_seq = stored.userSeq if stored is not None else 0
                await updater.update_status(
                    TaskState.TASK_STATE_WORKING, metadata={TURN_ID_KEY: sent.turn_id}
                )
                streamed = ""
                if feed is not None:  # the turn's text deltas as chunks of one artifact, in order
                    after = user_seq * TURN_SPAN
                    session = await runtime.store.get_session(principal.tenant_id, image.sessionId)
                    if session is None:
                        raise NotFound(f"agent {image.imageId} not found")
                    await subscribe_after(runtime, feed.connection_id, session, after)
                    events, feed = feed.events(runtime, image, after=after, band=user_seq), None
                    async for frame in events:
                        text = (
                            (frame.get("data") or {}).get("text")
                            if frame.get("type") == "text_delta"
                            else None
                        )
                        if isinstance(text, str) and text:
                            await updater.add_artifact(
                                [Part(text=text)], artifact_id=REPLY, name="reply", append=bool(streamed)
                            )
                            streamed += text
            finally:
                if feed is not None:
                    await feed.close(runtime)
            followed = await follow_turn(
                runtime,
                WatchedTurn(image.sessionId, sent.turn_id, sent.message_id, user_seq),
                deadline_s=runtime.turns.mcp_call_deadline_s,
                poll_s=runtime.turns.mcp_poll_s,
            )
            if followed.reply.startswith(streamed) and len(followed.reply) > len(streamed):
                rest = followed.reply[len(streamed) :]  # what no delta carried (a host without push)
                await updater.add_artifact(
                    [Part(text=rest)], artifact_id=REPLY, name="reply", append=bool(streamed)
                )
            if followed.status == "completed":
                await updater.complete()
            elif followed.status == "interrupted":
                await updater.cancel()
            elif followed.status == "suspended":
                await updater.requires_input(
                    updater.new_agent_message([Part(text="\n".join(followed.waiting))])
                )
            elif followed.status in ("queued", "running"):  # the wait ended first (AWS: 25 s at most)
                again = f"send message {request_id} again to get its answer (its turn runs once)"
                note = f"the turn is still {followed.status}: {again}"
                await updater.update_status(
                    TaskState.TASK_STATE_WORKING,
                    updater.new_agent_message([Part(text=note)]),
                    metadata={TURN_ID_KEY: sent.turn_id},
                )
            else:
                reason = followed.error or f"the turn is {followed.status}"
                await updater.failed(updater.new_agent_message([Part(text=reason)]))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            from agentvm.turns.interrupt import interrupt_image

            state = context.call_context.state
            image: ImageRecord = state["image"]
            await interrupt_image(state["runtime"], state["principal"].tenant_id, image)
            task_id = context.task_id or ""
            await TaskUpdater(event_queue, task_id, image.sessionId).cancel()

    return TurnExecutor


__all__ = ["A2A_PREFIX", "CARD_PATH", "A2aEndpoint", "agent_card"]
