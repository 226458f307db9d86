"""``AgentVMClient``: the async client of the AgentX v1 protocol as AgentVM serves it.

Two layers on one connection:

- **typed**: ``create_container``, ``create_image``, ``send`` (a ``Turn``: ``async for event in
  client.send(image_id, "Hi")``), ``history``, ``interrupt``, ``approve``/``deny``,
  ``submit_tool_result``, ``add_tool`` (client-side tools)... Failed requests raise
  ``RequestFailed``; frames are the models of ``agentvm.client.events`` / ``responses``.
- **raw** (what the SDK offered first, kept): ``request(type, **data)`` returns the response's
  ``data`` dict (``check=True`` raises on failure), ``events`` is a queue of the frames no turn
  took (dicts), ``turn_events()`` reads it until a turn ends, ``subscribe``, ``resume``.

**Reconnect with resume.** A client opened with ``connect(url, ...)`` (``reconnect=True``, the
default) opens the socket again when it drops (backoff with jitter, up to ``reconnect_within``
seconds), sends the ``auth`` frame again if one was used, and subscribes every session it follows
from the last ``seq`` it received (docs/protocol.md, "Sequence numbers and resume"): a turn being
iterated goes on with nothing missing and nothing twice. Requests waiting for an answer are sent
again when that is safe (reads, ``container_create``, ``message_send`` (the server keys the
message by ``requestId``), ``agent_interrupt``, ``image_run``, ``image_stop``, or a request whose
send itself failed); any other raises ``ConnectionLost`` (it may or may not have been applied). A
refused key (HTTP 401/403) is not retried: ``AuthenticationFailed``.

Without ``reconnect`` (or on a socket handed to the constructor), a lost connection ends the
client; a new one can take its place with ``resume_from=`` the old one, then ``resume()``.

Frames a turn does not take (other turns of followed sessions, lifecycle events) go to
``events`` (raw) and ``listen()`` (typed) share: at most ``max_buffered_events`` wait there; past
that the oldest are dropped (``dropped_events`` counts them), so a client that never reads them
does not grow without bound.

Its size (~730 lines): one public class, the SDK's async client, whose methods are the protocol's
requests one by one; the socket, resume, cursors and tools are already modules beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import random
import time
from typing import TYPE_CHECKING, Any, Literal

from agentvm.client.cursors import SessionCursors
from agentvm.client.errors import AuthenticationFailed, ConnectionLost, RequestFailed
from agentvm.client.events import ClientToolRequestedEvent
from agentvm.client.parse import parse_frame
from agentvm.client.queues import next_item
from agentvm.client.responses import (
    ContainerListResult,
    ElicitationAnswerResult,
    ImageCreateResult,
    ImageGetResult,
    ImageInfo,
    ImageListResult,
    ImageMessagesResult,
    ImageUpdateResult,
    MessageSendResult,
    ToolAnswerResult,
    ToolWaitInfo,
    ToolWaitsResult,
)
from agentvm.client.tools import ClientTool, tool_from_function
from agentvm.client.turn import Turn
from agentvm.events import (
    BATCH,
    CADENCE_PARAM,
    CADENCES,
    FRAMES_PARAM,
    LISTS_SESSIONS,
    SUBSCRIBE_KEY,
    SUBSCRIBED_KEY,
)
from agentvm.events import request as request_frame

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from agentvm.client.events import Frame, ToolElicitationEvent
    from agentvm.messages import Message

log = logging.getLogger("agentvm.client")

TERMINAL_EVENTS = frozenset({"conversation_end", "error_occurred"})
# Requests that may be sent twice without changing the outcome (see the module docstring).
RETRY_SAFE = frozenset(
    {
        "container_create",
        "container_get",
        "container_list",
        "agent_get",
        "agent_list",
        "message_send",
        "agent_interrupt",
        "image_run",
        "image_stop",
        "image_list",
        "image_get",
        "image_messages",
        "tool_waits",
    }
)


class _Pending:
    __slots__ = ("data", "future", "sent", "type")

    def __init__(self, type_: str, data: dict[str, Any], future: asyncio.Future[dict[str, Any]]) -> None:
        self.type = type_
        self.data = data
        self.future = future
        self.sent = False


class AgentVMClient:
    """See the module docstring. Open with ``AgentVMClient.connect(url, token=...)``."""

    def __init__(
        self,
        ws: Any = None,
        *,
        resume_from: AgentVMClient | None = None,
        max_buffered_events: int = 10_000,
    ) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._subscribed: set[str] = set()  # on this connection
        self.cursors: SessionCursors = resume_from.cursors if resume_from is not None else SessionCursors()
        # every frame no turn takes; a resuming client keeps the unread frames of the one before
        self.events: asyncio.Queue[dict[str, Any]] = (
            resume_from.events if resume_from is not None else asyncio.Queue()
        )
        self.max_buffered_events = max_buffered_events
        self.dropped_events = 0
        self.reconnects = 0  # how many times the connection was opened again
        self._turns: dict[str, Turn] = {}  # by turnId, while they run
        self._sending: dict[str, int] = {}  # imageId -> message_send requests awaiting their turnId
        self._held: dict[str, list[dict[str, Any]]] = {}  # imageId -> frames of turns not claimed yet
        self._tools: dict[str, ClientTool] = {}
        self._answered: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        # reconnecting (set by ``open``)
        self._url: str | None = None
        self._headers: dict[str, str] | None = None
        self._open_timeout = 10.0
        self._reconnect_within: float | None = None
        self._auth_frame: dict[str, Any] | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._lost: ConnectionLost | None = None
        if ws is not None:
            self._connected.set()
            self._reader: asyncio.Task[None] = asyncio.create_task(self._run())

    # -- opening and closing -------------------------------------------------------------------------
    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        resume_from: AgentVMClient | None = None,
        reconnect: bool = True,
        reconnect_within: float = 120.0,
        open_timeout: float = 10.0,
        batch: bool = True,
        cadence: str | None = None,
    ) -> AsyncIterator[AgentVMClient]:
        """Open a client on ``url`` (``ws://host:port/ws``, or the AWS stack's ``wss://`` URL).

        ``token``: an API key, sent as ``Authorization: Bearer`` on the upgrade request.
        ``reconnect``: open the socket again when it drops and resume (for up to
        ``reconnect_within`` seconds of failed attempts). ``resume_from``: the client of a lost
        connection, to ``resume()`` its sessions here. ``batch``: ask for batched frames
        (``?frames=batch``: several frames per WebSocket message, fewer billed messages on AWS;
        docs/protocol.md, "Batched frames"); the events the app sees are the same. ``cadence``: how
        often a batched connection gets text: ``"live"`` (a message's first text at once, then
        every 250 ms) or ``"economy"`` (then every 2 s: fewer billed messages); None (``?cadence=``
        not sent): the image's or tenant's choice, live unless they chose economy."""
        client = await cls.open(
            url,
            token=token,
            headers=headers,
            resume_from=resume_from,
            reconnect=reconnect,
            reconnect_within=reconnect_within,
            open_timeout=open_timeout,
            batch=batch,
            cadence=cadence,
        )
        try:
            yield client
        finally:
            await client.close()

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        resume_from: AgentVMClient | None = None,
        reconnect: bool = True,
        reconnect_within: float = 120.0,
        open_timeout: float = 10.0,
        batch: bool = True,
        cadence: str | None = None,
    ) -> AgentVMClient:
        """``connect`` without the ``async with``: call ``close()`` when done."""
        if token is not None:
            headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        client = cls(resume_from=resume_from)
        if cadence is not None and cadence not in CADENCES:
            raise ValueError(f"cadence must be one of {', '.join(CADENCES)}, not {cadence!r}")
        if cadence is not None and not batch:
            raise ValueError("a cadence is for batched connections (batch=True)")
        client._url = with_frames_mode(url, cadence=cadence) if batch else url
        client._headers = headers
        client._open_timeout = open_timeout
        client._reconnect_within = reconnect_within if reconnect else None
        client._ws = await client._open_socket()
        client._connected.set()
        client._reader = asyncio.create_task(client._run())
        return client

    async def close(self) -> None:
        """Close the connection; turns still being iterated raise ``ConnectionLost``."""
        self._closing = True
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
        for task in list(self._tasks):
            task.cancel()
        if self._ws is not None and hasattr(self._ws, "close"):
            with contextlib.suppress(Exception):
                await self._ws.close()
        self._fail_all(ConnectionLost("the client was closed"))

    async def _open_socket(self) -> Any:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        assert self._url is not None
        try:
            return await connect(
                self._url,
                additional_headers=self._headers,
                max_size=None,
                open_timeout=self._open_timeout,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                body = exc.response.body.decode("utf-8", "replace") if exc.response.body else ""
                raise AuthenticationFailed(
                    f"the server refused the key (HTTP {status}) {body}".strip()
                ) from None
            raise

    # -- the connection's life -----------------------------------------------------------------------
    async def _run(self) -> None:
        """Read frames; when the socket ends, open it again (``reconnect``) or end the client."""
        while True:
            try:
                async for raw in self._ws:
                    await self._on_raw(raw)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped socket (ConnectionClosed) or a broken frame
                log.info("connection ended: %s", type(exc).__name__)
            if self._closing:
                return
            self._connected.clear()
            self._subscribed.clear()
            if self._reconnect_within is None:
                self._fail_all(ConnectionLost("the connection was lost"))
                return
            self._fail_unsafe_pending()
            try:
                await self._reopen()
            except ConnectionLost as exc:
                self._fail_all(exc)
                return

    async def _reopen(self) -> None:
        assert self._reconnect_within is not None
        deadline = time.monotonic() + self._reconnect_within
        delay = 0.1
        while True:
            try:
                ws = await self._open_socket()
                break
            except AuthenticationFailed:
                raise
            except Exception as exc:
                if time.monotonic() + delay > deadline:
                    raise ConnectionLost(f"could not reconnect: {type(exc).__name__}: {exc}") from None
                await asyncio.sleep(delay * (0.5 + random.random()))  # noqa: S311 (jitter, not crypto)
                delay = min(delay * 2, 5.0)
        self._ws = ws
        self.reconnects += 1
        if self._auth_frame is not None:
            await self._ws.send(json.dumps(self._auth_frame))
        await self._resubscribe()
        self._connected.set()
        for request_id, pending in list(self._pending.items()):
            await self._send_request(request_id, pending)
        log.info("reconnected (%d)", self.reconnects)

    async def _resubscribe(self) -> None:
        """Every followed session again, from the last seq received; a session of a running turn
        that sent nothing yet from 0 (everything the server holds: nothing is missed)."""
        running = {t.session_id for t in self._turns.values() if t.session_id}
        for session_id in sorted(self.cursors.sessions | running):
            frame: dict[str, Any] = {"type": "subscribe", "sessionId": session_id}
            after = self.cursors.last_seq(session_id)
            if after is None and session_id in running:
                after = 0
            if after is not None:
                frame["afterSeq"] = after
            await self._ws.send(json.dumps(frame))
            self._subscribed.add(session_id)

    def _fail_unsafe_pending(self) -> None:
        for request_id, pending in list(self._pending.items()):
            if pending.sent and pending.type not in RETRY_SAFE:
                del self._pending[request_id]
                if not pending.future.done():
                    pending.future.set_exception(
                        ConnectionLost(
                            f"the connection dropped before the answer to {pending.type}_request; "
                            "it may or may not have been applied"
                        )
                    )

    def _fail_all(self, exc: ConnectionLost) -> None:
        self._lost = exc
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(exc)
        self._pending.clear()
        for turn in list(self._turns.values()):
            turn._deliver(exc)
        self._turns.clear()
        self._connected.set()  # wake whoever waits to send: they see ``_lost``

    async def _on_raw(self, raw: str | bytes) -> None:
        decoded = json.loads(raw)
        # a batched message (``?frames=batch``) is a JSON array of frames, in order
        for frame in decoded if isinstance(decoded, list) else [decoded]:
            await self._on_frame(frame)

    async def _on_frame(self, frame: Any) -> None:
        if not isinstance(frame, dict):
            return
        if "__payload" in frame:  # AgentX's reliable wrapper, if a server uses it
            await self._ws.send(json.dumps({"__ack": frame["__msgId"]}))
            frame = json.loads(frame["__payload"])
        if not self.cursors.accept(frame):
            return  # a frame delivered twice (resume): the app already has it
        data = frame.get("data") or {}
        request_id = data.get("requestId", "") if isinstance(data, dict) else ""
        # A failed request also gets a system_error with its requestId: only the response resolves it.
        if frame.get("category") == "response" and request_id in self._pending:
            pending = self._pending.pop(request_id)
            if not pending.future.done():
                pending.future.set_result(frame)
            return
        self._route(frame)

    def _route(self, raw: dict[str, Any]) -> None:
        turn_id = _turn_of(raw)
        image_id = (raw.get("context") or {}).get("imageId")
        if raw.get("type") == "client_tool_requested" and self._tools:
            typed = parse_frame(raw)
            if isinstance(typed, ClientToolRequestedEvent):
                self._answer_client_tool(typed)
        turn = self._turns.get(turn_id) if turn_id else None
        if turn is not None:
            turn._deliver(parse_frame(raw))
        elif turn_id and image_id and self._sending.get(image_id):
            # A turn whose message_send answer is on its way: keep its frames for it.
            self._held.setdefault(image_id, []).append(raw)
        else:
            self._buffer(raw)

    def _buffer(self, raw: dict[str, Any]) -> None:
        if self.events.qsize() >= self.max_buffered_events:
            with contextlib.suppress(asyncio.QueueEmpty):
                self.events.get_nowait()
                self.dropped_events += 1
        self.events.put_nowait(raw)

    # -- raw requests --------------------------------------------------------------------------------
    async def request(
        self,
        type_: str,
        *,
        timeout: float = 30.0,
        check: bool = False,
        subscribe: bool = True,
        **data: Any,
    ) -> dict[str, Any]:
        """Send ``<type_>_request``; returns the response's ``data``. ``check``: raise
        ``RequestFailed`` if it failed. ``subscribe``: follow the sessions named in the response's
        ``__subscriptions``, as AgentX clients do. The request asks the server to subscribe this
        connection itself (``__subscribe``, docs/protocol.md "Server-side subscriptions"); a
        server that did says so (``__subscribed``) and no ``subscribe`` frame is sent; one that
        does not know the key gets the frames, as before."""
        if self._lost is not None:
            raise self._lost
        if subscribe and type_ in LISTS_SESSIONS:
            data = {**data, SUBSCRIBE_KEY: True}
        request_id = f"req_{int(time.time() * 1000)}_{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pending = _Pending(type_, data, future)
        self._pending[request_id] = pending
        try:
            if self._connected.is_set() and self._lost is None:
                await self._send_request(request_id, pending)
            # else: the reconnect sends it
            response = (await asyncio.wait_for(asyncio.shield(future), timeout))["data"]
        finally:
            self._pending.pop(request_id, None)
        if subscribe:
            listed = response.get("__subscriptions") or []
            if response.get(SUBSCRIBED_KEY) is True:  # the server subscribed this connection
                self._subscribed.update(listed)
                self.cursors.sessions.update(listed)
            else:
                for session_id in listed:
                    await self.subscribe(session_id)
        if check and response.get("error") is not None:
            raise RequestFailed(type_, response)
        return response

    async def _send_request(self, request_id: str, pending: _Pending) -> None:
        frame = request_frame(pending.type, request_id, pending.data, now_ms=int(time.time() * 1000))
        try:
            await self._ws.send(json.dumps(frame))
            pending.sent = True
        except Exception:  # the socket dropped: the reader reconnects, then sends it again
            pending.sent = False

    async def _call(self, type_: str, *, timeout: float = 30.0, **data: Any) -> dict[str, Any]:
        """A typed method's request: no auto-subscription, failures raise."""
        return await self.request(type_, timeout=timeout, check=True, subscribe=False, **data)

    async def subscribe(self, session_id: str, *, after_seq: int | None = None) -> None:
        """Follow a session. With ``after_seq``, the server first sends what came after that seq."""
        if session_id in self._subscribed and after_seq is None:
            return
        self._subscribed.add(session_id)
        self.cursors.sessions.add(session_id)
        frame: dict[str, Any] = {"type": "subscribe", "sessionId": session_id}
        if after_seq is not None:
            frame["afterSeq"] = after_seq
        await self.send_frame(frame)

    def last_seq(self, session_id: str) -> int | None:
        """The highest seq received for the session (None: no numbered frame yet)."""
        return self.cursors.last_seq(session_id)

    async def resume(self) -> None:
        """Subscribe again to every session followed (by this client or the one it resumes), from
        the last seq received; a session with no numbered frame yet is followed from now on."""
        for session_id in sorted(self.cursors.sessions):
            await self.subscribe(session_id, after_seq=self.cursors.last_seq(session_id))

    async def authenticate(self, token: str) -> None:
        """Send the ``auth`` frame browsers send (no reply on success; ``system_error`` otherwise).
        A reconnecting client sends it again on every new socket."""
        self._auth_frame = {"type": "auth", "headers": {"Authorization": f"Bearer {token}"}}
        await self.send_frame(self._auth_frame)

    async def send_frame(self, frame: dict[str, Any]) -> None:
        """Send any frame as it is (waits while the connection is being opened again)."""
        await self._connected.wait()
        if self._lost is not None:
            raise self._lost
        await self._ws.send(json.dumps(frame))

    async def turn_events(self, *, timeout: float = 60.0) -> AsyncIterator[dict[str, Any]]:
        """Raw frames from ``events`` until a turn ends (``conversation_end`` or ``error_occurred``)."""
        while True:
            frame = await next_item(self.events, timeout)
            yield frame
            if frame.get("type") in TERMINAL_EVENTS:
                return

    async def listen(self, *, timeout: float | None = None) -> AsyncIterator[Frame]:
        """Typed frames from ``events`` (what no turn took), as they come; ends on ``timeout``
        seconds without one (None: never)."""
        while True:
            try:
                raw = await next_item(self.events, timeout)
            except TimeoutError:
                return
            yield parse_frame(raw)

    # -- typed: containers and images ----------------------------------------------------------------
    async def create_container(self, container_id: str) -> str:
        """Get or create a container of the caller's tenant."""
        return str((await self._call("container_create", containerId=container_id))["containerId"])

    async def list_containers(self) -> list[str]:
        return ContainerListResult.model_validate(await self._call("container_list")).containerIds

    async def create_image(
        self,
        container_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        tools: list[dict[str, Any] | ClientTool] | None = None,
        mcp_servers: dict[str, Any] | None = None,
        approval: dict[str, Any] | None = None,
        max_steps: int | None = None,
        concurrency: str | None = None,
        agent: str | None = None,
        cadence: str | None = None,
        side_model: str | None = None,
        fast_model: str | None = None,
        fast_max_chars: int | None = None,
        reply_cache: dict[str, Any] | None = None,
        context_diet: dict[str, Any] | None = None,
        custom_data: dict[str, Any] | None = None,
    ) -> ImageInfo:
        """A new image (an agent config with its own session) in ``container_id`` (created if
        needed). ``tools`` may hold ``ClientTool``s (``client.add_tool``): their declarations go in.
        ``cadence``: ``"economy"`` paces batched connections' text on its turns in 2 s windows
        (unless a connection asks for ``"live"``); None: the tenant's choice, live by default.
        ``side_model``: the model of its titles and compaction summaries (None: its model's cheap
        sibling; ``""``: its own model). ``fast_model``: short first messages go to it (mixed-model
        routing, ``fast_max_chars`` the limit, default 200; docs/protocol.md). ``reply_cache``:
        ``{"enabled": True, "ttlS": 86400}`` answers common first questions from the cache
        (docs/protocol.md "Reply cache"). ``context_diet``: ``{"keepSteps": 4, "maxResultChars":
        8000, "headChars": 2000}`` elides old tool results and shows large ones by reference
        (docs/protocol.md "Context diet"). ``custom_data``: the application's own JSON object,
        stored and returned as ``ImageInfo.customData``, never read by AgentVM."""
        config = _image_config(
            name=name,
            description=description,
            systemPrompt=system_prompt,
            model=model,
            tools=tools,
            mcpServers=mcp_servers,
            approval=approval,
            maxSteps=max_steps,
            concurrency=concurrency,
            agent=agent,
            cadence=cadence,
            sideModel=side_model,
            fastModel=fast_model,
            fastMaxChars=fast_max_chars,
            replyCache=reply_cache,
            contextDiet=context_diet,
            customData=custom_data,
        )
        data = await self._call("image_create", containerId=container_id, config=config)
        return ImageCreateResult.model_validate(data).record

    async def list_images(self, container_id: str | None = None) -> list[ImageInfo]:
        """The images of a container (or of the tenant), newest first."""
        only: dict[str, Any] = {"containerId": container_id} if container_id else {}
        data = await self._call("image_list", **only)
        return ImageListResult.model_validate(data).records

    async def get_image(self, image_id: str) -> ImageInfo | None:
        """The image, or None if there is no such image of the caller's tenant."""
        try:
            data = await self._call("image_get", imageId=image_id)
        except RequestFailed as exc:
            if exc.code == "not_found":
                return None
            raise
        return ImageGetResult.model_validate(data).record

    async def update_image(self, image_id: str, **updates: Any) -> ImageInfo:
        """Change an image's config (``name``, ``system_prompt``, ``model``, ``tools``...; None keeps)."""
        config = _image_config(**{_WIRE_NAMES.get(k, k): v for k, v in updates.items()})
        data = await self._call("image_update", imageId=image_id, updates=config)
        return ImageUpdateResult.model_validate(data).record

    async def delete_image(self, image_id: str) -> None:
        """Delete an image, its session and its messages."""
        await self._call("image_delete", imageId=image_id)

    async def history(self, image_id: str) -> list[Message]:
        """Every stored message of the image's session, oldest first."""
        return ImageMessagesResult.model_validate(
            await self._call("image_messages", imageId=image_id)
        ).messages

    # -- typed: turns --------------------------------------------------------------------------------
    def send(
        self,
        image_id: str,
        content: str | list[dict[str, Any]],
        *,
        concurrency: str | None = None,
        timeout: float | None = None,
    ) -> Turn:
        """A turn: ``async for event in client.send(image_id, "Hi")`` sends the message and yields
        the turn's typed frames until it ends; ``await client.send(...)`` runs it to the end.
        ``content``: text, or a list of content parts (text, image, file). ``concurrency``:
        this message's policy if a turn is running (``queue``, ``reject``, ``interrupt``).
        ``timeout``: the longest wait for the next frame (None: no limit)."""
        options = {"concurrency": concurrency} if concurrency else None
        return Turn(self, image_id, content, options=options, timeout=timeout)

    async def _start_turn(self, turn: Turn) -> MessageSendResult:
        image_id = turn.image_id
        self._sending[image_id] = self._sending.get(image_id, 0) + 1
        try:
            data: dict[str, Any] = {"imageId": image_id, "content": turn.content}
            if turn._options:
                data["options"] = turn._options
            accepted = MessageSendResult.model_validate(await self._call("message_send", **data))
            turn.accepted = accepted
            if accepted.turnId is None:
                raise RequestFailed(
                    "message_send",
                    {
                        "error": "the server did not say which turn started (AgentVM too old)",
                        "code": "bad_request",
                    },
                )
            if accepted.sessionId:
                self.cursors.sessions.add(accepted.sessionId)
                self._subscribed.add(accepted.sessionId)  # message_send subscribed this connection
            self._turns[accepted.turnId] = turn
            held = self._held.get(image_id, [])
            for frame in [f for f in held if _turn_of(f) == accepted.turnId]:
                turn._deliver(parse_frame(frame))
            self._held[image_id] = [f for f in held if _turn_of(f) != accepted.turnId]
            return accepted
        finally:
            self._sending[image_id] -= 1
            if not self._sending[image_id]:
                del self._sending[image_id]
                for frame in self._held.pop(image_id, []):  # frames of turns nobody here started
                    self._buffer(frame)

    def _forget_turn(self, turn: Turn) -> None:
        if turn.turn_id is not None and self._turns.get(turn.turn_id) is turn:
            del self._turns[turn.turn_id]

    async def interrupt(self, image_id: str) -> None:
        """Interrupt the image's running (or suspended) turn; no-op if none runs."""
        await self._call("agent_interrupt", imageId=image_id)

    async def approve(self, turn_id: str, tool_call_id: str) -> ToolAnswerResult:
        """Approve a call a suspended turn waits on (``tool_approval_requested``): it runs now."""
        data = await self._call("tool_approval", turnId=turn_id, toolCallId=tool_call_id, approved=True)
        return ToolAnswerResult.model_validate(data)

    async def deny(self, turn_id: str, tool_call_id: str, *, reason: str | None = None) -> ToolAnswerResult:
        """Deny it: the model reads ``Execution denied: <reason>``."""
        extra: dict[str, Any] = {"reason": reason} if reason is not None else {}
        data = await self._call(
            "tool_approval", turnId=turn_id, toolCallId=tool_call_id, approved=False, **extra
        )
        return ToolAnswerResult.model_validate(data)

    async def submit_tool_result(
        self, turn_id: str, tool_call_id: str, output: Any, *, is_error: bool = False
    ) -> ToolAnswerResult:
        """A client-side tool's result (text, or any JSON value)."""
        data = await self._call(
            "tool_result", turnId=turn_id, toolCallId=tool_call_id, output=output, isError=is_error
        )
        return ToolAnswerResult.model_validate(data)

    async def answer_elicitation(
        self,
        elicitation: ToolElicitationEvent | str,
        action: Literal["accept", "decline", "cancel"],
        content: dict[str, Any] | None = None,
    ) -> ElicitationAnswerResult:
        """Answer an MCP server's question (``tool_elicitation``, or its ``elicitationId``):
        ``accept`` with ``content`` fitting its ``requestedSchema`` (a form), or with none (a URL the
        user opened), ``decline`` or ``cancel``. The server's call goes on with the answer."""
        elicitation_id = elicitation if isinstance(elicitation, str) else elicitation.data.elicitationId
        data: dict[str, Any] = {"elicitationId": elicitation_id, "action": action}
        if content is not None:
            data["content"] = content
        return ElicitationAnswerResult.model_validate(await self._call("elicitation_answer", **data))

    async def tool_waits(
        self, *, container_id: str | None = None, image_id: str | None = None
    ) -> list[ToolWaitInfo]:
        """The calls the caller's suspended turns wait on, oldest first."""
        data: dict[str, Any] = {}
        if container_id is not None:
            data["containerId"] = container_id
        if image_id is not None:
            data["imageId"] = image_id
        return ToolWaitsResult.model_validate(await self._call("tool_waits", **data)).waits

    # -- client-side tools ---------------------------------------------------------------------------
    def add_tool(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> ClientTool:
        """Answer ``client_tool_requested`` for ``name`` (default: the function's name) with
        ``function(**input)``. Put the returned tool in ``create_image(tools=[...])``."""
        tool = tool_from_function(
            function, name=name, description=description, input_schema=input_schema, timeout_s=timeout_s
        )
        self._tools[tool.name] = tool
        return tool

    def tool(self, name: str | None = None, **options: Any) -> Callable[[Callable[..., Any]], ClientTool]:
        """``add_tool`` as a decorator: ``@client.tool()``."""
        return lambda function: self.add_tool(function, name=name, **options)

    @property
    def tools(self) -> dict[str, ClientTool]:
        return dict(self._tools)

    def _answer_client_tool(self, event: ClientToolRequestedEvent) -> None:
        tool = self._tools.get(event.data.toolName)
        key = (event.data.turnId, event.data.toolCallId)
        if tool is None or key in self._answered:
            return
        self._answered.add(key)
        task = asyncio.create_task(self._run_client_tool(tool, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_client_tool(self, tool: ClientTool, event: ClientToolRequestedEvent) -> None:
        output, is_error = await tool.run(dict(event.data.input))
        try:
            await self.submit_tool_result(event.data.turnId, event.data.toolCallId, output, is_error=is_error)
        except RequestFailed as exc:
            if exc.code != "already_answered":  # another client of the tenant answered first
                log.warning("client tool %s: the result was refused: %s", tool.name, exc.code)
        except ConnectionLost:
            self._answered.discard((event.data.turnId, event.data.toolCallId))  # a resume asks again


_WIRE_NAMES = {
    "system_prompt": "systemPrompt",
    "mcp_servers": "mcpServers",
    "max_steps": "maxSteps",
    "side_model": "sideModel",
    "fast_model": "fastModel",
    "fast_max_chars": "fastMaxChars",
    "reply_cache": "replyCache",
    "context_diet": "contextDiet",
    "custom_data": "customData",
}


def with_frames_mode(url: str, *, cadence: str | None = None) -> str:
    """``url`` with ``frames=batch`` in its query, and ``cadence=`` if given (each kept if the
    caller set it already)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    names = {name for name, _ in query}
    added = [] if FRAMES_PARAM in names else [(FRAMES_PARAM, BATCH)]
    if cadence is not None and CADENCE_PARAM not in names:
        added.append((CADENCE_PARAM, cadence))
    if not added:
        return url
    return urlunsplit(parts._replace(query=urlencode([*query, *added])))


def _image_config(**fields: Any) -> dict[str, Any]:
    config = {k: v for k, v in fields.items() if v is not None}
    if "tools" in config:
        config["tools"] = [t.declaration() if isinstance(t, ClientTool) else t for t in config["tools"]]
    return config


def _turn_of(raw: dict[str, Any]) -> str | None:
    """The turn a frame belongs to: its ``context.turnId`` (a storage ``system_error``: its details')."""
    turn_id = (raw.get("context") or {}).get("turnId")
    if turn_id is None and raw.get("type") == "system_error":
        turn_id = ((raw.get("data") or {}).get("details") or {}).get("turnId")
    return turn_id if isinstance(turn_id, str) else None


__all__ = ["RETRY_SAFE", "TERMINAL_EVENTS", "AgentVMClient"]
