"""What each event a client sends does in AgentVM: ``user.message`` is ``turns.submit.send_message``,
``user.interrupt`` the existing interrupt, ``user.tool_confirmation`` and ``user.custom_tool_result``
answer the turn's waits (``turns.waits.answer``; exactly one answer wins). No FastAPI in here.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from agentvm.api.managed import mapping
from agentvm.api.managed.errors import NotServed
from agentvm.errors import BadRequest, NotFound

if TYPE_CHECKING:
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime
    from agentvm.security.auth import Principal


SERVED = ("user.message", "user.interrupt", "user.tool_confirmation", "user.custom_tool_result")


def check_event(event: Any) -> None:
    """Refuse an event that cannot be sent, before any of a request's events is acted on."""
    if not isinstance(event, dict):
        raise BadRequest("events: each event is an object with a type")
    kind = event.get("type")
    if kind not in SERVED:
        raise NotServed(f"events: {kind!r} is not served ({', '.join(SERVED)} are)")
    if kind == "user.message":
        mapping.user_text(event.get("content"))
    if kind == "user.tool_confirmation":
        if event.get("result") not in ("allow", "deny"):
            raise BadRequest("result: allow or deny")
        if not isinstance(event.get("deny_message"), str | None):
            raise BadRequest("deny_message: a string")
    field = {"user.tool_confirmation": "tool_use_id", "user.custom_tool_result": "custom_tool_use_id"}.get(
        kind
    )
    if field is not None:
        named = event.get(field)
        if not isinstance(named, str) or not named:
            raise BadRequest(f"{field}: the id of the tool use event to answer")
        mapping.split_tool_use_id(named)


async def send_event(
    rt: Runtime,
    caller: Principal,
    doc: dict[str, Any],
    image: ImageRecord,
    event: dict[str, Any],
    *,
    key: str | None = None,
) -> dict[str, Any]:
    """Do what a checked event (``check_event``) says, on the session ``doc`` (its image); ``key``:
    a message sent with the same key before is not sent again (its first sending answers)."""
    from agentvm.turns.submit import Sender, send_message
    from agentvm.turns.waits import answer, find_wait

    kind = event["type"]
    now = mapping.iso(rt.clock.now_ms())
    if kind == "user.message":
        text = mapping.user_text(event.get("content"))
        sent = await send_message(
            rt,
            caller.tenant_id,
            image,
            text,
            request_id=f"managed:{key or secrets.token_hex(8)}",
            sender=Sender(connection_id=f"http_{secrets.token_hex(8)}"),
            notices=[],
        )
        return {"id": sent.message_id, "type": kind, "content": event["content"], "processed_at": now}
    if kind == "user.interrupt":
        from agentvm.turns.interrupt import interrupt_image

        await interrupt_image(rt, caller.tenant_id, image)
        return {"id": rt.ids.new("sevt"), "type": kind, "processed_at": now}
    if kind in ("user.tool_confirmation", "user.custom_tool_result"):
        field = "tool_use_id" if kind == "user.tool_confirmation" else "custom_tool_use_id"
        turn_id, call_id = mapping.split_tool_use_id(event[field])
        wait = await find_wait(rt, caller.tenant_id, turn_id, call_id)
        if wait.sessionId != doc["id"]:
            raise NotFound(f"No tool call {call_id} is waiting in turn {turn_id}")
        if kind == "user.tool_confirmation":
            result = event["result"]
            await answer(
                rt,
                caller.tenant_id,
                turn_id,
                call_id,
                kind="approval",
                status="approved" if result == "allow" else "denied",
                by=caller.key_id,
                reason=event.get("deny_message"),
            )
        else:
            await answer(
                rt,
                caller.tenant_id,
                turn_id,
                call_id,
                kind="client",
                status="answered",
                by=caller.key_id,
                output=mapping.result_text(event.get("content")),
                is_error=bool(event.get("is_error")),
            )
        return {**event, "id": rt.ids.new("sevt"), "processed_at": now}
    raise NotServed(f"events: {kind!r} is not served ({', '.join(SERVED)} are)")


__all__ = ["SERVED", "check_event", "send_event"]
