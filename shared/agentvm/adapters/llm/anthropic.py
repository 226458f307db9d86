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
from agentvm.llm import ModelStart, ModelStop, TextDelta

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.errors import ProviderError
    from agentvm.llm import ModelEvent, ModelRequest, StopReason

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
            "messages": [{"role": turn.role, "content": turn.text} for turn in request.messages],
            "stream": True,
        }
        if request.system:
            params["system"] = request.system
        failures = (self._sdk.APIError, *transport_errors())
        try:
            stream = await self._client.messages.create(**params)
        except failures as exc:
            raise self._translate(exc) from None
        input_tokens = output_tokens = 0
        stop_reason: StopReason = "end_turn"
        # `async with` closes the HTTP response however we leave, including aclose() by the caller,
        # so the provider sees the connection go and stops generating.
        async with stream:
            try:
                async for event in stream:
                    if event.type == "message_start":
                        input_tokens = _input_tokens(event.message.usage)
                        output_tokens = event.message.usage.output_tokens or 0
                        yield ModelStart(
                            message_id=event.message.id, model=event.message.model, input_tokens=input_tokens
                        )
                    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                        yield TextDelta(event.delta.text)
                    elif event.type == "message_delta":
                        output_tokens = event.usage.output_tokens
                        if event.usage.input_tokens is not None:  # cumulative when present
                            input_tokens = _input_tokens(event.usage)
                        if event.delta.stop_reason:
                            stop_reason = _STOP_REASONS.get(event.delta.stop_reason, "end_turn")
                    elif event.type == "message_stop":
                        yield ModelStop(stop_reason, input_tokens=input_tokens, output_tokens=output_tokens)
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


__all__ = ["AnthropicModelClient"]
