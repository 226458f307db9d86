"""Session events: send, list (paged, filtered) and the stream (server-sent events through the same
subscriber feed as api/http_turns.py, mapped by ``mapping.events_of``, resumable with ``Last-Event-ID``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Header, Request
from fastapi.responses import StreamingResponse

from agentvm.api.deps import RuntimeDep  # noqa: TC001
from agentvm.api.http_turns import EVENT_STREAM, IDEMPOTENCY_KEY, AttachablePush, Feed, stored_frames
from agentvm.api.managed import mapping
from agentvm.api.managed.common import Caller, JSONBody, created_between, managed_router, many, page
from agentvm.api.managed.inputs import check_event, send_event
from agentvm.api.managed.sessions import live_session
from agentvm.errors import BadRequest
from agentvm.messages import ToolCallMessage, UserMessage
from agentvm.records import user_message_id_for
from agentvm.streaming.frames import TURN_SPAN

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.records import ImageRecord, SessionRecord
    from agentvm.runtime import Runtime

router = managed_router()


# -- events ------------------------------------------------------------------------------------
@router.post("/sessions/{session_id}/events")
async def send_events(
    runtime: RuntimeDep,
    caller: Caller,
    session_id: str,
    body: JSONBody,
    idempotency_key: Annotated[str | None, Header(max_length=128)] = None,
) -> dict[str, Any]:
    """``user.message``, ``user.interrupt``, ``user.tool_confirmation``, ``user.custom_tool_result``,
    all checked before any is acted on. ``Idempotency-Key``: a retried POST sends no message twice."""
    events = body.get("events")
    if not isinstance(events, list) or not events:
        raise BadRequest("events: a list of at least one event")
    for event in events:
        check_event(event)
    if idempotency_key is not None and not IDEMPOTENCY_KEY.match(idempotency_key):
        raise BadRequest("Idempotency-Key: 1-128 characters of letters, digits, '_', '.', ':' or '-'")
    doc, _session, image = await live_session(runtime, caller.tenant_id, session_id)
    if doc.get("archived_at"):
        raise BadRequest(f"session {session_id} is archived")
    return {
        "data": [
            await send_event(
                runtime,
                caller,
                doc,
                image,
                event,
                key=None if idempotency_key is None else f"{idempotency_key}:{i}",
            )
            for i, event in enumerate(events)
        ]
    }


@router.get("/sessions/{session_id}/events")
async def list_events(
    request: Request, runtime: RuntimeDep, caller: Caller, session_id: str
) -> dict[str, Any]:
    """The session's events (of its ended or suspended turns, within the history window)."""
    _doc, session, image = await live_session(runtime, caller.tenant_id, session_id)
    view = await _view(runtime, session, image)
    events = [
        e for frame in await stored_frames(runtime, session, after=0) for e in mapping.events_of(frame, view)
    ]
    types = many(request, "types")
    if types:
        events = [e for e in events if e["type"] in types]
    events = created_between(request, events, field="processed_at")
    return page(request, events)


@router.get("/sessions/{session_id}/events/stream")
async def stream_events(
    request: Request,
    runtime: RuntimeDep,
    caller: Caller,
    session_id: str,
    last_event_id: Annotated[str | None, Header(max_length=20)] = None,
) -> StreamingResponse:
    """The session's events as server-sent events, from now (or after ``Last-Event-ID``) on, until
    the client closes the stream (at most an hour: resume with ``Last-Event-ID``)."""
    from agentvm.streaming.resume import subscribe_after

    _doc, session, image = await live_session(runtime, caller.tenant_id, session_id)
    cursor = _cursor(last_event_id) if last_event_id is not None else await _now_cursor(runtime, image)
    view = await _view(runtime, session, image)
    view.deltas = frozenset(many(request, "event_deltas"))
    if not isinstance(runtime.push, AttachablePush):  # AWS: what is stored, as one body
        await _live_turn_ended(runtime, image)
        frames = await stored_frames(runtime, session, after=cursor)
        return _sse(runtime, session, view, _listed(frames))
    feed = await Feed.open(runtime, caller)
    try:
        await subscribe_after(runtime, feed.connection_id, session, cursor)
    except BaseException:
        await feed.close(runtime)
        raise
    return _sse(runtime, session, view, feed.events(runtime, image, after=cursor, band=None, follow=True))


async def _live_turn_ended(rt: Runtime, image: ImageRecord) -> None:
    """Where the stream cannot follow a turn (API Gateway's HTTP API answers a Lambda's response
    whole): wait for the live turn to end or suspend on someone, within the wait a turn call gets
    (``AVM_MCP_CALL_DEADLINE_S``, 25 s on AWS), so the one body holds its events."""
    from agentvm.turns.interrupt import active_turn
    from agentvm.turns.watch import WatchedTurn, follow_turn

    turn = await active_turn(rt, image.tenantId, image)
    if turn is None:
        return
    # follow_turn returns at once for a turn suspended on someone; once answered, its continuation
    # is followed like a queued turn
    watched = WatchedTurn(image.sessionId, turn.turnId, user_message_id_for(turn.turnId), turn.userSeq)
    await follow_turn(rt, watched, deadline_s=rt.turns.mcp_call_deadline_s, poll_s=rt.turns.mcp_poll_s)


async def _listed(frames: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for frame in frames:
        yield frame


def _sse(
    rt: Runtime, session: SessionRecord, view: mapping.SessionView, frames: AsyncIterator[dict[str, Any]]
) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        async for frame in frames:
            if not frame:
                yield b": keep-alive\n\n"
                continue
            if frame.get("type") == "message_persisted":
                await _learn_user_text(rt, session, view, frame)
            seq = frame.get("seq")
            for event in mapping.events_of(frame, view):
                # a preview is never resumed to (a reconnect gets the final event instead)
                preview = event["type"] in ("event_start", "event_delta")
                head = f"id: {seq}\n" if isinstance(seq, int) and not preview else ""
                data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
                yield f"{head}event: {event['type']}\ndata: {data}\n\n".encode()

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(body(), media_type=EVENT_STREAM, headers=headers)


async def _view(rt: Runtime, session: SessionRecord, image: ImageRecord) -> mapping.SessionView:
    view = mapping.SessionView.of(image.tools, image.approval)
    for message in await rt.store.recent_messages(session.sessionId, rt.turns.history_window):
        if isinstance(message, UserMessage):
            view.user_texts[message.id] = _plain(message.content)
        elif isinstance(message, ToolCallMessage):  # a result's call may be before the cursor
            view.calls[message.toolCall.id] = message.toolCall.name
    return view


async def _learn_user_text(
    rt: Runtime, session: SessionRecord, view: mapping.SessionView, frame: dict[str, Any]
) -> None:
    message_id = (frame.get("data") or {}).get("messageId")
    if message_id and message_id not in view.user_texts:
        for message in await rt.store.recent_messages(session.sessionId, 8):
            if isinstance(message, UserMessage):
                view.user_texts[message.id] = _plain(message.content)


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


async def _now_cursor(rt: Runtime, image: ImageRecord) -> int:
    """Where a stream opened now starts: the live turn's first frame, else after every frame so far."""
    from agentvm.turns.interrupt import active_turn

    turn = await active_turn(rt, image.tenantId, image)
    if turn is not None:
        return turn.userSeq * TURN_SPAN
    last = await rt.store.recent_messages_after(image.sessionId, 0, 1)
    return (last[-1].seq + 1) * TURN_SPAN - 1 if last else 0


def _cursor(header: str) -> int:
    try:
        value = int(header.strip())
    except ValueError:
        raise BadRequest("Last-Event-ID: an event's id (a number)") from None
    if value < 0:
        raise BadRequest("Last-Event-ID: an event's id (a number)")
    return value


__all__ = ["router"]
