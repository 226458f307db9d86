"""Anthropic's Managed Agents shapes onto AgentVM's (docs/managed-agents.md), with no HTTP in it.

- An *agent* (a versioned config) becomes an image's config (``ImageConfig``) when a session is made
  from it: ``system`` → ``systemPrompt``; custom tools → client-side tools (the turn suspends until
  the client sends the result); the ``agent_toolset_20260401`` → the sandbox tools, its
  ``always_ask`` permission policies → the image's approval list; URL MCP servers → ``mcpServers``.
- A turn's AgentX v1 frames (docs/protocol.md) become session *events*: ``conversation_start`` →
  ``session.status_running``; ``assistant_message`` → ``agent.message`` (with a
  ``span.model_request_end`` carrying the step's usage); a call of a client-side tool →
  ``agent.custom_tool_use``; any other call → ``agent.tool_use`` (``evaluated_permission`` ``ask``
  when it waits for approval); ``tool_result`` → ``agent.tool_result`` (a client-side tool's:
  ``user.custom_tool_result``, the client's answer); ``turn_suspended`` →
  ``session.status_idle`` with ``requires_action``; ``conversation_end`` → ``session.status_idle``
  ``end_turn``; ``error_occurred`` → ``session.error`` then idle.

A tool call's event id is ``<turnId>.<toolCallId>``: the ``custom_tool_use_id`` / ``tool_use_id`` a
client sends back names the AgentVM wait to answer, with nothing more stored. A ``user.message``'s id
and an ``agent.message``'s are the stored messages' (the previews of ``event_deltas`` carry the
latter); every other event's id is ``sevt_<seq>``, the frame's seq (the SSE ``id:``
a stream resumes after).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.errors import BadRequest

if TYPE_CHECKING:
    from agentvm.records import UsageRecord

BETA = "managed-agents-2026-04-01"
TOOLSET = "agent_toolset_20260401"
# The Managed Agents toolset's tools, by the sandbox tools (agent/tools/sandbox.py) that do their job.
TOOLSET_TOOLS: dict[str, tuple[str, ...]] = {
    "bash": ("sh", "python"),
    "read": ("read",),
    "write": ("write",),
    "edit": ("edit",),
    "glob": ("ls",),
    "grep": (),  # sh's grep does it
}
NOT_SERVED_TOOLS = frozenset({"web_fetch", "web_search"})
# A failed turn's ``errorCode`` (docs/protocol.md) as a ``session.error``'s type (the turn is over:
# AgentVM retried the provider already).
ERROR_TYPES = {
    "rate_limited": "model_rate_limited_error",
    "provider_unavailable": "model_overloaded_error",
    "provider_rejected": "model_request_failed_error",
}
STATUSES = ("idle", "running", "rescheduling", "terminated")


def iso(ms: int) -> str:
    """Epoch milliseconds as the API's RFC 3339 time."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat().replace("+00:00", "Z")


def ms_of(value: str) -> int:
    """An RFC 3339 time (a list filter) as epoch milliseconds."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"{value!r}: an RFC 3339 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def tool_use_id(turn_id: str, call_id: str) -> str:
    return f"{turn_id}.{call_id}"


def split_tool_use_id(value: str) -> tuple[str, str]:
    """``(turnId, toolCallId)`` of an ``agent.custom_tool_use`` / ``agent.tool_use`` event id."""
    turn_id, dot, call_id = value.partition(".")
    if not dot or not turn_id or not call_id:
        raise BadRequest(f"{value!r} is not the id of a tool use event of this session")
    return turn_id, call_id


def model_id(model: Any) -> str:
    """An agent's ``model``: a string or ``{"id": ...}``."""
    if isinstance(model, str) and model:
        return model
    if isinstance(model, dict) and isinstance(model.get("id"), str) and model["id"]:
        return model["id"]
    raise BadRequest("model: a model id, or an object with its id")


def image_config(agent: dict[str, Any]) -> dict[str, Any]:
    """What an image made from this agent version is configured with (``ImageConfig``'s fields)."""
    tools: list[dict[str, Any]] = []
    approval: list[str] = []
    sandbox = False
    for tool in agent.get("tools") or []:
        kind = tool.get("type")
        if kind == "custom":
            tools.append(
                {
                    "type": "client",
                    "name": tool["name"],
                    "description": tool.get("description") or tool["name"],
                    "inputSchema": tool.get("input_schema") or {"type": "object", "properties": {}},
                }
            )
        elif kind == TOOLSET:
            enabled, asked = toolset_tools(tool)
            sandbox = sandbox or bool(enabled)
            approval.extend(asked)
        # mcp_toolset: the server's tools come with its mcpServers entry
    config: dict[str, Any] = {"name": agent["name"][:200]}
    if agent.get("description"):
        config["description"] = agent["description"][:2000]
    if agent.get("system"):
        config["systemPrompt"] = agent["system"]
    if sandbox:
        tools.append({"type": "sandbox"})
    if tools:
        config["tools"] = tools
    servers = {
        s["name"]: {"type": "http", "url": s["url"]} for s in agent.get("mcp_servers") or [] if s.get("url")
    }
    if servers:
        config["mcpServers"] = servers
    if approval:
        config["approval"] = {"tools": sorted(set(approval))}
    return config


def toolset_tools(toolset: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The sandbox tools an ``agent_toolset_20260401`` enables, and those that wait for approval."""
    default = toolset.get("default_config") or {}
    configs = {c.get("name"): c for c in toolset.get("configs") or []}
    enabled: list[str] = []
    asked: list[str] = []
    for name, ours in TOOLSET_TOOLS.items():
        conf = {**default, **{k: v for k, v in configs.get(name, {}).items() if v is not None}}
        if conf.get("enabled", True) is False:
            continue
        enabled.extend(ours)
        if (conf.get("permission_policy") or {}).get("type") == "always_ask":
            asked.extend(ours)
    for name in NOT_SERVED_TOOLS & set(configs):
        if configs[name].get("enabled"):
            raise BadRequest(f"tools: {name} is not served by AgentVM (docs/managed-agents.md)")
    return enabled, asked


@dataclass
class SessionView:
    """What mapping a session's frames needs to know: its client-side tools and approved tools."""

    client_tools: frozenset[str] = frozenset()
    ask_tools: frozenset[str] | None = frozenset()  # None: every tool
    user_texts: dict[str, str] = field(default_factory=dict)  # user message id → its text
    calls: dict[str, str] = field(default_factory=dict)  # tool call id → the tool's name (seen so far)
    deltas: frozenset[str] = frozenset()  # the stream's ``event_deltas`` (previews asked for)
    message_id: str = ""  # the model message being streamed (``message_start``)
    previewing: bool = False  # its ``event_start`` was sent

    @classmethod
    def of(cls, tools: list[dict[str, Any]] | None, approval: dict[str, Any] | None) -> SessionView:
        client = frozenset(t["name"] for t in tools or [] if t.get("type") == "client")
        asked = (approval or {}).get("tools")
        return cls(client, None if asked == "*" else frozenset(asked or ()))

    def asks(self, tool: str) -> bool:
        return self.ask_tools is None or tool in self.ask_tools


def session_usage(records: list[UsageRecord]) -> dict[str, Any]:
    """A session's usage from its metered usage records (every model call: turns, steps, titles,
    compaction), as the API counts it: ``input_tokens`` without the cached ones."""
    read = sum(r.cacheReadTokens for r in records)
    written = sum(r.cacheWriteTokens for r in records)
    return {
        "input_tokens": sum(r.inputTokens for r in records) - read - written,
        "output_tokens": sum(r.outputTokens for r in records),
        "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0},
        "active_seconds": sum(r.durationMs for r in records) / 1000,
    }


def user_text(content: Any) -> str:
    """The text of a ``user.message``'s content (text blocks; other blocks are refused)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            raise BadRequest("content: text blocks only (images and documents are not served)")
        parts.append(block["text"])
    text = "\n".join(parts)
    if not text:
        raise BadRequest("content: at least one non-empty text block")
    return text


def result_text(content: Any) -> str:
    """A ``user.custom_tool_result``'s content as the tool's output."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))


def events_of(frame: dict[str, Any], view: SessionView) -> list[dict[str, Any]]:
    """The session events one AgentX v1 frame stands for (none for most stream frames)."""
    kind = frame.get("type")
    data = frame.get("data") or {}
    seq = frame.get("seq")
    context = frame.get("context") or {}
    turn_id = context.get("turnId") or data.get("turnId") or ""
    at = iso(int(frame.get("timestamp") or 0))
    eid = f"sevt_{seq}" if isinstance(seq, int) else f"sevt_{turn_id}_{kind}"

    def one(kind_: str, **fields: Any) -> dict[str, Any]:
        return {"id": fields.pop("id", eid), "type": kind_, "processed_at": at, **fields}

    if kind == "message_persisted":
        text = view.user_texts.get(data.get("messageId", ""))
        if text is None:
            return []
        return [one("user.message", id=data["messageId"], content=[{"type": "text", "text": text}])]
    if kind == "conversation_start":
        return [one("session.status_running")]
    if kind == "message_start":
        view.message_id, view.previewing = str(data.get("messageId") or ""), False
        return []
    if kind == "text_delta" and "agent.message" in view.deltas and view.message_id:
        previews: list[dict[str, Any]] = []
        if not view.previewing:
            view.previewing = True
            previews.append(
                {"type": "event_start", "event": {"id": view.message_id, "type": "agent.message"}}
            )
        block = {"type": "text", "text": str(data.get("text", ""))}
        delta = {"type": "content_delta", "content": block}
        previews.append({"type": "event_delta", "event_id": view.message_id, "delta": delta})
        return previews
    if kind == "assistant_message":
        text = _text_of(data.get("content"))
        out = []
        if text:  # its id is the stored message's: the id its previews (event_deltas) carried
            message_id = str(data.get("id") or eid)
            out.append(one("agent.message", id=message_id, content=[{"type": "text", "text": text}]))
        usage = data.get("usage")
        if usage:
            out.append(
                one(
                    "span.model_request_end",
                    id=f"{eid}_usage",
                    is_error=False,
                    model_request_start_id=f"{eid}_start",
                    model_usage={
                        "input_tokens": usage.get("inputTokens", 0),
                        "output_tokens": usage.get("outputTokens", 0),
                        # a stored message carries no cache split (the session's usage has it)
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                )
            )
        return out
    if kind == "tool_call_message":
        call = data.get("toolCall") or {}
        name, call_id = call.get("name", ""), call.get("id", "")
        view.calls[call_id] = name
        ids = {"id": tool_use_id(turn_id, call_id), "name": name, "input": call.get("input") or {}}
        if name in view.client_tools:
            return [one("agent.custom_tool_use", **ids)]
        permission = "ask" if view.asks(name) else "allow"
        evaluation = "always_ask" if permission == "ask" else "always_allow"
        return [
            one("agent.tool_use", **ids, evaluated_permission=permission, evaluation={"type": evaluation})
        ]
    if kind == "tool_result":
        call_id = str(data.get("toolCallId") or "")
        result = data.get("result")
        content = [{"type": "text", "text": result if isinstance(result, str) else json.dumps(result)}]
        if view.calls.get(call_id) in view.client_tools:  # the client's own answer, as it sent it
            return [
                one(
                    "user.custom_tool_result",
                    custom_tool_use_id=tool_use_id(turn_id, call_id),
                    content=content,
                    is_error=bool(data.get("isError")),
                )
            ]
        return [
            one(
                "agent.tool_result",
                tool_use_id=tool_use_id(turn_id, call_id),
                content=content,
                is_error=bool(data.get("isError")),
            )
        ]
    if kind == "turn_suspended":
        waiting = [tool_use_id(turn_id, w["toolCallId"]) for w in data.get("waitingFor") or []]
        return [one("session.status_idle", stop_reason={"type": "requires_action", "event_ids": waiting})]
    if kind == "error_occurred":
        message = str(data.get("message") or "the turn failed")
        error = {"type": ERROR_TYPES.get(str(data.get("code")), "unknown_error"), "message": message}
        return [
            one("session.error", error={**error, "retry_status": {"type": "terminal"}}),
            one("session.status_idle", id=f"{eid}_idle", stop_reason={"type": "retries_exhausted"}),
        ]
    if kind == "conversation_end":  # a failed turn ends with error_occurred instead
        return [one("session.status_idle", stop_reason={"type": "end_turn"})]
    return []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text"
    )


__all__ = [
    "BETA",
    "STATUSES",
    "TOOLSET",
    "SessionView",
    "events_of",
    "image_config",
    "iso",
    "model_id",
    "ms_of",
    "result_text",
    "session_usage",
    "split_tool_use_id",
    "tool_use_id",
    "toolset_tools",
    "user_text",
]
