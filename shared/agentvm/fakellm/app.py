"""The fake provider's Starlette app: the model endpoints, paced streaming, and test controls."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentvm.fakellm.embeddings import bedrock_invoke_model, openai_embeddings
from agentvm.fakellm.prompt_cache import CacheUse, TooManyBreakpoints
from agentvm.fakellm.shapes import request_problem
from agentvm.fakellm.state import FakeLLMState, count_words, reply_tokens
from agentvm.fakellm.wire import AnthropicWire, BedrockWire, OpenAIWire, ToolCallOut

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import Message, Receive, Scope, Send

    from agentvm.fakellm.state import FakeLLMConfig, Fault, ScriptedReply
    from agentvm.fakellm.wire import Wire

logger = logging.getLogger("agentvm.fakellm")

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]


class _Reply:
    """One model reply: which tokens to send and how fast, and what the client is told it cost."""

    def __init__(
        self,
        config: FakeLLMConfig,
        body: dict[str, Any],
        max_tokens: object,
        scripted: ScriptedReply | None = None,
        id_prefix: str = "toolu_fake_",
        cache: CacheUse | None = None,
    ) -> None:
        limit = max_tokens if isinstance(max_tokens, int) and max_tokens >= 0 else config.reply_tokens
        self.tokens = reply_tokens(min(config.reply_tokens, limit))
        self.truncated = limit < config.reply_tokens
        self.calls: list[ToolCallOut] = []
        if scripted is not None:
            words = scripted.text.split(" ") if scripted.text else []
            self.tokens = [w if i == 0 else " " + w for i, w in enumerate(words)]
            self.truncated = False
            for i, call in enumerate(scripted.tool_calls):
                arguments = json.dumps(call["input"])
                if i == 0 and scripted.raw_arguments is not None:
                    arguments = scripted.raw_arguments
                self.calls.append(
                    ToolCallOut(
                        call.get("id") or f"{id_prefix}{uuid.uuid4().hex[:20]}", call["name"], arguments
                    )
                )
        self.ttft_s = config.ttft_ms / 1000
        self.interval_s = 1 / config.tokens_per_second
        self.stamp = config.stamp_tokens
        explicit = config.input_tokens
        self.input_tokens = explicit if explicit is not None else _request_words(body)
        # Of the input: read from and written to the prompt cache (never more than there is): the
        # configured numbers, else what the fake's prompt cache priced.
        read, write = config.cache_read_tokens, config.cache_write_tokens
        if not (read or write) and cache is not None:
            read, write = cache.read, cache.write
        self.cache_read = min(read, self.input_tokens)
        self.cache_write = min(write, self.input_tokens - self.cache_read)


def _request_words(body: dict[str, Any]) -> int:
    return max(count_words(body.get("system")) + count_words(body.get("messages")), 1)


class TokenStream:
    """An SSE response that paces tokens, stops when the client goes away, and can fail mid-way.

    A raw ASGI callable rather than StreamingResponse: a ``cut`` must end the connection without
    the final empty chunk, which only returning early (uvicorn then closes the socket) can do.
    """

    def __init__(self, state: FakeLLMState, wire: Wire, reply: _Reply, fault: Fault | None) -> None:
        self._state = state
        self._wire = wire
        self._reply = reply
        self._fault = fault if fault is not None and fault.kind in ("cut", "stream_error", "hang") else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, gone))
        try:
            await self._stream(send, gone)
        finally:
            watcher.cancel()

    async def _stream(self, send: Send, gone: asyncio.Event) -> None:
        wire, reply, fault, state = self._wire, self._reply, self._fault, self._state
        content_type = getattr(wire, "content_type", None)  # Bedrock's event stream; else SSE
        headers = _SSE_HEADERS if content_type is None else [(b"content-type", content_type)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for frame in wire.head():
            await _send_body(send, frame)
        loop = asyncio.get_running_loop()
        first_at = loop.time() + reply.ttft_s
        for index, token in enumerate(reply.tokens):
            if fault is not None and fault.kind == "hang" and index == fault.after_tokens:
                logger.info("fault: stall the stream for %.1fs after %d tokens", fault.duration, index)
                if await _wait_gone(gone, fault.duration):
                    state.count("disconnects")
                    return
                first_at += fault.duration  # then carry on at the configured pace
            elif fault is not None and index == fault.after_tokens:
                break
            # Pace against an absolute schedule, so per-token overhead does not slow the stream.
            if await _pace(gone, first_at + index * reply.interval_s - loop.time(), reply.interval_s):
                state.count("disconnects")
                logger.info("client went away after %d tokens; stopped", index)
                return
            if reply.stamp:  # the emit time rides in the text, so a client can measure added latency
                token = f"{'' if index == 0 else ' '}@{time.time():.6f}"
            await _send_body(send, wire.token(token))
            state.count("tokens_emitted")
        if fault is not None and fault.kind == "cut":
            logger.info("fault: cut the stream after %d tokens", fault.after_tokens)
            return  # no terminal events and no final chunk: uvicorn drops the connection
        if fault is not None and fault.kind == "stream_error":
            for frame in wire.stream_error():
                await _send_body(send, frame)
        else:
            for frame in wire.tail(len(reply.tokens), reply.truncated, reply.calls):
                await _send_body(send, frame)
            state.count("completed")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _hang_until_gone(request: Request, duration_s: float) -> bool:
    """Say nothing for ``duration_s`` (a provider that accepted the request and went quiet).

    Returns early, True, once the client gave up (its timeout closed the connection).
    """
    deadline = asyncio.get_running_loop().time() + duration_s
    while asyncio.get_running_loop().time() < deadline:
        if await request.is_disconnected():
            return True
        await asyncio.sleep(0.02)
    return False


async def _send_body(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


async def _pace(gone: asyncio.Event, delay_s: float, interval_s: float) -> bool:
    """Wait for the next token's time; True if the client went away.

    A gap of up to a few token intervals is a plain sleep (the disconnect is seen at the next
    token): ``_wait_gone``'s ``wait_for`` costs a task per token, which at 35,000 tokens a second
    (the 1,000-stream benchmark) was most of this process's CPU. Longer gaps (the first token's
    delay) still wake up the moment the client goes."""
    if delay_s > max(4 * interval_s, 0.2):
        return await _wait_gone(gone, delay_s)
    await asyncio.sleep(max(delay_s, 0))
    return gone.is_set()


async def _wait_gone(gone: asyncio.Event, delay_s: float) -> bool:
    """Sleep ``delay_s``, waking early if the client goes away; True if it went."""
    if delay_s <= 0:
        await asyncio.sleep(0)  # let the disconnect watcher run even at very high token rates
        return gone.is_set()
    try:
        await asyncio.wait_for(gone.wait(), delay_s)
    except TimeoutError:
        return False
    return True


class _CutResponse:
    """A non-streamed reply that breaks off: half the promised body, then the connection drops."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(self._body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": self._body[: len(self._body) // 2], "more_body": True}
        )


def _cache_use(state: FakeLLMState, config: FakeLLMConfig, body: dict[str, Any], kind: str) -> CacheUse:
    """What the request reads from and writes to the fake's prompt cache (``prompt_cache.py``)."""
    if not config.prompt_cache:
        return CacheUse()
    if kind == "anthropic":
        return state.prompt_cache.anthropic(body, config.cache_min_tokens)
    if kind == "bedrock":
        return state.prompt_cache.bedrock(body, config.cache_min_tokens)
    return state.prompt_cache.openai(body)


async def _model_endpoint(
    request: Request,
    wire_for: Any,
    max_tokens: Any,
    id_prefix: str,
    kind: str = "openai",
    streamed: bool | None = None,
) -> Any:
    state: FakeLLMState = request.app.state.fake
    try:
        body = await request.json()
    except json.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
    if "model_id" in request.path_params:  # Bedrock names the model in the path
        body["modelId"] = request.path_params["model_id"]
    stream = bool(body.get("stream")) if streamed is None else streamed
    config, fault, scripted = state.begin_request(body)
    problem = request_problem(kind, body)
    if problem is not None:  # refused as the real API refuses it (recorded all the same)
        return _refused(kind, problem)
    cache: CacheUse | None = None
    if fault is None or fault.kind not in ("429", "500", "overloaded"):  # a refused request caches nothing
        try:
            cache = _cache_use(state, config, body, kind)
        except TooManyBreakpoints as exc:
            refused = {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}
            return JSONResponse(refused, status_code=400)
    reply = _Reply(config, body, max_tokens(body), scripted, id_prefix, cache)
    state.count("cache_read_tokens", reply.cache_read)
    state.count("cache_write_tokens", reply.cache_write)
    wire: Wire = wire_for(body, reply)
    if fault is not None and fault.kind in ("429", "500", "overloaded"):
        logger.info("fault: %s", fault.kind)
        error = wire.error(fault.kind, fault.retry_after)
        return JSONResponse(error.body, status_code=error.status, headers=error.headers)
    if fault is not None and fault.kind == "hang" and (fault.after_tokens == 0 or not stream):
        logger.info("fault: hang %.1fs before the response headers", fault.duration)
        if await _hang_until_gone(request, fault.duration):
            return JSONResponse({"error": "client gone"}, status_code=499)  # nobody reads it
        fault = None
    if stream:
        return TokenStream(state, wire, reply, fault)
    if fault is not None and fault.kind == "stream_error":  # no stream to put an error event into
        error = wire.error("500", fault.retry_after)
        return JSONResponse(error.body, status_code=error.status, headers=error.headers)
    await asyncio.sleep(reply.ttft_s + len(reply.tokens) * reply.interval_s)
    message = wire.message("".join(reply.tokens), len(reply.tokens), reply.truncated, reply.calls)
    if fault is not None:  # cut
        return _CutResponse(json.dumps(message).encode())
    state.count("tokens_emitted", len(reply.tokens))
    state.count("completed")
    return JSONResponse(message)


def _refused(kind: str, problem: str) -> JSONResponse:
    """A 400 in the provider's own error shape (so its SDK raises its own bad-request error)."""
    if kind == "bedrock":
        return JSONResponse(
            {"message": problem}, status_code=400, headers={"x-amzn-ErrorType": "ValidationException"}
        )
    if kind == "anthropic":
        return JSONResponse(
            {"type": "error", "error": {"type": "invalid_request_error", "message": problem}}, status_code=400
        )
    error = {"message": problem, "type": "invalid_request_error", "param": "messages", "code": None}
    return JSONResponse({"error": error}, status_code=400)


async def anthropic_messages(request: Request) -> Any:
    return await _model_endpoint(
        request,
        lambda body, reply: AnthropicWire(
            str(body.get("model", "fake")), reply.input_tokens, reply.cache_read, reply.cache_write
        ),
        lambda body: body.get("max_tokens"),
        "toolu_fake_",
        "anthropic",
    )


async def openai_chat_completions(request: Request) -> Any:
    def wire_for(body: dict[str, Any], reply: _Reply) -> OpenAIWire:
        options = body.get("stream_options") or {}
        return OpenAIWire(
            str(body.get("model", "fake")),
            reply.input_tokens,
            bool(options.get("include_usage")),
            cached_tokens=reply.cache_read,
        )

    def max_tokens(body: dict[str, Any]) -> object:
        limit = body.get("max_completion_tokens")
        return limit if limit is not None else body.get("max_tokens")

    return await _model_endpoint(request, wire_for, max_tokens, "call_fake_")


async def bedrock_converse_stream(request: Request) -> Any:
    """Bedrock ``ConverseStream`` (boto3 ``converse_stream`` with ``endpoint_url`` at the fake)."""
    model = request.path_params["model_id"]
    return await _model_endpoint(
        request,
        lambda body, reply: BedrockWire(model, reply.input_tokens, reply.cache_read, reply.cache_write),
        lambda body: (body.get("inferenceConfig") or {}).get("maxTokens"),
        "tooluse_fake_",
        "bedrock",
        streamed=True,
    )


async def set_config(request: Request) -> JSONResponse:
    state: FakeLLMState = request.app.state.fake
    try:
        config = state.configure(await request.json())
    except (ValueError, TypeError, AttributeError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse(_config_json(config))


async def add_faults(request: Request) -> JSONResponse:
    state: FakeLLMState = request.app.state.fake
    try:
        payload = await request.json()
        faults = payload.get("faults", []) if isinstance(payload, dict) else payload
        pending = state.add_faults(faults)
    except (ValueError, TypeError, AttributeError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"pending": pending})


async def reset(request: Request) -> JSONResponse:
    state: FakeLLMState = request.app.state.fake
    state.reset()
    return JSONResponse(_config_json(state.config))


async def add_script(request: Request) -> JSONResponse:
    """Queue scripted replies: ``{"replies": [{"text": "...", "tool_calls": [{"name", "input"}]}]}``."""
    state: FakeLLMState = request.app.state.fake
    try:
        payload = await request.json()
        replies = payload.get("replies", []) if isinstance(payload, dict) else payload
        if not isinstance(replies, list):
            raise ValueError("'replies' must be a list")
        pending = state.add_script(replies)
    except (ValueError, TypeError, AttributeError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"pending": pending})


async def requests_received(request: Request) -> JSONResponse:
    state: FakeLLMState = request.app.state.fake
    return JSONResponse(state.requests())


async def stats(request: Request) -> JSONResponse:
    state: FakeLLMState = request.app.state.fake
    return JSONResponse(state.stats())


def _config_json(config: FakeLLMConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def create_app(state: FakeLLMState | None = None) -> Starlette:
    """The ASGI app; ``app.state.fake`` is the FakeLLMState it serves from."""
    app = Starlette(
        routes=[
            Route("/v1/messages", anthropic_messages, methods=["POST"]),
            Route("/v1/chat/completions", openai_chat_completions, methods=["POST"]),
            Route("/chat/completions", openai_chat_completions, methods=["POST"]),
            Route("/model/{model_id:path}/converse-stream", bedrock_converse_stream, methods=["POST"]),
            Route("/v1/embeddings", openai_embeddings, methods=["POST"]),
            Route("/embeddings", openai_embeddings, methods=["POST"]),
            Route("/model/{model_id:path}/invoke", bedrock_invoke_model, methods=["POST"]),
            Route("/_fake/config", set_config, methods=["POST"]),
            Route("/_fake/faults", add_faults, methods=["POST"]),
            Route("/_fake/reset", reset, methods=["POST"]),
            Route("/_fake/stats", stats, methods=["GET"]),
            Route("/_fake/script", add_script, methods=["POST"]),
            Route("/_fake/requests", requests_received, methods=["GET"]),
        ]
    )
    app.state.fake = state or FakeLLMState()
    return app


__all__ = ["TokenStream", "create_app"]
