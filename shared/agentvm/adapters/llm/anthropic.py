"""ModelClient for the Anthropic Messages API, through the official ``anthropic`` SDK.

The SDK builds, authenticates and sends the request and raises its typed errors for a failed
status; the streamed body is read with the lean SSE reader (``adapters/llm/sse.py``) into our
model events, without the SDK's per-event pydantic models (most of the CPU per token before).

The SDK is imported in the constructor, not at module level: importing it costs hundreds of
milliseconds, and most cold starts never call Anthropic.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.caching import place_breakpoints
from agentvm.adapters.llm.errors import (
    error_for_status,
    retry_after_seconds,
    safe_error_type,
    transport_errors,
)
from agentvm.adapters.llm.sse import SSEReader
from agentvm.agent.pacing import read_pause
from agentvm.errors import ProviderRateLimited, ProviderUnavailable
from agentvm.llm import (
    Attachment,
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
    from agentvm.llm import ChatTurn, ModelEvent, ModelRequest, StopReason, ToolResult

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

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        *,
        http_client: Any = None,
    ) -> None:
        """``http_client``: an ``httpx2.AsyncClient`` for the SDK (``adapters/llm/transport.py``),
        or None for the SDK's own."""
        import anthropic

        self._sdk = anthropic
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0, http_client=http_client
        )

    def warm(self) -> None:
        """Before serving: what the SDK would otherwise resolve during the first requests."""
        from agentvm.adapters.llm.sdk_warmup import warm_sdk_client

        warm_sdk_client(self._client)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params = request_params(request)
        failures: tuple[type[Exception], ...] = (self._sdk.APIError, *transport_errors())
        # The SDK sends the request and raises its typed error for a failed status; the body is
        # read here with the lean SSE reader (adapters/llm/sse.py), not the SDK's event models.
        # `async with` closes the HTTP response however we leave, including aclose() by the
        # caller, so the provider sees the connection go and stops generating.
        try:
            async with self._client.messages.with_streaming_response.create(**params) as response:
                parser = MessageStreamParser()
                async for chunk in response.http_response.aiter_bytes():
                    for event in merged_text(parser.feed(chunk)):
                        yield event
                    if parser.stopped:
                        return
                    await read_pause()  # read again when buffered text is due (agent/pacing.py)
                parser.end()
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
            return error_for_status(
                PROVIDER, exc.status_code, error_type, retry_after_seconds(exc.response.headers)
            )
        return ProviderUnavailable(f"{PROVIDER}: invalid response ({type(exc).__name__})")


class MessageStreamParser:
    """An Anthropic Messages stream's raw body, fed as it arrives, as our model events.

    Reads the few fields each event needs from its JSON (``message_start``: id, model, usage;
    ``content_block_*``: text and tool_use pieces; ``message_delta``: usage, stop reason;
    ``message_stop``; ``error``); pings and unnamed events are skipped, as the SDK skips them.
    Consecutive text deltas of one ``feed`` come out as one ``TextDelta`` counting each (what
    ``llm.merged_text`` would make of them), without an object per token."""

    def __init__(self) -> None:
        self._reader = SSEReader()
        self.input_tokens = self.output_tokens = self.cache_read = self.cache_write = 0
        self.stop_reason: StopReason = "end_turn"
        self._call: dict[str, Any] | None = None  # the tool_use block being streamed
        self.stopped = False  # message_stop was seen: nothing after it counts
        self._failed: ProviderError | None = None  # an error event after events not yet handed out

    def feed(self, chunk: bytes) -> list[ModelEvent]:
        """The events ``chunk`` completes. An error event raises, after the events before it (in
        the same read) were returned: the next ``feed`` or ``end`` raises it."""
        self.end()
        out: list[ModelEvent] = []
        texts: list[str] = []  # consecutive text deltas, handed out as one (llm.merged_text)
        for name, data in self._reader.feed(chunk):
            if self.stopped:
                break
            if name == b"content_block_delta":
                text = _text_delta(data)
                if text is not None:  # the common case, read without parsing the whole event
                    texts.append(text)
                    continue
                delta = _json(data)["delta"]
                kind = delta.get("type")
                if kind == "text_delta":
                    texts.append(delta["text"])
                elif kind == "input_json_delta" and self._call is not None:
                    _flush(texts, out)
                    self._call["json"].append(delta["partial_json"])
                    out.append(ToolCallDelta(self._call["id"], delta["partial_json"]))
            elif name == b"error":
                _flush(texts, out)
                if not out:
                    raise _stream_error(data)
                self._failed = _stream_error(data)
                break
            elif name in _SKIPPED or not name:
                continue
            else:
                _flush(texts, out)
                self._other(name, _json(data), out)
        _flush(texts, out)
        return out

    def end(self) -> None:
        """Raise the error event that ``feed`` kept back, if any."""
        if self._failed is not None:
            raise self._failed

    def _other(self, name: bytes, event: dict[str, Any], out: list[ModelEvent]) -> None:
        if name == b"message_start":
            message = event["message"]
            usage = message.get("usage") or {}
            self.input_tokens = _input_tokens(usage)
            self.output_tokens = usage.get("output_tokens") or 0
            self.cache_read, self.cache_write = _cache_tokens(usage)
            out.append(
                ModelStart(
                    message_id=message["id"],
                    model=message.get("model") or "",
                    input_tokens=self.input_tokens,
                    cache_read_tokens=self.cache_read,
                    cache_write_tokens=self.cache_write,
                )
            )
        elif name == b"content_block_start":
            block = event["content_block"]
            if block.get("type") == "tool_use":
                self._call = {"id": block["id"], "name": block["name"], "json": []}
                out.append(ToolCallStart(block["id"], block["name"]))
        elif name == b"content_block_stop":
            if self._call is not None:
                call, self._call = self._call, None
                arguments, problem = parse_tool_input("".join(call["json"]))
                out.append(ToolCallEnd(call["id"], call["name"], arguments, input_error=problem))
        elif name == b"message_delta":
            usage = event.get("usage") or {}
            self.output_tokens = usage.get("output_tokens") or 0
            if usage.get("input_tokens") is not None:  # cumulative when present
                self.input_tokens = _input_tokens(usage)
                self.cache_read, self.cache_write = _cache_tokens(usage)
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = _STOP_REASONS.get(reason, "end_turn")
        elif name == b"message_stop":
            self.stopped = True
            out.append(
                ModelStop(
                    self.stop_reason,
                    input_tokens=self.input_tokens,
                    output_tokens=self.output_tokens,
                    cache_read_tokens=self.cache_read,
                    cache_write_tokens=self.cache_write,
                )
            )


_SKIPPED = (b"ping",)
_TEXT_DELTA = b'"text_delta"'
_TEXT_COMPACT = b'"text":"'  # the key as the API writes it (no spaces): found without the regex
_TEXT_KEY = re.compile(rb'"text"\s*:\s*"')


def _flush(texts: list[str], out: list[ModelEvent]) -> None:
    """The run of text deltas in ``texts`` as one ``TextDelta`` (counting each) at the end of ``out``."""
    if texts:
        out.append(TextDelta(texts[0] if len(texts) == 1 else "".join(texts), deltas=len(texts)))
        texts.clear()


def _text_delta(data: bytes) -> str | None:
    """The text of a ``text_delta`` event, read straight from its JSON (most events of a stream
    are these, and a whole ``json.loads`` was half of the parser's time): the delta's type and
    then its ``"text"`` string, decoded by the json module's own string scanner. Anything else
    (another delta, another key order) returns None and is parsed whole."""
    at = data.find(_TEXT_DELTA)
    if at < 0:
        return None
    start = data.find(_TEXT_COMPACT, at + len(_TEXT_DELTA))
    if start >= 0:
        start += len(_TEXT_COMPACT)
    else:
        key = _TEXT_KEY.search(data, at + len(_TEXT_DELTA))
        if key is None:
            return None
        start = key.end()
    try:
        text, end = scanstring(data.decode(), start)
    except (UnicodeDecodeError, ValueError):
        return None
    return text


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise ProviderUnavailable(f"{PROVIDER}: invalid response (an event that is not JSON)") from None


def _stream_error(data: bytes) -> ProviderError:
    """An ``event: error`` inside a 200 stream (e.g. ``overloaded_error`` mid-answer)."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    error_type = _error_type(body)
    detail = error_type or "error event"
    if error_type == "rate_limit_error":
        return ProviderRateLimited(f"{PROVIDER}: rate limited in stream ({detail})")
    return ProviderUnavailable(f"{PROVIDER}: error in stream ({detail})")


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The Messages API body of ``request`` (streamed), with its prompt-cache breakpoints
    (``adapters/llm/caching.py``): ``cache_control`` on the last tool, on the system prompt and on
    the last block of the marked messages. With caching on, every message is sent as content
    blocks and the system prompt as a text block, marked or not, so a message's bytes do not
    change when the moving breakpoint leaves it."""
    marks = place_breakpoints(request)
    caching = request.prompt_caching
    messages = [_message(turn, as_blocks=caching) for turn in request.messages]
    for index in marks.messages:
        messages[index]["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": True,
    }
    if request.system:
        if caching:
            stable, rest = request.system_parts
            system: dict[str, Any] = {"type": "text", "text": stable}
            if marks.system:
                system["cache_control"] = dict(_EPHEMERAL)
            params["system"] = [system, {"type": "text", "text": rest}] if rest else [system]
        else:
            params["system"] = request.system
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if marks.tools:
            tools[-1]["cache_control"] = dict(_EPHEMERAL)
        params["tools"] = tools
    return params


_EPHEMERAL = {"type": "ephemeral"}  # the default 5-minute lifetime


def _message(turn: ChatTurn, *, as_blocks: bool = False) -> dict[str, Any]:
    """A conversation turn as an Anthropic message: plain text as a string (unless ``as_blocks``), else
    content blocks (results of the previous tool step, attachments, text; text then tool_use for
    the assistant)."""
    if not (turn.tool_calls or turn.tool_results or turn.attachments):
        if as_blocks:
            return {"role": turn.role, "content": [{"type": "text", "text": turn.text}]}
        return {"role": turn.role, "content": turn.text}
    blocks: list[dict[str, Any]] = [
        {
            "type": "tool_result",
            "tool_use_id": r.call_id,
            "content": _result_content(r),
            "is_error": r.is_error,
        }
        for r in turn.tool_results
    ]
    blocks += [_attachment(a) for a in turn.attachments]
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.input} for c in turn.tool_calls]
    return {"role": turn.role, "content": blocks}


def _result_content(r: ToolResult) -> str | list[dict[str, Any]]:
    """A tool result's content: its text, or, with media, text, image and document blocks in
    order (other media as a note: a tool_result takes no audio)."""
    if not r.blocks:
        return r.content
    out = [_attachment(b) if isinstance(b, Attachment) else {"type": "text", "text": b} for b in r.blocks]
    return [b for b in out if b["type"] != "text" or b["text"]]  # the API refuses empty text blocks


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


def _input_tokens(usage: dict[str, Any]) -> int:
    """All input tokens of a usage object: uncached plus cache writes plus cache reads."""
    parts = (
        usage.get("input_tokens"),
        usage.get("cache_creation_input_tokens"),
        usage.get("cache_read_input_tokens"),
    )
    return sum(part or 0 for part in parts)


def _cache_tokens(usage: dict[str, Any]) -> tuple[int, int]:
    """(read from, written to) the prompt cache: parts of ``_input_tokens``."""
    read = usage.get("cache_read_input_tokens") or 0
    written = usage.get("cache_creation_input_tokens") or 0
    return int(read), int(written)


__all__ = ["AnthropicModelClient", "MessageStreamParser", "request_params"]
