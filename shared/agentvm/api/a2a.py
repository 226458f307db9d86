"""Every AgentVM image as an A2A v1.0 agent (JSON-RPC binding), with the maintained ``a2a-sdk``'s
server (its JSON-RPC dispatcher and ``DefaultRequestHandler``). docs/a2a.md.

- ``GET /a2a/{image_id}/.well-known/agent-card.json``: the image's agent card (name, description,
  one skill for the image and one per declared tool), security scheme the AgentVM API key as a bearer.
- ``POST /a2a/{image_id}``: the JSON-RPC methods (``SendMessage``, ``SendStreamingMessage``,
  ``GetTask``, ``ListTasks``, ``CancelTask``). A message becomes a turn of the image's session
  through ``turns.submit.send_message`` (the path of every WebSocket, HTTP and MCP turn: budgets,
  quotas, the image's concurrency policy, usage), sent before the SDK makes its task: **the task is
  the turn**, with its id. The executor follows it in the store (``turns.watch.follow_turn``) and
  answers its reply as the task's artifact. ``GetTask``/``ListTasks`` read the turns
  (``api/a2a_tasks.py``, the SDK's task store over AgentVM's), ``CancelTask`` interrupts the turn
  (``turns.interrupt.interrupt_turn``): any process or Lambda on the same store answers them.
- Mapping: the A2A agent is the image; ``contextId`` is the image's session id (one image owns one
  session); the task id is the AgentVM turn id (also in its metadata, ``agentvm.turnId``).

Auth: the AgentVM API key (``Authorization: Bearer``), checked and rate-limited as ``/v1`` is; the
tenant is the key's; another tenant's image (or task) answers exactly like a missing one. The SDK
is imported on the first ``/a2a`` request, never on another route's path.
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from agentvm import __version__
from agentvm.api.deps import authenticate
from agentvm.api.errors import agentvm_error
from agentvm.errors import AgentVMError, Forbidden, NotFound
from agentvm.records import TERMINAL, user_message_id_for

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events import EventQueue
    from starlette.types import Receive, Scope, Send

    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal

A2A_PREFIX = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
MAX_IMAGE_ID = 200
CANCEL_WAIT_S = 5.0  # how long CancelTask waits for the turn to end


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
        """One SDK request handler for every image (its running tasks are the process's); each
        request's image and tenant are in its call context, the tasks in AgentVM's store."""
        if "dispatcher" not in self._shared:
            from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
            from a2a.types import AgentCapabilities, AgentCard

            from agentvm.api.a2a_tasks import TurnTaskStore

            store = TurnTaskStore()
            handler = _handler_class()(
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
    """The task is the turn the request sent (its id); its context, the image's session."""
    from a2a.server.agent_execution import SimpleRequestContextBuilder

    class TheSentTurn(SimpleRequestContextBuilder):
        async def build(
            self,
            context: Any,
            params: Any = None,
            task_id: Any = None,
            context_id: Any = None,
            task: Any = None,
        ) -> Any:
            task_id = task_id or context.state["sent"].turn_id
            context_id = context_id or context.state["image"].sessionId
            return await super().build(context, params, task_id, context_id, task)

    return TheSentTurn(task_store=store)


def _handler_class() -> type:
    """The SDK's ``DefaultRequestHandler``, each message's turn sent first (the task is the turn),
    and ``CancelTask`` the turn's interrupt, on whichever process or host runs it."""
    from a2a.helpers.proto_helpers import get_message_text
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.types import TaskState
    from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
    from a2a.utils.task import apply_history_length

    from agentvm.api.a2a_tasks import read_task

    answered_at_once = {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
    }

    class TurnRequestHandler(DefaultRequestHandler):
        async def on_message_send(self, params: Any, context: ServerCallContext) -> Any:
            try:
                task = await self._send_turn(params, context, stream=False)
                if task is not None:
                    return apply_history_length(task, params.configuration)
                return await super().on_message_send(params, context)
            finally:
                await _close_feed(context)

        async def on_message_send_stream(self, params: Any, context: ServerCallContext) -> Any:
            try:
                task = await self._send_turn(params, context, stream=True)
                if task is not None:
                    yield apply_history_length(task, params.configuration)
                    return
                async for event in super().on_message_send_stream(params, context):
                    yield event
            finally:
                await _close_feed(context)

        async def _send_turn(self, params: Any, context: ServerCallContext, *, stream: bool) -> Any:
            """Store the message and queue its turn (``send_message``), before the SDK makes its
            task: the task id is the turn id. The task answered now if nothing is left to follow
            (a non-blocking send, or the same ``messageId`` again after its turn ended or
            suspended); else None, the SDK's executor follows the turn."""
            from agentvm.api.http_turns import AttachablePush, Feed
            from agentvm.turns.submit import Sender, send_message

            runtime, principal, image = (context.state[k] for k in ("runtime", "principal", "image"))
            message = params.message
            if message.task_id:  # one message, one turn: a task is never continued by another
                raise InvalidParamsError(message="a message is a task of its own: send it without taskId")
            if message.context_id and message.context_id != image.sessionId:
                raise InvalidParamsError(message=f"contextId: this agent's is {image.sessionId} (or none)")
            request_id = message.message_id or runtime.ids.new("a2a")
            feed = None
            if stream and isinstance(runtime.push, AttachablePush):  # the turn's text deltas
                feed = await Feed.open(runtime, principal)
                context.state["feed"] = feed
            sent = await send_message(
                runtime,
                principal.tenant_id,
                image,
                get_message_text(message),
                request_id=f"a2a:{request_id}",  # a retried message id never runs a second turn
                sender=Sender(connection_id=feed.connection_id if feed else f"a2a_{request_id}"),
                concurrency="queue",
                notices=[],
            )
            task = await read_task(runtime, image, sent.turn_id)
            if task is not None and (
                params.configuration.return_immediately or task.status.state in answered_at_once
            ):
                return task
            context.state["sent"] = sent
            return None

        async def on_cancel_task(self, params: Any, context: ServerCallContext) -> Any:
            """The turn's interrupt (``turns.interrupt.interrupt_turn``), wherever it runs; the
            answer waits ``CANCEL_WAIT_S`` at most for the turn to end: ``CANCELED`` (with its
            partial reply), or ``TaskNotCancelableError`` if it ended otherwise first. A turn still
            live then (queued on AWS until a worker takes it) is answered ``CANCELED``: it ends
            ``interrupted``."""
            from agentvm.turns.interrupt import interrupt_turn
            from agentvm.turns.watch import WatchedTurn, follow_turn

            runtime, principal, image = (context.state[k] for k in ("runtime", "principal", "image"))
            turn = await interrupt_turn(runtime, principal.tenant_id, image, params.id)
            if turn is None:
                raise TaskNotFoundError
            if turn.status not in TERMINAL:
                user_id = user_message_id_for(turn.turnId)
                watched = WatchedTurn(image.sessionId, turn.turnId, user_id, turn.userSeq)
                wait = min(CANCEL_WAIT_S, runtime.turns.mcp_call_deadline_s)
                await follow_turn(runtime, watched, deadline_s=wait, poll_s=runtime.turns.mcp_poll_s)
            task = await read_task(runtime, image, params.id)
            if task is None:
                raise TaskNotFoundError
            if task.status.state in (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED) or (
                turn.status in TERMINAL
            ):
                raise TaskNotCancelableError
            if task.status.state != TaskState.TASK_STATE_CANCELED:  # asked to stop, not ended yet
                task.status.state = TaskState.TASK_STATE_CANCELED
                task.status.ClearField("message")
            return task

    return TurnRequestHandler


async def _close_feed(context: ServerCallContext) -> None:
    """The stream's subscriber connection, if the executor never took it (the executor closes the
    one it takes when the turn's frames end)."""
    feed = context.state.pop("feed", None)
    if feed is not None:
        with contextlib.suppress(Exception):
            await feed.close(context.state["runtime"])


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

    from agentvm.api.a2a_tasks import REPLY, TURN_ID_KEY

    class TurnExecutor(AgentExecutor):
        """Follows the turn the request sent (``TurnRequestHandler``) in the store, its text deltas
        streamed as chunks of the artifact ``reply`` where this host pushes them."""

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            from agentvm.streaming.frames import TURN_SPAN
            from agentvm.streaming.resume import subscribe_after
            from agentvm.turns.watch import WatchedTurn, follow_turn

            state = context.call_context.state
            runtime: Runtime = state["runtime"]
            principal: Principal = state["principal"]
            image: ImageRecord = state["image"]
            sent = state["sent"]
            feed = state.pop("feed", None)  # this executor closes it now
            updater = TaskUpdater(event_queue, sent.turn_id, image.sessionId)
            message = context.message
            request_id = message.message_id if message is not None and message.message_id else sent.turn_id
            try:
                if context.current_task is None:  # a turn with no record yet (a retried request)
                    history = [message] if message is not None else []
                    submitted = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
                    await event_queue.enqueue_event(
                        Task(id=sent.turn_id, context_id=image.sessionId, status=submitted, history=history)
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
                                [Part(text=text)], artifact_id=REPLY, name=REPLY, append=bool(streamed)
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
                    [Part(text=rest)], artifact_id=REPLY, name=REPLY, append=bool(streamed)
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
                again = f"GetTask {sent.turn_id}, or send message {request_id} again, for its answer"
                note = f"the turn is still {followed.status}: {again} (its turn runs once)"
                await updater.update_status(
                    TaskState.TASK_STATE_WORKING,
                    updater.new_agent_message([Part(text=note)]),
                    metadata={TURN_ID_KEY: sent.turn_id},
                )
            else:
                reason = followed.error or f"the turn is {followed.status}"
                await updater.failed(updater.new_agent_message([Part(text=reason)]))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            """The SDK's own cancel of a task this process runs: the turn's interrupt."""
            from agentvm.turns.interrupt import interrupt_turn

            state = context.call_context.state
            image: ImageRecord = state["image"]
            task_id = context.task_id or ""
            await interrupt_turn(state["runtime"], state["principal"].tenant_id, image, task_id)
            await TaskUpdater(event_queue, task_id, image.sessionId).cancel()

    return TurnExecutor


__all__ = ["A2A_PREFIX", "CARD_PATH", "A2aEndpoint", "agent_card"]
