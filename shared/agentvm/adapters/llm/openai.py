"""ModelClient for OpenAI Chat Completions and any OpenAI-compatible endpoint (``base_url``).

The ``openai`` SDK is imported in the constructor, not at module level, to keep cold starts fast.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.errors import (
    error_for_status,
    retry_after_seconds,
    safe_error_type,
    transport_errors,
)
from agentvm.errors import ProviderUnavailable
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

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
}


class OpenAIModelClient:
    """Streams a ModelRequest from a Chat Completions endpoint; SDK retries are off (RetryingModelClient)."""

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        provider_name: str = "openai",
    ) -> None:
        import openai

        self._sdk = openai
        self._provider = provider_name
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for turn in request.messages:
            messages.extend(_messages(turn))
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
        # OpenAI's newer models reject `max_tokens`; compatible servers mostly know only `max_tokens`.
        limit_name = "max_completion_tokens" if self._provider == "openai" else "max_tokens"
        params[limit_name] = request.max_tokens
        failures = (self._sdk.APIError, *transport_errors())
        try:
            stream = await self._client.chat.completions.create(**params)
        except failures as exc:
            raise self._translate(exc) from None
        started = False
        finish_reason: str | None = None
        input_tokens = output_tokens = cached = 0
        calls = _StreamedCalls()
        # `async with` closes the HTTP response however we leave, including aclose() by the caller.
        async with stream:
            try:
                async for chunk in stream:
                    if not started:
                        started = True
                        yield ModelStart(message_id=chunk.id, model=chunk.model)
                    if chunk.usage is not None:
                        input_tokens = chunk.usage.prompt_tokens
                        output_tokens = chunk.usage.completion_tokens
                        details = getattr(chunk.usage, "prompt_tokens_details", None)
                        cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
                    for choice in chunk.choices:
                        if choice.index != 0:
                            continue
                        if choice.delta is not None and choice.delta.content:
                            yield TextDelta(choice.delta.content)
                        for delta in (choice.delta.tool_calls or []) if choice.delta is not None else []:
                            for event in calls.feed(delta):
                                yield event
                        if choice.finish_reason:
                            finish_reason = choice.finish_reason
            except failures as exc:
                raise self._translate(exc) from None
        if finish_reason is None:
            # The SDK ends quietly when the body ends, so a cut stream shows only as a missing reason.
            raise ProviderUnavailable(f"{self._provider}: stream ended without a finish_reason")
        for event in calls.finish():
            yield event
        yield ModelStop(
            _FINISH_REASONS.get(finish_reason, "end_turn"),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=min(cached, input_tokens),  # prompt_tokens includes them
        )

    def _translate(self, exc: Exception) -> ProviderError:
        """The ProviderError for an SDK or transport failure."""
        sdk, provider = self._sdk, self._provider
        if isinstance(exc, sdk.APITimeoutError):
            return ProviderUnavailable(f"{provider}: request timed out")
        if isinstance(exc, (sdk.APIConnectionError, *transport_errors())):
            return ProviderUnavailable(f"{provider}: connection failed ({type(exc).__name__})")
        if isinstance(exc, sdk.APIStatusError):
            error_type = safe_error_type(exc.code) or safe_error_type(exc.type)
            return error_for_status(
                provider, exc.status_code, error_type, retry_after_seconds(exc.response.headers)
            )
        # A plain APIError is an error object inside a 200 stream, or a response the SDK could not use.
        error_type = safe_error_type(getattr(exc, "type", None))
        return ProviderUnavailable(f"{provider}: error in stream ({error_type or type(exc).__name__})")


class _StreamedCalls:
    """Tool calls arrive as deltas keyed by ``index``: the first carries the id and name, the rest
    pieces of the arguments. A call ends when the next index starts, or at the end of the stream."""

    def __init__(self) -> None:
        self._open: dict[str, Any] | None = None

    def feed(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        function = delta.function
        if self._open is None or delta.index != self._open["index"]:
            events += self.finish()
            call_id = delta.id or f"call_{delta.index}"
            name = (function.name if function is not None else None) or ""
            self._open = {"index": delta.index, "id": call_id, "name": name, "json": []}
            events.append(ToolCallStart(call_id, name))
        piece = function.arguments if function is not None else None
        if piece:
            self._open["json"].append(piece)
            events.append(ToolCallDelta(self._open["id"], piece))
        return events

    def finish(self) -> list[ModelEvent]:
        if self._open is None:
            return []
        call, self._open = self._open, None
        arguments, problem = parse_tool_input("".join(call["json"]))
        return [ToolCallEnd(call["id"], call["name"], arguments, input_error=problem)]


def _messages(turn: ChatTurn) -> list[dict[str, Any]]:
    """A conversation turn as Chat Completions messages: tool results are one ``tool`` message each
    (before any text of that turn); an assistant's calls go in its ``tool_calls``."""
    if turn.tool_calls:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.input)}}
            for c in turn.tool_calls
        ]
        return [{"role": "assistant", "content": turn.text or None, "tool_calls": calls}]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": ("Error: " if r.is_error else "") + r.content}
        for r in turn.tool_results
    ]
    if turn.attachments:
        parts: list[dict[str, Any]] = [_attachment(a) for a in turn.attachments]
        if turn.text:
            parts.insert(0, {"type": "text", "text": turn.text})
        out.append({"role": turn.role, "content": parts})
    elif turn.text or not out:
        out.append({"role": turn.role, "content": turn.text})
    return out


def _attachment(a: Attachment) -> dict[str, Any]:
    """Images as ``image_url`` parts, PDFs as ``file`` parts; other files are named, not sent."""
    data_url = a.data if a.is_url else f"data:{a.media_type};base64,{a.data}"
    if a.kind == "image":
        return {"type": "image_url", "image_url": {"url": data_url}}
    if a.media_type == "application/pdf" and not a.is_url:
        return {"type": "file", "file": {"file_data": data_url, "filename": a.name or "document.pdf"}}
    return {"type": "text", "text": a.unsent_note()}


__all__ = ["OpenAIModelClient"]
