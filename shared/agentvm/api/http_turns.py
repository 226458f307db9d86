"""Turns over plain HTTP (docs/http.md): send a message on a session and stream its turn as
server-sent events, resume that stream with ``Last-Event-ID``, interrupt it. ``curl -N`` is a client.

- ``POST /v1/sessions/{session_id}/turns`` ``{"message": ...}``: sends the message as a WebSocket
  ``message_send`` would (``turns.submit``: budgets, quotas, the image's concurrency policy, usage).
  With ``Accept: text/event-stream`` the answer is the turn's frames as SSE events until the turn
  ends or suspends; otherwise JSON: the finished turn (``200``), or, if it still runs after the
  wait, ``202`` naming where to stream it (``Location`` and ``lastEventId``). ``Idempotency-Key``
  (or ``requestId``): a retried POST never sends the message twice; it streams the first one's turn.
- ``GET /v1/sessions/{session_id}/events``: the session's frames after ``Last-Event-ID`` (or
  ``?after=``), then the live turn, until no turn of the session is queued or running.
- ``POST /v1/sessions/{session_id}/interrupt``: stops the session's running turn (``agent_interrupt``).

Every event is one AgentX v1 frame (docs/protocol.md): ``id:`` its ``seq``, ``event:`` its type,
``data:`` the frame's JSON. The stream is a subscriber like a WebSocket: a connection registered
with the key's tenant, fed by the host's push (``streaming.resume`` replays the stored frames above
the cursor, the turn's worker sends the live ones), so nothing is lost or sent twice (seqs already
sent are dropped). Idle streams get a ``: keep-alive`` comment every ``KEEPALIVE_S``.

Hosts whose push cannot feed an HTTP response (AWS: API Gateway's HTTP API and Mangum buffer the
whole response) answer the SSE request once the turn has ended or suspended, as one SSE body built
from the stored frames (the text of each message as one ``text_delta``), within the wait.

Any key of the tenant (admin or client scope: a client key sends messages over the WebSocket too);
another tenant's session answers exactly like a missing one (``404``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from typing import TYPE_CHECKING, Annotated, Any, Protocol, runtime_checkable

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from agentvm.api.deps import Caller, RuntimeDep  # noqa: TC001 (FastAPI reads the annotations)
from agentvm.api.errors import error_responses
from agentvm.api.openapi import examples, ok
from agentvm.api.params import CONTAINER_ID, MAX_ID
from agentvm.errors import BadRequest, ConnectionGone, NotFound
from agentvm.ports import ConnectionInfo
from agentvm.records import TERMINAL
from agentvm.security.tenant_limits import connection_cap
from agentvm.streaming.frames import TURN_SPAN

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from agentvm.records import ImageRecord, SessionRecord
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal
    from agentvm.turns.submit import Sent
    from agentvm.turns.watch import FollowedTurn

EVENT_STREAM = "text/event-stream"
MAX_MESSAGE_CHARS = 100_000
MAX_EVENT_ID = 10**15  # a seq is a user message seq times TURN_SPAN plus its frame
KEEPALIVE_S = 15.0  # a comment line on an idle stream (proxies close silent connections)
STREAM_MAX_S = 3600.0  # one response streams at most this long; resume with Last-Event-ID
MAX_QUEUED_FRAMES = 10_000  # a client that stops reading is cut off (it can resume)
# The frames after which a turn's stream stops: it ended (completed or interrupted), failed, or waits
# on someone (an approval, a client tool's result).
TURN_END_FRAMES = frozenset({"conversation_end", "error_occurred", "turn_suspended"})
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
SESSION_ID = Path(min_length=1, max_length=MAX_ID)

_SENT = {
    "requestId": "order-42",
    "sessionId": "sess_mk2x8z_f6g7h8i9j0",
    "turnId": "turn_mk2x9a_q8w7e6r5t4",
    "created": True,
    "status": "completed",
    "reply": "Echo: hello",
    "error": None,
    "errorCode": None,
    "waiting": [],
}
_SSE = (
    'id: 100001\nevent: message_persisted\ndata: {"type":"message_persisted","seq":100001,...}\n\n'
    'id: 100004\nevent: text_delta\ndata: {"type":"text_delta","data":{"text":"Echo: "},...}\n\n'
    'id: 100008\nevent: conversation_end\ndata: {"type":"conversation_end",...}\n\n'
)
_SSE_CONTENT = {EVENT_STREAM: {"schema": {"type": "string"}, "example": _SSE}}


class TurnRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples({"message": "hello"}, {"message": "hello", "requestId": "order-42"}),
    )

    message: StrictStr = Field(
        min_length=1, max_length=MAX_MESSAGE_CHARS, description="what to tell the agent"
    )
    requestId: StrictStr | None = Field(  # noqa: N815 (the WebSocket protocol's name)
        default=None,
        pattern=IDEMPOTENCY_KEY.pattern,
        description="the same id again never sends the message twice (the Idempotency-Key header's role)",
    )


_RUNNING = {**_SENT, "status": "running", "reply": "Echo: ", "lastEventId": 300000}
_SEND_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ok(
        200, "TurnAnswer", _SENT, "the turn, ended or suspended; with Accept: text/event-stream, its events"
    ),
    **ok(202, "TurnAnswer", _RUNNING, "the turn still runs: GET Location with Last-Event-ID lastEventId"),
    **error_responses(400, 404, 409, 507),
}
_SEND_RESPONSES[200]["content"][EVENT_STREAM] = {"schema": {"type": "string"}, "example": _SSE}

_NEW_SESSION = {
    "containerId": "user-alice",
    "imageId": "img_mk2x8z_a1b2c3d4e5",
    "sessionId": "sess_mk2x8z_f6g7h8i9j0",
    "name": "Helper",
}


class NewSession(BaseModel):
    """A new image (and its session) in a container, as ``image_create`` makes it (the image's whole
    config, tools included, is the WebSocket's or the SDK's to give)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=examples({"name": "Helper", "systemPrompt": "Be brief."}),
    )

    name: StrictStr | None = Field(default=None, max_length=200)
    systemPrompt: StrictStr | None = Field(default=None, max_length=100_000)  # noqa: N815
    model: StrictStr | None = Field(default=None, max_length=200, description="none: the server's default")
    agent: StrictStr | None = Field(
        default=None, max_length=1000, description="build it from an agent resource (resource://agents/...)"
    )


router = APIRouter(prefix="/sessions", tags=["turns over HTTP (SSE)"])
containers = APIRouter(prefix="/containers", tags=["turns over HTTP (SSE)"])


@containers.post(
    "/{container_id}/sessions",
    status_code=201,
    response_model=None,
    responses={
        **ok(201, "NewSessionAnswer", _NEW_SESSION, "the image and its session"),
        **error_responses(400, 404),
    },
)
async def new_session(
    runtime: RuntimeDep, caller: Caller, body: NewSession, container_id: str = CONTAINER_ID
) -> dict[str, Any]:
    """A new session to send turns on: an image of the container (made on first use), as the
    WebSocket's ``image_create`` makes it."""
    from agentvm.images import ImageConfig, create

    config = ImageConfig.model_validate(body.model_dump(exclude_none=True))
    image = await create(
        runtime,
        caller.tenant_id,
        container_id,
        config,
        admin=caller.allows("admin"),
        by=caller.key_id,
        notices=[],
    )
    return {
        "containerId": image.containerId,
        "imageId": image.imageId,
        "sessionId": image.sessionId,
        "name": image.name,
    }


@runtime_checkable
class AttachablePush(Protocol):
    """A host's push that can feed a connection living in this process (the local and cluster hosts)."""

    def attach(self, connection_id: str, send: Callable[[str], Awaitable[None]]) -> None: ...

    def detach(self, connection_id: str) -> None: ...


@router.post("/{session_id}/turns", response_model=None, responses=_SEND_RESPONSES)
async def send_turn(
    request: Request,
    runtime: RuntimeDep,
    caller: Caller,
    body: TurnRequest,
    session_id: str = SESSION_ID,
    idempotency_key: Annotated[
        str | None,
        Header(max_length=128, description="a retried POST with the same key never runs the turn twice"),
    ] = None,
    wait: Annotated[
        float | None, Query(ge=0, le=3600, description="JSON answers: seconds to wait for the end")
    ] = None,
) -> Any:
    """Send a message on the session and answer its turn: as server-sent events with ``Accept:
    text/event-stream`` (each ``id:`` the frame's ``seq``), else as JSON when it ends (``202`` with
    where to stream it if it still runs after ``wait`` seconds)."""
    from agentvm.streaming.resume import subscribe_after  # not on the Lambda's cold start
    from agentvm.turns.submit import Sender, send_message
    from agentvm.turns.watch import WatchedTurn, follow_turn

    key = _request_key(idempotency_key, body.requestId)
    session, image = await _session(runtime, caller, session_id)
    streams = _wants_stream(request)
    feed = await Feed.open(runtime, caller) if streams and isinstance(runtime.push, AttachablePush) else None
    try:
        sent = await send_message(
            runtime,
            caller.tenant_id,
            image,
            body.message,
            request_id=f"http:{key or secrets.token_hex(8)}",  # a namespace of its own
            sender=Sender(connection_id=feed.connection_id if feed else f"http_{secrets.token_hex(8)}"),
            # a retry (a named key) queues behind its own turn, never interrupts nor is refused by it
            concurrency="queue" if key else None,
            notices=[],
        )
        stored = await runtime.store.get_turn(sent.turn_id)
        user_seq = stored.userSeq if stored is not None else 0
        if feed is not None:
            after = user_seq * TURN_SPAN  # the turn's frames from its first
            await subscribe_after(runtime, feed.connection_id, session, after)
            stream = feed.events(runtime, image, after=after, band=user_seq)
            feed = None  # the stream closes it
            return _event_stream(stream, sent.turn_id)
    finally:
        if feed is not None:
            await feed.close(runtime)
    watched = WatchedTurn(image.sessionId, sent.turn_id, sent.message_id, user_seq)
    limit = runtime.turns.mcp_call_deadline_s if wait is None else wait
    followed = await follow_turn(runtime, watched, deadline_s=limit, poll_s=runtime.turns.mcp_poll_s)
    if streams:  # a host that cannot stream: the turn's stored frames as one body
        if not (followed.ended or followed.status == "suspended"):
            answer = _answer(key, sent, image, followed, user_seq)
            return JSONResponse(answer, status_code=202, headers=_where(image))
        frames = await stored_frames(runtime, session, after=user_seq * TURN_SPAN, band=user_seq)
        return _event_stream(_once(frames), sent.turn_id)
    answer = _answer(key, sent, image, followed, user_seq)
    if followed.ended or followed.status == "suspended":
        return answer
    return JSONResponse(answer, status_code=202, headers=_where(image))


@router.get(
    "/{session_id}/events",
    response_model=None,
    responses={
        200: {"description": "the session's events", "content": _SSE_CONTENT},
        **error_responses(400, 404),
    },
)
async def session_events(
    runtime: RuntimeDep,
    caller: Caller,
    session_id: str = SESSION_ID,
    last_event_id: Annotated[
        str | None, Header(max_length=20, description="the last id received: the stream resumes after it")
    ] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_EVENT_ID, description="the same as Last-Event-ID (the header wins)")
    ] = None,
) -> StreamingResponse:
    """The session's events after ``Last-Event-ID`` (stored ones, then the live turn's), as
    server-sent events, until no turn of the session is queued or running."""
    from agentvm.streaming.resume import subscribe_after  # not on the Lambda's cold start

    cursor = _cursor(last_event_id, after)
    session, image = await _session(runtime, caller, session_id)
    if not isinstance(runtime.push, AttachablePush):
        return _event_stream(_once(await stored_frames(runtime, session, after=cursor)), None)
    feed = await Feed.open(runtime, caller)
    try:
        await subscribe_after(runtime, feed.connection_id, session, cursor)
    except BaseException:
        await feed.close(runtime)
        raise
    return _event_stream(feed.events(runtime, image, after=cursor, band=None), None)


@router.post(
    "/{session_id}/interrupt",
    response_model=None,
    responses={
        **ok(200, "Interrupted", {"interrupted": True}, "whether a turn was live"),
        **error_responses(404),
    },
)
async def interrupt(runtime: RuntimeDep, caller: Caller, session_id: str = SESSION_ID) -> dict[str, bool]:
    """Stop the session's running (or queued, or suspended) turn, as ``agent_interrupt`` does: its
    stream ends with ``interrupted`` and ``conversation_end {reason: "interrupted"}``."""
    from agentvm.turns.interrupt import interrupt_image  # not on the Lambda's cold start

    _session_record, image = await _session(runtime, caller, session_id)
    return {"interrupted": await interrupt_image(runtime, caller.tenant_id, image)}


class Feed:
    """A subscriber connection whose frames go to this HTTP response (through the host's push)."""

    def __init__(self, connection_id: str) -> None:
        self.connection_id = connection_id
        self.queue: asyncio.Queue[str] = asyncio.Queue(MAX_QUEUED_FRAMES)

    @classmethod
    async def open(cls, rt: Runtime, caller: Principal) -> Feed:
        feed = cls(rt.ids.new("sse"))
        await rt.connections.register(
            ConnectionInfo(
                connection_id=feed.connection_id,
                tenant_id=caller.tenant_id,
                connected_at=rt.clock.now_ms(),
                key_id=caller.key_id,
            ),
            tenant_cap=await connection_cap(rt.tenant_limits, caller.tenant_id),
        )
        assert isinstance(rt.push, AttachablePush)
        rt.push.attach(feed.connection_id, feed.send)
        return feed

    async def send(self, payload: str) -> None:
        try:
            self.queue.put_nowait(payload)
        except asyncio.QueueFull:
            raise ConnectionGone("the client stopped reading") from None

    async def close(self, rt: Runtime) -> None:
        assert isinstance(rt.push, AttachablePush)
        rt.push.detach(self.connection_id)
        await rt.connections.remove(self.connection_id)

    async def events(
        self, rt: Runtime, image: ImageRecord, *, after: int, band: int | None, follow: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """The frames above ``after`` (of the turn answering user message ``band`` only, if given),
        each once, in order; ``{}`` for a keep-alive. Ends after the turn (or, without ``band``,
        the session's live turns) ended or suspended, or after ``STREAM_MAX_S``; with ``follow``,
        only after ``STREAM_MAX_S`` (or when the client goes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STREAM_MAX_S
        last = after
        try:
            live = follow or band is not None or await _live(rt, image)
            while (live or not self.queue.empty()) and loop.time() < deadline:
                try:  # not wait_for: on 3.11 it makes a task per frame and can lose a cancel
                    async with asyncio.timeout(KEEPALIVE_S):
                        payload = await self.queue.get()
                except TimeoutError:
                    yield {}
                    continue
                for frame in _frames(payload):
                    seq = frame.get("seq")
                    if isinstance(seq, int):
                        if seq <= last or (band is not None and seq // TURN_SPAN != band):
                            continue  # sent already (a replay overlapping the live stream), or not ours
                        last = seq
                    yield frame
                    if frame.get("type") in TURN_END_FRAMES:
                        live = follow or (band is None and await _live(rt, image))
                        if band is not None:
                            return
        finally:
            with contextlib.suppress(Exception):
                await self.close(rt)


async def _live(rt: Runtime, image: ImageRecord) -> bool:
    """A turn of the session is queued or running (a suspended one waits on someone: not streamed)."""
    from agentvm.turns.interrupt import active_turn

    turn = await active_turn(rt, image.tenantId, image)
    return turn is not None and turn.status in {"queued", "running"}


def _frames(payload: str) -> list[dict[str, Any]]:
    parsed = json.loads(payload)
    return [f for f in (parsed if isinstance(parsed, list) else [parsed]) if isinstance(f, dict)]


async def stored_frames(
    rt: Runtime, session: SessionRecord, *, after: int, band: int | None = None
) -> list[dict[str, Any]]:
    """The stored frames above ``after`` of the session's ended or suspended turns (of the turn
    answering user message ``band`` only, if given), each message's text as one ``text_delta``."""
    from agentvm.streaming.resume import finished_turns_after

    out: list[dict[str, Any]] = []
    cursor = after
    for done in await finished_turns_after(rt, session, after, band=band):
        for payload in done.replay(rt, session, after=cursor, merge_text=True):
            out.extend(_frames(payload))
        cursor = max([cursor, *(f["seq"] for f in out if isinstance(f.get("seq"), int))])
    return out


async def _once(frames: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for frame in frames:
        yield frame


def _event_stream(frames: AsyncIterator[dict[str, Any]], turn_id: str | None) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"  # EventSource clients reconnect after a second, with Last-Event-ID
        async for frame in frames:
            yield sse_event(frame)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    if turn_id is not None:
        headers["X-Turn-Id"] = turn_id
    return StreamingResponse(body(), media_type=EVENT_STREAM, headers=headers)


def sse_event(frame: dict[str, Any]) -> bytes:
    """One frame as a server-sent event (``{}``: a keep-alive comment)."""
    if not frame:
        return b": keep-alive\n\n"
    lines = []
    if isinstance(frame.get("seq"), int):
        lines.append(f"id: {frame['seq']}")
    if isinstance(frame.get("type"), str):
        lines.append(f"event: {frame['type']}")
    lines.append("data: " + json.dumps(frame, separators=(",", ":"), ensure_ascii=False))
    return ("\n".join(lines) + "\n\n").encode()


def _wants_stream(request: Request) -> bool:
    return EVENT_STREAM in request.headers.get("accept", "")


def _request_key(header: str | None, body_key: str | None) -> str | None:
    if header is not None and not IDEMPOTENCY_KEY.match(header):
        raise BadRequest("Idempotency-Key: 1-128 characters of letters, digits, '_', '.', ':' or '-'")
    if header is not None and body_key is not None and header != body_key:
        raise BadRequest("Idempotency-Key and requestId differ: give one of them")
    return header or body_key


def _cursor(header: str | None, query: int | None) -> int:
    if header is None:
        return query or 0
    try:
        value = int(header.strip())
    except ValueError:
        raise BadRequest("Last-Event-ID: an event's id (a number)") from None
    if value < 0:
        raise BadRequest("Last-Event-ID: an event's id (a number)")
    return value


async def _session(rt: Runtime, caller: Principal, session_id: str) -> tuple[SessionRecord, ImageRecord]:
    """The caller's tenant's session and its image; another tenant's reads as missing."""
    session = await rt.store.get_session(caller.tenant_id, session_id)
    image = None if session is None else await rt.store.get_image(caller.tenant_id, session.imageId)
    if session is None or image is None:
        raise NotFound(f"session {session_id} not found")
    return session, image


def _answer(
    key: str | None, sent: Sent, image: ImageRecord, followed: FollowedTurn, user_seq: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "requestId": key,
        "sessionId": image.sessionId,
        "turnId": sent.turn_id,
        "created": sent.created,
        "status": followed.status,
        "reply": followed.reply,
        "error": followed.error,
        "errorCode": followed.error_code,
        "waiting": list(followed.waiting),
    }
    if not (followed.status in TERMINAL or followed.status == "suspended"):
        out["lastEventId"] = user_seq * TURN_SPAN
    return out


def _where(image: ImageRecord) -> dict[str, str]:
    return {"Location": f"/v1/sessions/{image.sessionId}/events"}


__all__ = [
    "EVENT_STREAM",
    "TURN_END_FRAMES",
    "AttachablePush",
    "Feed",
    "containers",
    "router",
    "sse_event",
    "stored_frames",
]
