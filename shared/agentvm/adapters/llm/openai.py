"""ModelClient for OpenAI Chat Completions and any OpenAI-compatible endpoint (``base_url``).

The ``openai`` SDK is imported in the constructor, not at module level, to keep cold starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.errors import (
    error_for_status,
    retry_after_seconds,
    safe_error_type,
    transport_errors,
)
from agentvm.errors import ProviderUnavailable
from agentvm.llm import ModelStart, ModelStop, TextDelta

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.errors import ProviderError
    from agentvm.llm import ModelEvent, ModelRequest, StopReason

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
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend({"role": turn.role, "content": turn.text} for turn in request.messages)
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
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
        input_tokens = output_tokens = 0
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
                    for choice in chunk.choices:
                        if choice.index != 0:
                            continue
                        if choice.delta is not None and choice.delta.content:
                            yield TextDelta(choice.delta.content)
                        if choice.finish_reason:
                            finish_reason = choice.finish_reason
            except failures as exc:
                raise self._translate(exc) from None
        if finish_reason is None:
            # The SDK ends quietly when the body ends, so a cut stream shows only as a missing reason.
            raise ProviderUnavailable(f"{self._provider}: stream ended without a finish_reason")
        yield ModelStop(
            _FINISH_REASONS.get(finish_reason, "end_turn"),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
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


__all__ = ["OpenAIModelClient"]
