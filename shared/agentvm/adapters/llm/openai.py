"""ModelClient for OpenAI Chat Completions and any OpenAI-compatible endpoint (``base_url``).

The SDK builds, authenticates and sends the request and raises its typed errors for a failed
status; the streamed body is read with the lean SSE reader (``adapters/llm/sse.py``) into our
model events, without the SDK's per-chunk pydantic models (most of the CPU per token before).

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
from agentvm.adapters.llm.sse import SSEReader
from agentvm.agent.pacing import read_pause
from agentvm.errors import ProviderUnavailable
from agentvm.llm import (
    ModelStart,
    ModelStop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    merged_text,
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
        *,
        http_client: Any = None,
    ) -> None:
        """``http_client``: an ``httpx2.AsyncClient`` for the SDK (``adapters/llm/transport.py``),
        or None for the SDK's own."""
        import openai

        self._sdk = openai
        self._provider = provider_name
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0, http_client=http_client
        )

    def warm(self) -> None:
        """Before serving: what the SDK would otherwise resolve during the first requests."""
        from agentvm.adapters.llm.sdk_warmup import warm_sdk_client

        warm_sdk_client(self._client)

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
        if request.cache_key and request.prompt_caching and self._provider == "openai":
            # OpenAI caches stable prefixes by itself; the key keeps one conversation's requests
            # on the same cache (its usage reports prompt_tokens_details.cached_tokens). Not sent to
            # compatible servers: some refuse a field they do not know.
            params["prompt_cache_key"] = request.cache_key
        # OpenAI's newer models reject `max_tokens`; compatible servers mostly know only `max_tokens`.
        limit_name = "max_completion_tokens" if self._provider == "openai" else "max_tokens"
        params[limit_name] = request.max_tokens
        failures: tuple[type[Exception], ...] = (self._sdk.APIError, *transport_errors())
        # The SDK sends the request and raises its typed error for a failed status; the body is
        # read here with the lean SSE reader (adapters/llm/sse.py), not the SDK's chunk models.
        # `async with` closes the HTTP response however we leave, including aclose() by the caller.
        parser = ChunkStreamParser(self._provider)
        try:
            async with self._client.chat.completions.with_streaming_response.create(**params) as response:
                async for chunk in response.http_response.aiter_bytes():
                    for event in merged_text(parser.feed(chunk)):
                        yield event
                    await read_pause()  # read again when buffered text is due (agent/pacing.py)
        except failures as exc:
            raise self._translate(exc) from None
        for event in parser.finish():
            yield event

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


class ChunkStreamParser:
    """A Chat Completions stream's raw body, fed as it arrives, as our model events.

    Reads the few fields it needs from each chunk's JSON (id, model, usage, choice 0's content,
    tool call pieces and finish reason); ``data: [DONE]`` ends it; a chunk carrying ``error`` is
    an error inside the 200 stream, as the SDK reads it."""

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._reader = SSEReader()
        self._started = False
        self._done = False
        self.finish_reason: str | None = None
        self.input_tokens = self.output_tokens = self.cached = 0
        self._calls = _StreamedCalls()
        self._failed: ProviderError | None = None  # an error chunk after events not yet handed out

    def feed(self, chunk: bytes) -> list[ModelEvent]:
        """The events ``chunk`` completes. An error chunk raises, after the events before it (in
        the same read) were returned: the next ``feed`` or ``finish`` raises it."""
        if self._failed is not None:
            raise self._failed
        out: list[ModelEvent] = []
        for _name, data in self._reader.feed(chunk):
            if self._done or data.startswith(b"[DONE]"):
                self._done = True  # the rest of the body is read (and ignored): the connection is reused
                continue
            try:
                event = json.loads(data)
            except ValueError:
                raise ProviderUnavailable(
                    f"{self._provider}: invalid response (a chunk that is not JSON)"
                ) from None
            if not isinstance(event, dict):
                continue
            if event.get("error"):
                if not out:
                    raise self._stream_error(event["error"])
                self._failed = self._stream_error(event["error"])
                break
            if not self._started:
                self._started = True
                out.append(ModelStart(message_id=event.get("id") or "", model=event.get("model") or ""))
            usage = event.get("usage")
            if usage:
                self.input_tokens = usage.get("prompt_tokens") or 0
                self.output_tokens = usage.get("completion_tokens") or 0
                details = usage.get("prompt_tokens_details")
                self.cached = (details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
            for choice in event.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta")
                if delta:
                    content = delta.get("content")
                    if content:
                        out.append(TextDelta(content))
                    for piece in delta.get("tool_calls") or ():
                        out.extend(self._calls.feed(piece))
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
        return out

    def finish(self) -> list[ModelEvent]:
        """After the body ended: the last tool call and the stop (or the error of a cut stream)."""
        if self._failed is not None:
            raise self._failed
        if self.finish_reason is None:
            # A stream cut short shows only as a missing reason (the body may end cleanly).
            raise ProviderUnavailable(f"{self._provider}: stream ended without a finish_reason")
        return [
            *self._calls.finish(),
            ModelStop(
                _FINISH_REASONS.get(self.finish_reason, "end_turn"),
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cache_read_tokens=min(self.cached, self.input_tokens),  # prompt_tokens includes them
            ),
        ]

    def _stream_error(self, error: object) -> ProviderError:
        """An error object inside a 200 stream."""
        error_type = safe_error_type(error.get("type")) if isinstance(error, dict) else None
        return ProviderUnavailable(f"{self._provider}: error in stream ({error_type or 'APIError'})")


class _StreamedCalls:
    """Tool calls arrive as deltas keyed by ``index``: the first carries the id and name, the rest
    pieces of the arguments. A call ends when the next index starts, or at the end of the stream."""

    def __init__(self) -> None:
        self._open: dict[str, Any] | None = None

    def feed(self, delta: dict[str, Any]) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        function = delta.get("function") or {}
        index = delta.get("index", 0)
        if self._open is None or index != self._open["index"]:
            events += self.finish()
            call_id = delta.get("id") or f"call_{index}"
            name = function.get("name") or ""
            self._open = {"index": index, "id": call_id, "name": name, "json": []}
            events.append(ToolCallStart(call_id, name))
        piece = function.get("arguments")
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
    media = _tool_media(turn)  # a tool message takes text only: its images follow as a user message
    if turn.attachments or media:
        parts: list[dict[str, Any]] = media + [_attachment(a) for a in turn.attachments]
        if turn.text:
            parts.insert(len(media), {"type": "text", "text": turn.text})
        out.append({"role": turn.role, "content": parts})
    elif turn.text or not out:
        out.append({"role": turn.role, "content": turn.text})
    return out


def _tool_media(turn: ChatTurn) -> list[dict[str, Any]]:
    """The images and PDFs of a turn's tool results, as the parts of the user message that follows
    its ``tool`` messages (Chat Completions takes no image in a tool message), each result's after
    a line naming its call. Other media stay placeholders in the tool message's text."""
    parts: list[dict[str, Any]] = []
    for r in turn.tool_results:
        sent = [_attachment(a) for a in r.media if a.kind == "image" or a.media_type == "application/pdf"]
        if sent:
            note = f"[the media of {r.name}'s result (call {r.call_id}), shown as placeholders there]"
            parts += [{"type": "text", "text": note}, *sent]
    return parts


def _attachment(a: Attachment) -> dict[str, Any]:
    """Images as ``image_url`` parts, PDFs as ``file`` parts; other files are named, not sent."""
    data_url = a.data if a.is_url else f"data:{a.media_type};base64,{a.data}"
    if a.kind == "image":
        return {"type": "image_url", "image_url": {"url": data_url}}
    if a.media_type == "application/pdf" and not a.is_url:
        return {"type": "file", "file": {"file_data": data_url, "filename": a.name or "document.pdf"}}
    return {"type": "text", "text": a.unsent_note()}


__all__ = ["ChunkStreamParser", "OpenAIModelClient"]
