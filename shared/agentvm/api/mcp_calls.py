"""One MCP ``tools/call`` on ``/mcp`` (``api/mcp.py``): check the arguments, send the message as a
WebSocket ``message_send`` would (``turns.submit``), follow the turn in the store
(``turns.watch``), reporting its steps as progress, and answer its reply, or an ``isError`` result
saying what went wrong and what to do about it. Never a hang: the wait has a deadline."""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, Any

from agentvm.errors import AgentVMError
from agentvm.turns.submit import Sender, send_message
from agentvm.turns.watch import WatchedTurn, follow_turn

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import mcp_types

    from agentvm.api.mcp import McpCaller
    from agentvm.records import ImageRecord
    from agentvm.turns.watch import FollowedTurn

MAX_MESSAGE_CHARS = 100_000
REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
# What tools/list says of every tool's input (api/mcp.py).
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_MESSAGE_CHARS,
            "description": "what to tell the agent; its reply is the result",
        },
        "requestId": {
            "type": "string",
            "pattern": REQUEST_ID.pattern,
            "description": (
                "optional: the same id again never sends the message twice; it waits for the first"
                " call's reply (use it to retry a call that ran out of time)"
            ),
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}


async def run_call(
    caller: McpCaller,
    image: ImageRecord,
    arguments: dict[str, Any],
    report_progress: Callable[[float, float | None, str | None], Awaitable[None]],
) -> mcp_types.CallToolResult:
    """Run a turn of ``image`` with the call's message and answer its reply."""
    problem = _argument_problem(arguments)
    if problem is not None:
        return _error(f"invalid arguments: {problem}")
    rt, tenant_id = caller.runtime, caller.principal.tenant_id
    given_id = arguments.get("requestId")
    request_id = given_id or f"mcp-{secrets.token_hex(8)}"
    try:
        sent = await send_message(
            rt,
            tenant_id,
            image,
            arguments["message"],
            # A namespace of its own: an MCP caller's ids never meet a WebSocket client's.
            request_id=f"mcp:{request_id}",
            # Not a registered connection: subscribing it changes nothing, nothing is pushed to it.
            sender=Sender(connection_id=f"mcp_{secrets.token_hex(8)}"),
            # A call naming its requestId may be a retry, whose own turn may still run: it queues
            # behind it, never interrupts it (``interrupt``) nor is refused by it (``reject``).
            concurrency="queue" if given_id else None,
            notices=[],
        )
    except AgentVMError as exc:  # refused before the turn: quota_exceeded, session_busy, ...
        return _error(f"{exc.code}: {exc.message}", request_id=request_id)
    stored = await rt.store.get_turn(sent.turn_id)
    user_seq = stored.userSeq if stored is not None else 0
    steps = 0

    async def on_step(step: str) -> None:
        nonlocal steps
        steps += 1
        await report_progress(steps, None, step)

    followed = await follow_turn(
        rt,
        WatchedTurn(image.sessionId, sent.turn_id, sent.message_id, user_seq),
        deadline_s=rt.turns.mcp_call_deadline_s,
        poll_s=rt.turns.mcp_poll_s,
        on_step=on_step,
    )
    return _answer(followed, request_id=request_id, turn_id=sent.turn_id)


def _argument_problem(arguments: dict[str, Any]) -> str | None:
    unknown = sorted(set(arguments) - {"message", "requestId"})
    if unknown:
        return f"unknown argument {unknown[0]!r}; give message (and optionally requestId)"
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        return "message must be a non-empty string"
    if len(message) > MAX_MESSAGE_CHARS:
        return f"message is longer than {MAX_MESSAGE_CHARS} characters"
    request_id = arguments.get("requestId")
    if request_id is not None and (not isinstance(request_id, str) or not REQUEST_ID.match(request_id)):
        return "requestId must be 1-128 characters of letters, digits, '_', '.', ':' or '-'"
    return None


def _answer(followed: FollowedTurn, *, request_id: str, turn_id: str) -> mcp_types.CallToolResult:
    facts = {"requestId": request_id, "turnId": turn_id, "status": followed.status}
    if followed.status == "completed":
        return _result(followed.reply, {**facts, "reply": followed.reply})
    if followed.status == "failed":
        code = followed.error_code or "turn_failed"
        return _error(f"the turn failed ({code}): {followed.error or 'no reason given'}", **facts)
    if followed.status == "interrupted":
        partial = f" Its partial reply: {followed.reply}" if followed.reply else ""
        return _error(f"the turn was interrupted before it finished.{partial}", **facts)
    if followed.status == "suspended":
        waits = "; ".join(followed.waiting) or "a decision"
        return _error(
            f"the turn is waiting for {waits}. Once that is decided, call again with requestId"
            f" {request_id!r} to get the reply.",
            **facts,
        )
    return _error(  # queued or running when the deadline passed: the turn goes on
        f"the turn is still {followed.status}. Call again with requestId {request_id!r} to wait for"
        " its reply (the message is not sent twice).",
        **facts,
    )


def _result(text: str, facts: dict[str, Any]) -> mcp_types.CallToolResult:
    import mcp_types

    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=text)], structured_content=facts, is_error=False
    )


def _error(text: str, **facts: Any) -> mcp_types.CallToolResult:
    import mcp_types

    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=text)],
        structured_content={**facts, "error": text} if facts else None,
        is_error=True,
    )


__all__ = ["INPUT_SCHEMA", "MAX_MESSAGE_CHARS", "REQUEST_ID", "run_call"]
