"""ModelClient for Amazon Bedrock's Converse API (``converse_stream``) through boto3.

boto3 is blocking, so a daemon thread reads the event stream and hands events to the async
generator through an ``asyncio.Queue``. A daemon thread rather than the loop's default executor:
a read stuck on the network must never hold up ``asyncio.run``'s executor shutdown.

Prompt caching: ``cachePoint`` blocks where ``adapters/llm/caching.py`` places breakpoints, for
the Claude models Bedrock caches for; Converse reports ``cacheReadInputTokens`` and
``cacheWriteInputTokens`` beside ``inputTokens``.

Tools map onto Converse's ``toolConfig``, ``toolUse`` and ``toolResult`` blocks. Converse takes
images and PDFs as raw bytes only (no URLs), so anything else a user attached becomes a short
text note telling the model it was not sent.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.caching import bedrock_supports_cache_points, place_breakpoints
from agentvm.adapters.llm.errors import safe_error_type
from agentvm.errors import ProviderRateLimited, ProviderRejected, ProviderUnavailable
from agentvm.llm import (
    Attachment,
    ModelStart,
    ModelStop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    parse_tool_input,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from agentvm.llm import ChatTurn, ModelEvent, ModelRequest, StopReason, ToolResult, ToolSpec

PROVIDER = "bedrock"

_RATE_LIMITED_CODES = frozenset({"ThrottlingException"})
_UNAVAILABLE_CODES = frozenset(
    {
        "InternalServerException",
        "ModelNotReadyException",
        "ModelStreamErrorException",
        "ModelTimeoutException",
        "ServiceUnavailableException",
    }
)
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "model_context_window_exceeded": "max_tokens",
}


class BedrockModelClient:
    """Streams a ModelRequest from Bedrock. ``client`` is a ``bedrock-runtime`` client (or a fake)."""

    def __init__(self, region: str, client: Any = None, *, timeout_s: float = 60.0) -> None:
        if client is None:
            import boto3
            from botocore.config import Config

            # One attempt: RetryingModelClient owns retries, and it must see the first failure.
            config = Config(
                read_timeout=timeout_s,
                connect_timeout=min(timeout_s, 10.0),
                retries={"total_max_attempts": 1, "mode": "standard"},
            )
            client = boto3.client("bedrock-runtime", region_name=region, config=config)
        self._client = client

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        reader = _StreamReader(self._client, _converse_params(request), asyncio.get_running_loop())
        reader.start()
        stop_reason: StopReason | None = None
        input_tokens = output_tokens = cache_read = cache_write = 0
        calls = _ToolCalls()
        try:
            while True:
                kind, payload = await reader.queue.get()
                if kind == "end":
                    break
                if kind == "error":
                    raise translate_error(payload) from None
                if kind == "response":
                    yield ModelStart(message_id=payload, model=request.model)
                    continue
                event: dict[str, Any] = payload
                if "contentBlockStart" in event:
                    for model_event in calls.start(event["contentBlockStart"]):
                        yield model_event
                elif "contentBlockDelta" in event:
                    for model_event in calls.delta(event["contentBlockDelta"]):
                        yield model_event
                elif "contentBlockStop" in event:
                    for model_event in calls.stop(event["contentBlockStop"].get("contentBlockIndex")):
                        yield model_event
                elif "messageStop" in event:
                    for model_event in calls.stop_all():  # a call whose block never saw its stop
                        yield model_event
                    reason = event["messageStop"].get("stopReason", "end_turn")
                    stop_reason = _STOP_REASONS.get(reason, "end_turn")
                elif "metadata" in event:
                    usage = event["metadata"].get("usage", {})
                    # Converse reports cache reads and writes beside (not inside) inputTokens.
                    cache_read = usage.get("cacheReadInputTokens", 0) or 0
                    cache_write = usage.get("cacheWriteInputTokens", 0) or 0
                    input_tokens = usage.get("inputTokens", 0) + cache_read + cache_write
                    output_tokens = usage.get("outputTokens", 0)
                elif code := _exception_event_code(event):
                    # What boto3 raises as EventStreamError, a raw stream (or a fake) hands over as an event.
                    raise error_for_code(code)
        finally:
            reader.stop()
        if stop_reason is None:
            raise ProviderUnavailable(f"{PROVIDER}: stream ended before messageStop")
        yield ModelStop(
            stop_reason,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )


class _StreamReader:
    """Runs ``converse_stream`` in a daemon thread and feeds ("response" | "event" | "error" | "end", x)."""

    def __init__(self, client: Any, params: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._client = client
        self._params = params
        self._loop = loop
        self._stopped = threading.Event()
        self._events: Any = None

    def start(self) -> None:
        threading.Thread(target=self._run, name="bedrock-converse-stream", daemon=True).start()

    def stop(self) -> None:
        """Stop reading; closing the event stream also unblocks a read waiting on the network."""
        self._stopped.set()
        self._close_events()

    def _run(self) -> None:
        try:
            response = self._client.converse_stream(**self._params)
            self._events = response["stream"]
            request_id = response.get("ResponseMetadata", {}).get("RequestId") or uuid.uuid4().hex[:16]
            self._put("response", f"msg_bedrock_{request_id}")
            for event in self._events:
                if self._stopped.is_set():
                    break
                self._put("event", event)
        except Exception as exc:
            self._put("error", exc)
        finally:
            self._put("end", None)
            self._close_events()

    def _put(self, kind: str, payload: Any) -> None:
        if self._stopped.is_set():
            return
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, (kind, payload))
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self._stopped.set()

    def _close_events(self) -> None:
        close = getattr(self._events, "close", None)
        if close is None:
            return
        try:
            close()
        except Exception:  # e.g. a generator already running in the reader thread; it stops by flag
            pass


@dataclass
class _OpenCall:
    id: str
    name: str
    parts: list[str] = field(default_factory=list)


class _ToolCalls:
    """Turns Converse's content-block events into text deltas and tool-call events.

    A ``toolUse`` block is known by its ``contentBlockIndex``: it starts with the call's id and
    name, streams its input as JSON string fragments, and ends with the block's stop.
    """

    def __init__(self) -> None:
        self._open: dict[Any, _OpenCall] = {}

    def start(self, block: dict[str, Any]) -> Iterator[ModelEvent]:
        tool_use = block.get("start", {}).get("toolUse")
        if tool_use:
            yield from self.stop_all()  # calls never interleave, even if a block's stop went missing
            call = _OpenCall(str(tool_use.get("toolUseId", "")), str(tool_use.get("name", "")))
            self._open[block.get("contentBlockIndex")] = call
            yield ToolCallStart(call.id, call.name)

    def delta(self, block: dict[str, Any]) -> Iterator[ModelEvent]:
        delta = block.get("delta", {})
        text = delta.get("text")
        if text:
            yield TextDelta(text)
        tool_use = delta.get("toolUse")
        call = self._open.get(block.get("contentBlockIndex"))
        if tool_use is not None and call is not None:
            fragment = tool_use.get("input", "")
            if not isinstance(fragment, str):  # not what the stream sends, but an object is clear
                fragment = json.dumps(fragment)
            if fragment:
                call.parts.append(fragment)
                yield ToolCallDelta(call.id, fragment)

    def stop(self, index: Any) -> Iterator[ModelEvent]:
        call = self._open.pop(index, None)
        if call is not None:
            arguments, error = parse_tool_input("".join(call.parts))
            yield ToolCallEnd(call.id, call.name, arguments, error)

    def stop_all(self) -> Iterator[ModelEvent]:
        for index in list(self._open):
            yield from self.stop(index)


def _converse_params(request: ModelRequest) -> dict[str, Any]:
    # Converse rejects toolUse/toolResult blocks without a toolConfig: once an image drops its
    # tools, the calls in its history are shown to the model as text instead.
    tools_on = bool(request.tools)
    params: dict[str, Any] = {
        "modelId": request.model,
        "messages": [
            {"role": turn.role, "content": _content(turn, tools_on=tools_on)} for turn in request.messages
        ],
        "inferenceConfig": {"maxTokens": request.max_tokens},
    }
    if request.system:
        params["system"] = [{"text": request.system}]
    if tools_on:
        params["toolConfig"] = {"tools": [_tool(spec) for spec in request.tools]}
    _add_cache_points(params, request)
    return params


_CACHE_POINT = {"cachePoint": {"type": "default"}}  # the default 5-minute lifetime


def _add_cache_points(params: dict[str, Any], request: ModelRequest) -> None:
    """Converse's prompt-cache checkpoints (``adapters/llm/caching.py``): a ``cachePoint`` block
    after the tools, after the system prompt and after the marked messages' content, for the
    models that take them (others refuse the block)."""
    if not bedrock_supports_cache_points(request.model):
        return
    marks = place_breakpoints(request)
    if marks.tools and "toolConfig" in params:
        params["toolConfig"]["tools"].append(dict(_CACHE_POINT))
    if marks.system and "system" in params:
        stable, rest = request.system_parts
        params["system"] = [{"text": stable}, dict(_CACHE_POINT)] + ([{"text": rest}] if rest else [])
    for index in marks.messages:
        params["messages"][index]["content"].append(dict(_CACHE_POINT))


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "toolSpec": {
            "name": spec.name,
            "description": spec.description,
            "inputSchema": {"json": spec.input_schema},
        }
    }


def _content(turn: ChatTurn, *, tools_on: bool) -> list[dict[str, Any]]:
    """A turn's Converse content blocks: tool results first (they answer the previous assistant
    turn), then attachments, then text; an assistant turn's text comes before its tool calls."""
    blocks: list[dict[str, Any]] = []
    notes: list[str] = []
    for result in turn.tool_results:
        if tools_on:
            blocks.append(_tool_result(result))
        else:
            outcome = "error" if result.is_error else "result"
            notes.append(f"[tool {result.name} {outcome}: {result.content}]")
    names: set[str] = set()
    for attachment in turn.attachments:
        block = _attachment(attachment, names)
        if isinstance(block, str):
            notes.append(block)
        else:
            blocks.append(block)
    text = "\n".join([*notes, turn.text] if turn.text else notes)
    calls: list[dict[str, Any]] = []
    for call in turn.tool_calls:
        if tools_on:
            calls.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.input}})
        else:
            text += ("\n" if text else "") + f"[called tool {call.name} with {json.dumps(call.input)}]"
    if text or not (blocks or calls):  # a turn is never sent without content
        blocks.append({"text": text})
    return blocks + calls


def _tool_result(result: ToolResult) -> dict[str, Any]:
    """A ``toolResult`` block: its text, or, with media, text, image and document blocks in order
    (other media as their note: Converse takes no audio in a tool result)."""
    content: list[dict[str, Any]] = []
    names: set[str] = set()
    for block in result.blocks or (result.content,):
        sent = _attachment(block, names) if isinstance(block, Attachment) else block
        if isinstance(sent, str):
            if sent:  # Converse rejects a blank text block
                content.append({"text": sent})
        else:
            content.append(sent)
    return {
        "toolResult": {
            "toolUseId": result.call_id,
            "content": content or [{"text": "(no output)"}],
            "status": "error" if result.is_error else "success",
        }
    }


_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9\-()\[\] ]+")


def _attachment(attachment: Attachment, names: set[str]) -> dict[str, Any] | str:
    """The attachment's Converse block, or the text note that stands in for it."""
    label = _label(attachment)
    image_format = _IMAGE_FORMATS.get(attachment.media_type.lower())
    is_pdf = attachment.media_type.lower() == "application/pdf"
    if not (image_format or is_pdf):
        return f"[attachment {label} not sent: this model accepts images and PDFs only]"
    if attachment.is_url:
        return f"[attachment {label} not sent: this model accepts attached data, not URLs]"
    try:
        data = base64.b64decode(attachment.data, validate=True)
    except (binascii.Error, ValueError):
        return f"[attachment {label} not sent: its data is not valid base64]"
    if image_format:
        return {"image": {"format": image_format, "source": {"bytes": data}}}
    name = _document_name(attachment, names)
    return {"document": {"format": "pdf", "name": name, "source": {"bytes": data}}}


def _label(attachment: Attachment) -> str:
    """How a note names an attachment: its name if it has one (never a URL: it may be signed)."""
    if attachment.name:
        return f"{attachment.name!r} ({attachment.media_type})"
    return f"({attachment.media_type})"


def _document_name(attachment: Attachment, taken: set[str]) -> str:
    """A document name Converse accepts, unique in the message.

    Converse allows only letters, digits, single spaces, hyphens, parentheses and square brackets
    (so no extension), and the name is shown to the model, so it is also kept short.
    """
    stem = (attachment.name or "document").rsplit(".", 1)[0]
    name = " ".join(_UNSAFE_NAME_CHARS.sub(" ", stem).split())[:100] or "document"
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name} ({n})", n + 1
    taken.add(unique)
    return unique


def _exception_event_code(event: dict[str, Any]) -> str | None:
    """``{"throttlingException": {...}}`` -> ``ThrottlingException``."""
    for key in event:
        if key.endswith("Exception"):
            return key[:1].upper() + key[1:]
    return None


def error_for_code(code: str) -> ProviderRateLimited | ProviderUnavailable | ProviderRejected:
    """Map a Bedrock error code (``ThrottlingException``...) to a ProviderError."""
    code = safe_error_type(code) or "UnknownError"
    if code in _RATE_LIMITED_CODES:
        return ProviderRateLimited(f"{PROVIDER}: rate limited ({code})")
    if code in _UNAVAILABLE_CODES:
        return ProviderUnavailable(f"{PROVIDER}: unavailable ({code})")
    return ProviderRejected(f"{PROVIDER}: request rejected ({code})")


def translate_error(exc: Exception) -> Exception:
    """A ProviderError for a botocore failure; any other exception is returned unchanged (a bug)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and isinstance(response.get("Error"), dict):  # ClientError
        return error_for_code(str(response["Error"].get("Code", "")))
    from botocore import exceptions as boto_errors

    if isinstance(exc, boto_errors.HTTPClientError | boto_errors.ConnectionError):
        return ProviderUnavailable(f"{PROVIDER}: connection failed ({type(exc).__name__})")
    if isinstance(exc, boto_errors.BotoCoreError):
        return ProviderRejected(f"{PROVIDER}: client error ({type(exc).__name__})")
    return exc


__all__ = ["BedrockModelClient", "error_for_code", "translate_error"]
