"""ModelClient for the Anthropic Messages API, through the official ``anthropic`` SDK.

The SDK is imported in the constructor, not at module level: importing it costs hundreds of
milliseconds, and most cold starts never call Anthropic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.errors import (
    error_for_status,
    retry_after_seconds,
    safe_error_type,
    transport_errors,
)
from agentvm.errors import ProviderRateLimited, ProviderUnavailable
from agentvm.llm import (
    ModelStart,
    ModelStop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    parse_tool_input,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.errors import ProviderError
    from agentvm.llm import Attachment, ChatTurn, ModelEvent, ModelRequest, StopReason

PROVIDER = "anthropic"

# Anthropic stop reasons without an equivalent in agentvm.llm.StopReason
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "model_context_window_exceeded": "max_tokens",
}


class AnthropicModelClient:
    """Streams a ModelRequest from Anthropic; the SDK's own retries are off (RetryingModelClient)."""

    def __init__(self, api_key: str, base_url: str | None = None, timeout_s: float = 60.0) -> None:
        import anthropic

        self._sdk = anthropic
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [_message(turn) for turn in request.messages],
            "stream": True,
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        failures = (self._sdk.APIError, *transport_errors())
        try:
            stream = await self._client.messages.create(**params)
        except failures as exc:
            raise self._translate(exc) from None
        input_tokens = output_tokens = cache_read = cache_write = 0
        stop_reason: StopReason = "end_turn"
        call: dict[str, Any] | None = None  # the tool_use block being streamed: id, name, json pieces
        # `async with` closes the HTTP response however we leave, including aclose() by the caller,
        # so the provider sees the connection go and stops generating.
        async with stream:
            try:
                async for event in stream:
                    if event.type == "message_start":
                        input_tokens = _input_tokens(event.message.usage)
                        output_tokens = event.message.usage.output_tokens or 0
                        cache_read, cache_write = _cache_tokens(event.message.usage)
                        yield ModelStart(
                            message_id=event.message.id,
                            model=event.message.model,
                            input_tokens=input_tokens,
                            cache_read_tokens=cache_read,
                            cache_write_tokens=cache_write,
                        )
                    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                        yield TextDelta(event.delta.text)
                    elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                        block = event.content_block
                        call = {"id": block.id, "name": block.name, "json": []}
                        yield ToolCallStart(block.id, block.name)
                    elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                        if call is not None:
                            call["json"].append(event.delta.partial_json)
                            yield ToolCallDelta(call["id"], event.delta.partial_json)
                    elif event.type == "content_block_stop" and call is not None:
                        arguments, problem = parse_tool_input("".join(call["json"]))
                        yield ToolCallEnd(call["id"], call["name"], arguments, input_error=problem)
                        call = None
                    elif event.type == "message_delta":
                        output_tokens = event.usage.output_tokens
                        if event.usage.input_tokens is not None:  # cumulative when present
                            input_tokens = _input_tokens(event.usage)
                            cache_read, cache_write = _cache_tokens(event.usage)
                        if event.delta.stop_reason:
                            stop_reason = _STOP_REASONS.get(event.delta.stop_reason, "end_turn")
                    elif event.type == "message_stop":
                        yield ModelStop(
                            stop_reason,
                            input_tokens=input_tokens,
                            output_tokens=output_tokens,
                            cache_read_tokens=cache_read,
                            cache_write_tokens=cache_write,
                        )
                        return
            except failures as exc:
                raise self._translate(exc) from None
        raise ProviderUnavailable(f"{PROVIDER}: stream ended before message_stop")

    def _translate(self, exc: Exception) -> ProviderError:
        """The ProviderError for an SDK or transport failure."""
        sdk = self._sdk
        if isinstance(exc, sdk.APITimeoutError):
            return ProviderUnavailable(f"{PROVIDER}: request timed out")
        if isinstance(exc, (sdk.APIConnectionError, *transport_errors())):
            return ProviderUnavailable(f"{PROVIDER}: connection failed ({type(exc).__name__})")
        if isinstance(exc, sdk.APIStatusError):
            error_type = _error_type(exc.body)
            if exc.status_code < 400:
                # An `event: error` inside a 200 stream (e.g. overloaded_error mid-answer).
                detail = error_type or "error event"
                if error_type == "rate_limit_error":
                    return ProviderRateLimited(f"{PROVIDER}: rate limited in stream ({detail})")
                return ProviderUnavailable(f"{PROVIDER}: error in stream ({detail})")
            return error_for_status(
                PROVIDER, exc.status_code, error_type, retry_after_seconds(exc.response.headers)
            )
        return ProviderUnavailable(f"{PROVIDER}: invalid response ({type(exc).__name__})")


def _message(turn: ChatTurn) -> dict[str, Any]:
    """A conversation turn as an Anthropic message: plain text as a string, else content blocks
    (results of the previous tool step, attachments, text; text then tool_use for the assistant)."""
    if not (turn.tool_calls or turn.tool_results or turn.attachments):
        return {"role": turn.role, "content": turn.text}
    blocks: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
        for r in turn.tool_results
    ]
    blocks += [_attachment(a) for a in turn.attachments]
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.input} for c in turn.tool_calls]
    return {"role": turn.role, "content": blocks}


def _attachment(a: Attachment) -> dict[str, Any]:
    """Images and PDFs as Anthropic blocks; other files are named, not sent."""
    if a.kind == "image":
        source = (
            {"type": "url", "url": a.data}
            if a.is_url
            else {"type": "base64", "media_type": a.media_type, "data": a.data}
        )
        return {"type": "image", "source": source}
    if a.media_type == "application/pdf":
        source = (
            {"type": "url", "url": a.data}
            if a.is_url
            else {"type": "base64", "media_type": a.media_type, "data": a.data}
        )
        return {"type": "document", "source": source}
    return {"type": "text", "text": unsent_note(a)}


def unsent_note(a: Attachment) -> str:
    return (
        f"[attachment {a.name or 'file'} ({a.media_type}) not sent: this model accepts images and PDFs only]"
    )


def _error_type(body: object) -> str | None:
    """``error.type`` of an Anthropic error body, e.g. ``overloaded_error``."""
    error = body.get("error") if isinstance(body, dict) else None
    return safe_error_type(error.get("type")) if isinstance(error, dict) else None


def _input_tokens(usage: Any) -> int:
    """All input tokens of a usage object: uncached plus cache writes plus cache reads."""
    parts = (
        usage.input_tokens,
        getattr(usage, "cache_creation_input_tokens", None),
        getattr(usage, "cache_read_input_tokens", None),
    )
    return sum(part or 0 for part in parts)


def _cache_tokens(usage: Any) -> tuple[int, int]:
    """(read from, written to) the prompt cache: parts of ``_input_tokens``."""
    read = getattr(usage, "cache_read_input_tokens", None) or 0
    written = getattr(usage, "cache_creation_input_tokens", None) or 0
    return int(read), int(written)


__all__ = ["AnthropicModelClient"]
