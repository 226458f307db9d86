"""ModelClient for Amazon Bedrock's Converse API (``converse_stream``) through boto3.

boto3 is blocking, so a daemon thread reads the event stream and hands events to the async
generator through an ``asyncio.Queue``. A daemon thread rather than the loop's default executor:
a read stuck on the network must never hold up ``asyncio.run``'s executor shutdown.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import TYPE_CHECKING, Any

from agentvm.adapters.llm.errors import safe_error_type
from agentvm.errors import ProviderRateLimited, ProviderRejected, ProviderUnavailable
from agentvm.llm import ModelStart, ModelStop, TextDelta

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentvm.llm import ModelEvent, ModelRequest, StopReason

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
        input_tokens = output_tokens = 0
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
                if "contentBlockDelta" in event:
                    text = event["contentBlockDelta"].get("delta", {}).get("text")
                    if text:
                        yield TextDelta(text)
                elif "messageStop" in event:
                    reason = event["messageStop"].get("stopReason", "end_turn")
                    stop_reason = _STOP_REASONS.get(reason, "end_turn")
                elif "metadata" in event:
                    usage = event["metadata"].get("usage", {})
                    input_tokens = usage.get("inputTokens", 0)
                    output_tokens = usage.get("outputTokens", 0)
                elif code := _exception_event_code(event):
                    # What boto3 raises as EventStreamError, a raw stream (or a fake) hands over as an event.
                    raise error_for_code(code)
        finally:
            reader.stop()
        if stop_reason is None:
            raise ProviderUnavailable(f"{PROVIDER}: stream ended before messageStop")
        yield ModelStop(stop_reason, input_tokens=input_tokens, output_tokens=output_tokens)


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


def _converse_params(request: ModelRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "modelId": request.model,
        "messages": [{"role": turn.role, "content": [{"text": turn.text}]} for turn in request.messages],
        "inferenceConfig": {"maxTokens": request.max_tokens},
    }
    if request.system:
        params["system"] = [{"text": request.system}]
    return params


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
