"""HTTP clients onto the HTTP API Lambda handler, for official SDKs that speak HTTP (the A2A and
Anthropic SDKs): what API Gateway's HTTP API does, without a socket.

``LambdaTransport`` is an httpx transport (sync and async) that turns each request into the API
Gateway payload 2.0 event the HTTP API hands its integration, calls the real handler (Mangum and the
FastAPI app), and turns its answer back into an ``httpx.Response``, whole, as API Gateway sends it
(it cannot stream a Lambda's answer). Invocations run one at a time on one thread with its own event
loop, as one warm Lambda execution environment runs them.

``SqsEventSource`` plays the SQS event source mapping in a thread: it receives the turn jobs from
the moto FIFO queue and hands them to the real turn worker handler as the SQS event Lambda builds,
so a request waiting for its turn (``SendMessage``) sees the worker run it meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx
import httpx2

import agentvm.hosts.aws as aws_hosting
from tests.functions.aws_stack import load_event

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pytest

    from tests.functions.aws_stack import Stack

_loops = threading.local()
_MAIN_LOOP = aws_hosting.event_loop  # the process's one loop, on the test's own thread


def _thread_loop() -> asyncio.AbstractEventLoop:
    """Each thread's one loop (each thread here is one "Lambda"); the test's thread keeps the host's."""
    if threading.current_thread() is threading.main_thread():
        return _MAIN_LOOP()
    loop = getattr(_loops, "loop", None)
    if loop is None:
        loop = _loops.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # Mangum looks the thread's current loop up
    return loop


def one_loop_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_sync`` and Mangum on each thread's own loop: the handlers run on other threads here."""
    monkeypatch.setattr(aws_hosting, "event_loop", _thread_loop)


def apigw_event(request: Any, body: bytes) -> dict[str, Any]:
    """An httpx (or httpx2) request as API Gateway's HTTP API (payload 2.0) hands it to the integration."""
    event = load_event("apigw-http-get-health.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = request.url.path
    event["rawQueryString"] = request.url.query.decode()
    event["requestContext"]["http"]["method"] = request.method
    headers = dict(event["headers"])
    for name, value in request.headers.items():  # repeated headers joined with commas, as API Gateway does
        headers[name.lower()] = value
    headers["content-length"] = str(len(body))
    event["headers"] = headers
    if body:
        event["body"] = base64.b64encode(body).decode()
        event["isBase64Encoded"] = True
    return event


def _answer_parts(answer: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    body = answer.get("body") or ""
    content = base64.b64decode(body) if answer.get("isBase64Encoded") else body.encode()
    headers = list((answer.get("headers") or {}).items())
    headers += [("set-cookie", cookie) for cookie in answer.get("cookies") or []]
    headers = [(k, v) for k, v in headers if k.lower() not in ("content-encoding", "transfer-encoding")]
    return answer["statusCode"], headers, content


class LambdaInvoker:
    """One warm execution environment of a handler: invocations one at a time, on its own thread."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], dict[str, Any]], context: Any) -> None:
        self.handler = handler
        self.context = context
        self.invocations: list[dict[str, Any]] = []  # each event handed to the handler
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="http-api-lambda")

    def _invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        _thread_loop()  # this "Lambda"'s one loop, current on its thread (as event_loop() makes it)
        self.invocations.append(event)
        return self.handler(event, self.context)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        return self._thread.submit(self._invoke, event).result()

    async def invoke_async(self, event: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.wrap_future(self._thread.submit(self._invoke, event))

    def close(self) -> None:
        if not self._thread._shutdown:  # noqa: SLF001 (closed once, whichever client closes it)
            self._thread.submit(_settle).result()
            self._thread.shutdown(wait=True)


def _settle() -> None:
    """What the app left running on this "Lambda"'s loop (the A2A SDK's consumers), to its end:
    a test's environment is not frozen for a next invocation, it goes."""
    loop = _thread_loop()
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


class LambdaTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """httpx requests (the A2A SDK's client) to the HTTP API handler, answered whole."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], dict[str, Any]], context: Any) -> None:
        self.lambda_ = LambdaInvoker(handler, context)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        status, headers, content = _answer_parts(self.lambda_.invoke(apigw_event(request, request.read())))
        return httpx.Response(status, headers=headers, content=content, request=request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        event = apigw_event(request, await request.aread())
        status, headers, content = _answer_parts(await self.lambda_.invoke_async(event))
        return httpx.Response(status, headers=headers, content=content, request=request)

    def close(self) -> None:
        self.lambda_.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.lambda_.close)


class Httpx2LambdaTransport(httpx2.BaseTransport):
    """httpx2 requests (the ``anthropic`` SDK's HTTP client) to the HTTP API handler, answered whole."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], dict[str, Any]], context: Any) -> None:
        self.lambda_ = LambdaInvoker(handler, context)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        status, headers, content = _answer_parts(self.lambda_.invoke(apigw_event(request, request.read())))
        return httpx2.Response(status, headers=headers, content=content, request=request)

    def close(self) -> None:
        self.lambda_.close()


class SqsEventSource:
    """The turn queue's event source mapping: jobs to the worker handler as they arrive."""

    def __init__(self, stack: Stack, queue: tuple[str, str] | None = None, handler: Any = None) -> None:
        self.stack = stack
        # another queue's mapping (url, arn) and its function's handler: default the turn queue's
        self.queue = queue or (stack.resources.queue_url, stack.resources.queue_arn)
        self.handler = handler or stack.worker
        self.delivered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="turn-worker-lambda", daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            sqs, (url, arn) = self.stack.resources.sqs, self.queue
            received = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
            ).get("Messages", [])
            if not received:
                time.sleep(0.02)
                continue
            from agentvm.adapters.aws.sqs_queue import lambda_sqs_event

            event = lambda_sqs_event(received, arn)
            answer = self.handler(event, self.stack.context)
            failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
            for m in received:
                if m["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            self.delivered += len(received)

    def __enter__(self) -> SqsEventSource:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@contextlib.contextmanager
def sqs_event_source(
    stack: Stack, queue: tuple[str, str] | None = None, handler: Any = None
) -> Iterator[SqsEventSource]:
    with SqsEventSource(stack, queue, handler) as source:
        yield source


__all__ = [
    "Httpx2LambdaTransport",
    "LambdaInvoker",
    "LambdaTransport",
    "SqsEventSource",
    "apigw_event",
    "one_loop_per_thread",
    "sqs_event_source",
]
