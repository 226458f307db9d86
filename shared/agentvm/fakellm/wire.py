"""The JSON shapes of the real provider APIs, as the official SDKs parse them.

Anthropic Messages streams named SSE events (``message_start`` ... ``message_stop``); OpenAI
Chat Completions streams ``data: {chat.completion.chunk}`` lines ending with ``data: [DONE]``.
A scripted reply's tool calls come after its text: Anthropic ``tool_use`` content blocks with
``input_json_delta`` pieces (stop reason ``tool_use``), OpenAI ``tool_calls`` deltas keyed by index
(finish reason ``tool_calls``), each call's input JSON split over several events as the real APIs do.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol


def sse(data: object, event: str | None = None) -> bytes:
    """One server-sent event; compact JSON keeps it on a single ``data:`` line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


@dataclass(frozen=True, slots=True)
class ErrorReply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class Wire(Protocol):
    """One provider's wire format for one request."""

    def head(self) -> list[bytes]: ...
    def token(self, text: str) -> bytes: ...
    def tail(self, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None) -> list[bytes]: ...
    def stream_error(self) -> list[bytes]: ...
    def message(
        self, text: str, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None
    ) -> dict[str, Any]: ...
    def error(self, kind: str, retry_after: float) -> ErrorReply: ...


@dataclass(frozen=True, slots=True)
class ToolCallOut:
    """A tool call to stream: its id, name and input JSON (as sent, possibly invalid)."""

    id: str
    name: str
    arguments: str


def _input_object(arguments: str) -> Any:
    """A scripted call's input as the object a non-streamed reply carries ({} if it is not JSON)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return {}


def json_pieces(arguments: str) -> list[str]:
    """The input JSON in three pieces, as providers stream it (never one whole object)."""
    third = max(len(arguments) // 3, 1)
    return [p for p in (arguments[:third], arguments[third : 2 * third], arguments[2 * third :]) if p]


def _retry_after_header(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


class AnthropicWire:
    """``POST /v1/messages``."""

    def __init__(self, model: str, input_tokens: int, cache_read: int = 0, cache_write: int = 0) -> None:
        self.model = model
        self.input_tokens = input_tokens
        self.cache_read = cache_read
        self.cache_write = cache_write
        self.message_id = f"msg_fake_{uuid.uuid4().hex[:24]}"

    def _usage(self, output_tokens: int) -> dict[str, Any]:
        """Anthropic's usage: ``input_tokens`` counts only what the cache neither read nor wrote."""
        usage = {"input_tokens": self.input_tokens - self.cache_read - self.cache_write}
        if self.cache_read or self.cache_write:
            usage["cache_creation_input_tokens"] = self.cache_write
            usage["cache_read_input_tokens"] = self.cache_read
        return {**usage, "output_tokens": output_tokens}

    def head(self) -> list[bytes]:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(0),
        }
        return [
            sse({"type": "message_start", "message": message}, "message_start"),
            sse(
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                "content_block_start",
            ),
            sse({"type": "ping"}, "ping"),
        ]

    def token(self, text: str) -> bytes:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
        return sse(delta, "content_block_delta")

    def tail(self, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None) -> list[bytes]:
        frames = [sse({"type": "content_block_stop", "index": 0}, "content_block_stop")]
        for index, call in enumerate(calls or [], start=1):
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            frames.append(
                sse(
                    {"type": "content_block_start", "index": index, "content_block": block},
                    "content_block_start",
                )
            )
            for piece in json_pieces(call.arguments):
                delta = {"type": "input_json_delta", "partial_json": piece}
                frames.append(
                    sse(
                        {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
                    )
                )
            frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        stop = "tool_use" if calls else _stop_reason(truncated)
        frames += [
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": emitted + 10 * len(calls or [])},
                },
                "message_delta",
            ),
            sse({"type": "message_stop"}, "message_stop"),
        ]
        return frames

    def stream_error(self) -> list[bytes]:
        return [sse(_anthropic_error("overloaded_error", "Overloaded"), "error")]

    def message(
        self, text: str, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None
    ) -> dict[str, Any]:
        """The non-streamed reply: its text, then its tool calls as ``tool_use`` blocks."""
        uses = [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input_object(call.arguments)}
            for call in calls or []
        ]
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [{"type": "text", "text": text}, *uses],
            "stop_reason": "tool_use" if uses else _stop_reason(truncated),
            "stop_sequence": None,
            "usage": self._usage(emitted + 10 * len(uses)),
        }

    def error(self, kind: str, retry_after: float) -> ErrorReply:
        headers = {"request-id": f"req_fake_{uuid.uuid4().hex[:24]}"}
        if kind == "429":
            headers["retry-after"] = _retry_after_header(retry_after)
            body = _anthropic_error("rate_limit_error", "Number of requests has exceeded your rate limit.")
            return ErrorReply(429, body, headers)
        if kind == "overloaded":
            return ErrorReply(529, _anthropic_error("overloaded_error", "Overloaded"), headers)
        return ErrorReply(500, _anthropic_error("api_error", "Internal server error"), headers)


def _anthropic_error(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _stop_reason(truncated: bool) -> str:
    return "max_tokens" if truncated else "end_turn"


class OpenAIWire:
    """``POST /v1/chat/completions``."""

    def __init__(self, model: str, input_tokens: int, include_usage: bool, cached_tokens: int = 0) -> None:
        self.model = model
        self.input_tokens = input_tokens
        self.cached_tokens = cached_tokens  # of prompt_tokens
        self.include_usage = include_usage
        self.completion_id = f"chatcmpl-fake{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = usage  # null on every chunk but the last, as the real API does
        return sse(chunk)

    def head(self) -> list[bytes]:
        return [self._chunk([_choice({"role": "assistant", "content": "", "refusal": None})])]

    def token(self, text: str) -> bytes:
        return self._chunk([_choice({"content": text})])

    def tail(self, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None) -> list[bytes]:
        frames = []
        for index, call in enumerate(calls or []):
            first = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            frames.append(self._chunk([_choice({"tool_calls": [first]})]))
            for piece in json_pieces(call.arguments):
                more = {"index": index, "function": {"arguments": piece}}
                frames.append(self._chunk([_choice({"tool_calls": [more]})]))
        frames.append(self._chunk([_choice({}, "tool_calls" if calls else _finish_reason(truncated))]))
        if self.include_usage:
            frames.append(self._chunk([], self._usage(emitted + 10 * len(calls or []))))
        frames.append(sse("[DONE]"))
        return frames

    def stream_error(self) -> list[bytes]:
        return [sse(_openai_error("The server had an error while processing your request.", "server_error"))]

    def message(
        self, text: str, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None
    ) -> dict[str, Any]:
        """The non-streamed completion: its text, then its tool calls (``message.tool_calls``)."""
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if calls else _finish_reason(truncated),
                }
            ],
            "usage": self._usage(emitted + 10 * len(calls or [])),
        }

    def error(self, kind: str, retry_after: float) -> ErrorReply:
        headers = {"x-request-id": f"req_fake{uuid.uuid4().hex[:24]}"}
        if kind == "429":
            headers["retry-after"] = _retry_after_header(retry_after)
            body = _openai_error("Rate limit reached for requests.", "requests", "rate_limit_exceeded")
            return ErrorReply(429, body, headers)
        if kind == "overloaded":
            body = _openai_error(
                "The engine is currently overloaded, please try again later.", "server_error"
            )
            return ErrorReply(503, body, headers)
        body = _openai_error("The server had an error while processing your request.", "server_error")
        return ErrorReply(500, body, headers)

    def _usage(self, emitted: int) -> dict[str, Any]:
        return {
            "prompt_tokens": self.input_tokens,
            "completion_tokens": emitted,
            "total_tokens": self.input_tokens + emitted,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def _finish_reason(truncated: bool) -> str:
    return "length" if truncated else "stop"


def _openai_error(message: str, error_type: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def event_frame(event_type: str, payload: dict[str, Any], message_type: str = "event") -> bytes:
    """One message of the AWS event-stream encoding (what ``converse_stream`` reads): a prelude
    (total and header lengths, its CRC32), string headers, the JSON payload, the message's CRC32."""
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", message_type),
    ):
        key, text = name.encode(), value.encode()
        headers += bytes([len(key)]) + key + b"\x07" + struct.pack(">H", len(text)) + text
    body = json.dumps(payload, separators=(",", ":")).encode()
    prelude = struct.pack(">II", 16 + len(headers) + len(body), len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


class BedrockWire:
    """``POST /model/{modelId}/converse-stream``: Bedrock Converse's event stream. Cache reads and
    writes are reported beside ``inputTokens`` (``cacheReadInputTokens``, ``cacheWriteInputTokens``)."""

    content_type = b"application/vnd.amazon.eventstream"

    def __init__(self, model: str, input_tokens: int, cache_read: int = 0, cache_write: int = 0) -> None:
        self.model = model
        self.input_tokens = input_tokens
        self.cache_read = cache_read
        self.cache_write = cache_write

    def head(self) -> list[bytes]:
        return [event_frame("messageStart", {"role": "assistant"})]

    def token(self, text: str) -> bytes:
        return event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}})

    def tail(self, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None) -> list[bytes]:
        frames = [event_frame("contentBlockStop", {"contentBlockIndex": 0})]
        for index, call in enumerate(calls or [], start=1):
            start = {"toolUse": {"toolUseId": call.id, "name": call.name}}
            frames.append(event_frame("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            for piece in json_pieces(call.arguments):
                delta = {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}}
                frames.append(event_frame("contentBlockDelta", delta))
            frames.append(event_frame("contentBlockStop", {"contentBlockIndex": index}))
        stop = "tool_use" if calls else _stop_reason(truncated)
        output = emitted + 10 * len(calls or [])
        uncached = self.input_tokens - self.cache_read - self.cache_write
        usage = {
            "inputTokens": uncached,
            "outputTokens": output,
            "totalTokens": self.input_tokens + output,
            "cacheReadInputTokens": self.cache_read,
            "cacheWriteInputTokens": self.cache_write,
        }
        frames.append(event_frame("messageStop", {"stopReason": stop}))
        frames.append(event_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
        return frames

    def stream_error(self) -> list[bytes]:
        return [event_frame("modelStreamErrorException", {"message": "fake stream error"}, "exception")]

    def message(
        self, text: str, emitted: int, truncated: bool, calls: list[ToolCallOut] | None = None
    ) -> dict[str, Any]:
        """The non-streamed Converse reply: its text only (scripted tool calls are streamed only)."""
        return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}}}

    def error(self, kind: str, retry_after: float) -> ErrorReply:
        code = {"429": "ThrottlingException", "overloaded": "ServiceUnavailableException"}.get(
            kind, "InternalServerException"
        )
        status = {"429": 429, "overloaded": 503}.get(kind, 500)
        return ErrorReply(status, {"message": f"fake {code}"}, {"x-amzn-errortype": code})


__all__ = [
    "AnthropicWire",
    "BedrockWire",
    "ErrorReply",
    "OpenAIWire",
    "ToolCallOut",
    "Wire",
    "event_frame",
    "json_pieces",
    "sse",
]
