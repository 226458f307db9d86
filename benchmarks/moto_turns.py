"""Standard turns through the AWS host's Lambda handlers on moto, every AWS request metered.

The functions of the WebSocket path (``functions.<name>.app.build_handler``) each get the runtime
their Lambda builds (``aws_runtime``: DynamoDB through PynamoDB, SQS FIFO and the API Gateway
management API through boto3), with the model replaced by one that streams the standard turn.

Time is simulated: the handlers run on an event loop whose clock only moves when nothing can run,
and then jumps to the next timer (``VirtualTimeLoop``). The model's token schedule, the sink's
flush windows, cancel polls and subscriber refreshes all keep their real durations, so frame and
request counts are those of real time, exactly and whatever the machine's load; AWS requests (made
in threads) take no simulated time, and a turn costs only the CPU time it needs.

A session is what a client does: the upgrade (the ``$connect`` authorizer, then ``$connect``), one
``image_list`` (and the ``subscribe`` it asks for; the SDK's asks the server to subscribe it, so it
sends none: docs/protocol.md "Server-side subscriptions"), turns, ``$disconnect``. Each turn is a
``message_send`` frame to ``ws_default`` and then what Lambda's SQS event source mapping does:
``ReceiveMessage`` (up to the BatchSize), one ``turn_worker`` invocation with the SQS event Lambda
builds, ``DeleteMessageBatch``. Each session's API key, image (agent running) and history exist
beforehand (``SETUP``: not billed).

``run_scenario`` returns every invocation with its AWS requests (``benchmarks.billing.Call``), its
CPU time (moto's own excluded), its simulated wall time and the bytes it logged;
``benchmarks.cost_meter`` prices them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import dataclasses
import importlib
import io
import itertools
import json
import logging
import math
import os
import secrets
import threading
import time
import uuid
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from benchmarks.billing import WS_UNIT_BYTES, AwsMeter, moto_peek

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from agentvm.llm import ModelEvent, ModelRequest
    from benchmarks.billing import Call, TableSchema

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
# The functions of the WebSocket path, in the order a session meets them (the authorizer runs on
# every upgrade). The HTTP API is not on it.
FUNCTIONS = ("ws_authorizer", "ws_connect", "ws_default", "turn_worker", "ws_disconnect", "sandbox_worker")
TABLE = "agentvm-cost-meter"
ENDPOINT = "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod"
ACCOUNT = "123456789012"  # moto's default account
TURNS_PER_SESSION = 5  # COST_MODEL.md: a session averages 5 turns
# The text of the model's reply and of the users' messages: plain English prose (read from a random
# place, in order), so that what depends on the text (compressed message items: adapters/aws/
# message_bodies.py, ~55-60 % at 1 KB) behaves as it would with real chat. Each ~6 bytes a word.
_PROSE = """
Thanks for the question. The short answer is that the service keeps every conversation in a
small table and streams the reply back over the open socket while the model writes it. When you
send a message, the gateway stores it first, then a worker picks the turn from the queue, reads
the recent history, calls the model and forwards the text in a few larger pieces rather than one
word at a time. That is why the first words arrive almost at once and the rest follows in steady
chunks. If the connection drops in the middle, your client asks again from the last number it
saw and receives exactly what it missed, nothing twice. Tools work the same way: the model asks
for a call, the worker runs it, stores the result and goes on with the answer. Costs stay low
because a worker shares its wait on the model with other conversations, because small events
travel together, and because nothing is written twice. For a typical reply of two hundred tokens
the infrastructure costs a small fraction of a cent, far less than the tokens themselves, and the
bill you see lists exactly what each user consumed. Let me know if you would like the numbers for
your own traffic, or a walk through the settings that trade a little latency for a lower bill.
Most teams start with the defaults, watch the dashboard for a week, and then decide whether the
longer windows suit their users better. Either way, the history, the usage records and the limits
you set keep working without any change on your side.
"""
_WORDS = tuple(_PROSE.split())


@dataclass(frozen=True)
class StandardTurn:
    """COST_MODEL.md's standard turn."""

    input_tokens: int = 500
    output_tokens: int = 200
    ttft_s: float = 0.5
    tokens_per_s: float = 35.0
    history_messages: int = 20
    message_bytes: int = 1024  # each history message, and the user's new message
    # The standard *tool* turn (tool_call=True): the first model call streams ``lead_tokens`` of text
    # and one call of the image's HTTP tool; the tool (a third-party API, stubbed) answers
    # ``tool_result_bytes`` after ``tool_latency_s``; the second call reads the exchange
    # (``second_input_tokens``) and streams the standard answer.
    tool_call: bool = False
    lead_tokens: int = 20
    tool_latency_s: float = 0.3
    tool_result_bytes: int = 500
    second_input_tokens: int = 600
    # The standard *sandbox* turn (sandbox=True): the same two model calls around one ``sh`` job on
    # the container's workspace (``workspace_files`` files of ``workspace_file_bytes``, synced from
    # S3), which runs ``sandbox_job_s`` and changes one file. On AWS the turn suspends on the job:
    # two turn-worker invocations and one sandbox-worker invocation per turn.
    sandbox: bool = False
    sandbox_job_s: float = 1.0
    workspace_files: int = 5
    workspace_file_bytes: int = 4096
    # The client's protocol: "v1" (AgentX 1.x frames) or "v2" (JSON-RPC 2.0: ``image.list``
    # subscribes the caller server-side, ``message.send`` is answered by the worker at the turn's end).
    protocol: str = "v1"
    # Whether the client declared batched frames at the upgrade (``?frames=batch``, as the SDK and
    # the playground do: streaming/batching.py), or takes one frame per message (AgentX clients).
    batch: bool = False
    # The text cadence a batched client asks for (``?cadence=``, streaming/batch_cadence.py): None
    # (the SDK's default: the server's live cadence), "live" or "economy".
    cadence: str | None = None

    @property
    def model_wall_s(self) -> float:
        """How long the model keeps the worker waiting: the first token, then the rest."""
        return self.ttft_s + self.output_tokens / self.tokens_per_s


# -- invocations, and which one a request belongs to ---------------------------------------------
@dataclass
class Invocation:
    function: (
        str  # a folder under functions/, "sqs_poller" (Lambda's poller) or "usage_rollup": requests only
    )
    bucket: str  # "turn": billed per turn; "session": per session (spread over 5 turns)
    turns: int = 0  # turn jobs of a worker invocation
    cpu_s: float = 0.0  # CPU time of the handler, moto's and the meter's excluded
    cpu_outside_s: float = 0.0  # of which before the first and after the last model stream
    simulated_s: float = 0.0  # wall time on the simulated clock (the model's stream, cancel polls...)
    stream_cpu: list[tuple[float, float]] = field(default_factory=list)  # CPU clock at each stream's ends
    log_bytes: int = 0
    inbound_ws_units: float = 0.0  # the client frame that invoked ws_default (inbound messages bill too)
    calls: list[Call] = field(default_factory=list)
    result: Any = None


def template_flush_settings() -> dict[str, int]:
    """The worker's coalescing windows as deployed: template.yaml's FlushMs / FlushMaxMs defaults,
    the batched clients' live cadence (BatchFlushMs / BatchFlushMaxMs) and economy cadence
    (EconomyFlushMs / EconomyFlushMaxMs)."""
    from cfnlint.decode.cfn_yaml import load

    params = load(str(Path(__file__).resolve().parent.parent / "template.yaml"))["Parameters"]
    return {
        "flush_ms": int(params["FlushMs"]["Default"]),
        "flush_max_ms": int(params["FlushMaxMs"]["Default"]),
        "batch_flush_ms": int(params["BatchFlushMs"]["Default"]),
        "batch_flush_max_ms": int(params["BatchFlushMaxMs"]["Default"]),
        "economy_flush_ms": int(params["EconomyFlushMs"]["Default"]),
        "economy_flush_max_ms": int(params["EconomyFlushMaxMs"]["Default"]),
    }


class _TurnTag:
    """Set when a worker resolves a turn's model: ``streaming`` while that model streams."""

    streaming = False


_INVOCATION: ContextVar[Invocation | None] = ContextVar("avm_invocation", default=None)
_TURN: ContextVar[_TurnTag | None] = ContextVar("avm_turn", default=None)
SETUP = Invocation("setup", "none")  # requests that prepare a scenario: not billed


@contextlib.contextmanager
def scope(inv: Invocation) -> Iterator[Invocation]:
    """Requests made inside are ``inv``'s: tasks and ``asyncio.to_thread`` carry context variables."""
    token = _INVOCATION.set(inv)
    try:
        yield inv
    finally:
        _INVOCATION.reset(token)


def _tag() -> tuple[Invocation | None, bool]:
    """A request's tag: its invocation, and whether its turn's model was streaming meanwhile."""
    turn = _TURN.get()
    return _INVOCATION.get(), bool(turn and turn.streaming)


# -- simulated time ------------------------------------------------------------------------------
class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a simulated clock: when no callback is ready and no call is running in a
    thread (``asyncio.to_thread``: every AWS request), the clock jumps to the next timer.

    It reads ``BaseEventLoop``'s ready queue and timer heap (``_ready``, ``_scheduled``), which
    every CPython since 3.4 has, and decides before each ``_run_once``."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        self._in_threads = 0

    def time(self) -> float:
        return self._now

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        future = super().run_in_executor(executor, func, *args)
        self._in_threads += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _: object) -> None:
        self._in_threads -= 1

    def _run_once(self) -> None:
        scheduled = self._scheduled  # type: ignore[attr-defined]  # BaseEventLoop's timer heap
        if not self._ready and scheduled and not self._in_threads:  # type: ignore[attr-defined]
            self._now = max(self._now, scheduled[0].when())
        super()._run_once()  # type: ignore[misc]


class VirtualClock:
    """The runtime's ``Clock`` on the loop's simulated time (wall time starts at the real now)."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._epoch_ms = _now_ms()

    def now_ms(self) -> int:
        return self._epoch_ms + int(self._loop.time() * 1000)

    def monotonic(self) -> float:
        return self._loop.time()


@contextlib.contextmanager
def simulated_time() -> Iterator[VirtualTimeLoop]:
    """Make a ``VirtualTimeLoop`` the process's one loop (``agentvm.hosts.aws.event_loop``), which
    every handler runs its work on (``run_sync``), for the duration."""
    from agentvm.hosts import aws as bootstrap

    policy = asyncio.get_event_loop_policy()
    previous = getattr(getattr(policy, "_local", None), "_loop", None)  # the thread's current loop
    loop = VirtualTimeLoop()
    asyncio.set_event_loop(loop)
    try:
        with mock.patch.object(bootstrap, "_loop", loop):
            yield loop
    finally:
        loop.close()
        asyncio.set_event_loop(previous)


class StandardTurnModel:
    """Token i at ``ttft + i / rate``, the stop at ``ttft + n / rate`` (deadlines on the loop's clock).

    Also the worker's model resolver: ``resolve`` runs in the turn's own task, so the tag it sets
    is carried by every later request of that turn (its sink's posts, its cancel polls, its writes),
    and the stream marks it ``streaming`` meanwhile. Each stream also records, on its invocation,
    the handler's CPU clock when it starts and ends.
    """

    def __init__(self, turn: StandardTurn, cpu_clock: Callable[[], float]) -> None:
        self.turn = turn
        self.cpu_clock = cpu_clock
        self.stream_s: list[float] = []  # each stream's duration on the simulated clock

    def resolve(self, ref: str | None) -> tuple[StandardTurnModel, str, str]:
        _TURN.set(_TurnTag())
        return self, "standard-turn", "scripted/standard-turn"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        from agentvm.llm import ModelStart, ModelStop, TextDelta

        loop, turn = asyncio.get_running_loop(), self.turn
        tag, inv = _TURN.get() or _TurnTag(), _INVOCATION.get()
        start, cpu_start = loop.time(), self.cpu_clock()

        async def until(t: float) -> None:
            await asyncio.sleep(max(0.0, start + t - loop.time()))

        uses_tools = turn.tool_call or turn.sandbox
        asks_tool = uses_tools and not (request.messages and request.messages[-1].tool_results)
        tokens = turn.lead_tokens if asks_tool else turn.output_tokens
        input_tokens = turn.input_tokens if asks_tool or not uses_tools else turn.second_input_tokens
        tag.streaming = True
        try:
            yield ModelStart(message_id=f"msg_std_{uuid.uuid4().hex[:12]}", model=request.model)
            for i in range(tokens):
                await until(turn.ttft_s + i / turn.tokens_per_s)
                yield TextDelta(("" if i == 0 else " ") + _WORDS[i % len(_WORDS)])
            await until(turn.ttft_s + tokens / turn.tokens_per_s)
            if asks_tool:
                from agentvm.llm import ToolCallDelta, ToolCallEnd, ToolCallStart

                call_id = f"toolu_std_{uuid.uuid4().hex[:12]}"
                name, args = (
                    ("sh", {"command": "python3 main.py"})
                    if turn.sandbox
                    else ("get_weather", {"city": "Paris"})
                )
                yield ToolCallStart(call_id, name)
                yield ToolCallDelta(call_id, json.dumps(args))
                yield ToolCallEnd(call_id, name, args)
                yield ModelStop("tool_use", input_tokens=input_tokens, output_tokens=tokens + 15)
            else:
                yield ModelStop("end_turn", input_tokens=input_tokens, output_tokens=tokens)
        finally:
            tag.streaming = False
            self.stream_s.append(loop.time() - start)
            if inv is not None:
                inv.stream_cpu.append((cpu_start, self.cpu_clock()))


# -- metering ------------------------------------------------------------------------------------
class Metering:
    """An ``AwsMeter`` on every botocore session the adapters use, inside ``mock_aws``.

    * boto3's default session (SQS, apigatewaymanagementapi): clients copy their session's event
      emitter when they are created, so its hooks reach every client built after ``active()``.
    * PynamoDB's sessions: PynamoDB makes one per thread (``pynamodb.connection.base.Connection
      .session``, from ``botocore.session.get_session``) and the table's one client from it.
      ``get_session`` is wrapped so its sessions carry the hooks, and the cached model bindings
      (``bind_models``, ``bind_model``) are cleared so the table's client is made under it (and
      again on exit: no metered client outlives the run).

    moto serves a request in the caller's thread: the CPU time it spends, and the hooks', is summed
    in ``excluded_s()``. DynamoDB requests are made atomic, as on DynamoDB (the approach of
    ``tests/contract/conftest.py::atomic_moto``): a worker's turns write from several threads.
    """

    def __init__(self, schema: TableSchema) -> None:
        self.aws = AwsMeter(schema, peek=moto_peek(ACCOUNT), tag=_tag)
        self._moto_s = 0.0
        self._lock = threading.Lock()

    def excluded_s(self) -> float:
        return self._moto_s + self.aws.overhead_s

    @contextlib.contextmanager
    def active(self) -> Iterator[Metering]:
        import boto3
        import pynamodb.connection.base as pynamodb_connection
        from moto import mock_aws
        from moto.core.botocore_stubber import BotocoreStubber
        from moto.dynamodb.responses import DynamoHandler

        from agentvm.adapters.aws.dynamodb import models as dynamodb_models

        def unbind() -> None:
            for binder in vars(dynamodb_models).values():
                if callable(getattr(binder, "cache_clear", None)):
                    binder.cache_clear()

        serve, call_action = BotocoreStubber.__call__, DynamoHandler.call_action
        get_session, ddb_lock = pynamodb_connection.get_session, threading.Lock()

        def timed(stubber: BotocoreStubber, *args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return serve(stubber, *args, **kwargs)
            finally:
                with self._lock:
                    self._moto_s += time.thread_time() - started

        def atomic(handler: DynamoHandler) -> Any:
            with ddb_lock:
                return call_action(handler)

        # The meter's peek reads moto's tables too (and moto inserts a partition on a missing key),
        # so it takes the same lock: a transaction copies the tables, which must not change meanwhile.
        peek = self.aws.peek

        def locked_peek(region: str, table: str, key: Any) -> Any:
            with ddb_lock:
                return peek(region, table, key) if peek is not None else None

        self.aws.peek = locked_peek

        def metered_session() -> Any:
            session = get_session()
            self.aws.attach(session)
            return session

        with (
            mock_aws(),
            mock.patch.object(BotocoreStubber, "__call__", timed),
            mock.patch.object(DynamoHandler, "call_action", atomic),
            mock.patch.object(pynamodb_connection, "get_session", metered_session),
        ):
            unbind()
            boto3.setup_default_session()  # moto gives each mock a fresh default session
            self.aws.attach(boto3.DEFAULT_SESSION.events)
            try:
                yield self
            finally:
                self.aws.detach()
                unbind()


# -- the host: the handlers on moto ---------------------------------------------------------------
@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that Powertools reads."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str = ""
    aws_request_id: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


class _ByteCount(io.TextIOBase):
    """A text stream that counts the UTF-8 bytes written to it and keeps nothing (with
    ``AVM_METER_LOG_DUMP=<file>``, it appends what was written to that file: the lines themselves)."""

    def __init__(self) -> None:
        self.bytes = 0
        self._dump = os.environ.get("AVM_METER_LOG_DUMP")

    def write(self, s: str) -> int:
        self.bytes += len(s.encode())
        if self._dump:
            with open(self._dump, "a", encoding="utf-8") as f:
                f.write(s)
        return len(s)


class _SpyPush:
    """A function's real ``ApiGatewayPush``; what it delivered also lands in the client's inbox
    (moto keeps one byte buffer per connection, not frames)."""

    def __init__(self, inner: Any, inbox: dict[str, list[str]]) -> None:
        self.inner = inner
        self.inbox = inbox

    async def send(self, connection_id: str, payload: str) -> None:
        await self.inner.send(connection_id, payload)
        self.inbox.setdefault(connection_id, []).append(payload)


class Host:
    """The handlers, each with its own runtime, and the clients' view of their sockets."""

    def __init__(
        self,
        memory_mb: dict[str, int],
        batch_size: int,
        standard: StandardTurn,
        meter: Metering,
        loop: VirtualTimeLoop,
    ) -> None:
        import boto3

        from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
        from agentvm.config import Settings
        from agentvm.hosts.aws import prepare_lambda_logger

        self.memory_mb = memory_mb
        self.batch_size = batch_size
        self.meter = meter
        self.loop = loop
        self.model = StandardTurnModel(standard, self.cpu_clock)
        self.standard = standard
        self.inbox: dict[str, list[str]] = {}  # connection -> the messages it received
        self.sent: dict[str, list[str]] = {}  # connection -> the frames it sent
        self.invocations: list[Invocation] = []
        self.runtimes: dict[str, Any] = {}
        self.sqs = boto3.client("sqs")  # Lambda's poller
        self.s3 = boto3.client("s3")
        sandbox: dict[str, str] = {}
        with scope(SETUP):
            self.queue_url = self.sqs.create_queue(
                QueueName="agentvm-turns.fifo",
                Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
            )["QueueUrl"]
            attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
            self.queue_arn = attributes["Attributes"]["QueueArn"]
            DynamoDbStore(TABLE).create_table(wait=True)
            if standard.sandbox:
                self.sandbox_url = self.sqs.create_queue(
                    QueueName="agentvm-sandbox.fifo",
                    Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
                )["QueueUrl"]
                attributes = self.sqs.get_queue_attributes(
                    QueueUrl=self.sandbox_url, AttributeNames=["QueueArn"]
                )
                self.sandbox_arn = attributes["Attributes"]["QueueArn"]
                self.s3.create_bucket(Bucket=WORKSPACE_BUCKET)
                sandbox = {"sandbox_queue_url": self.sandbox_url, "workspace_bucket": WORKSPACE_BUCKET}

        settings = Settings(
            table_name=TABLE,
            queue_url=self.queue_url,
            ws_endpoint=ENDPOINT,
            # In Lambda the server secret is read from this SSM parameter once per execution
            # environment (on its first token check), not per turn; here it is given directly.
            auth_secret_parameter="/agentvm/auth-secret",
            auth_secret=secrets.token_urlsafe(48),
            **template_flush_settings(),
            **sandbox,
        )
        # The billed functions, and a second set to prepare sessions with: their in-process caches
        # (verified API keys) stay cold until a session's own frames warm them.
        self.handlers = self._build(settings)
        self._setup_handlers = self._build(settings)
        self.flush_s = settings.flush_ms / 1000
        self.flush_max_s = settings.flush_max_ms / 1000
        self.logger = importlib.import_module("functions.ws_default.app").logger  # every function's
        self._level = self.logger.log_level
        prepare_lambda_logger(self.logger, settings.log_level)  # what LambdaEntry does in Lambda

    def _build(self, settings: Any) -> dict[str, Callable[[dict[str, Any], Any], Any]]:
        """Each deployed function's handler, on the runtime its Lambda builds, on the simulated clock."""
        from agentvm.hosts.aws import aws_runtime

        handlers = {}
        for name in FUNCTIONS:
            if name not in self.memory_mb:
                continue  # not deployed by this template
            if name == "sandbox_worker" and not self.standard.sandbox:
                continue  # no sandbox job in this turn
            app = importlib.import_module(f"functions.{name}.app")
            rt = aws_runtime(settings, require=app.REQUIRED_SETTINGS)
            push = _SpyPush(rt.push, self.inbox)
            rt = dataclasses.replace(rt, models=self.model, push=push, clock=VirtualClock(self.loop))
            if self.standard.tool_call:
                rt = dataclasses.replace(rt, tools=_stub_tool_sources(self.standard))
            if name == "sandbox_worker":
                from agentvm.adapters.sandbox.s3_workspaces import S3Workspaces

                job_s = self.standard.sandbox_job_s
                handlers[name] = app.build_handler(
                    rt,
                    workspaces=S3Workspaces(WORKSPACE_BUCKET),
                    sandbox_factory=lambda root, job_s=job_s: _TimedSandbox(root, job_s),
                )
            else:
                handlers[name] = app.build_handler(rt)
            usage_writer = getattr(rt.store, "_usage", None)
            if usage_writer is not None:  # records' hours against the same clock, as in Lambda
                usage_writer.clock = rt.clock.now_ms
            self.runtimes.setdefault(name, rt)
        return handlers

    def cpu_clock(self) -> float:
        """CPU time of this process (every thread) less moto's and the meter's own."""
        return time.process_time() - self.meter.excluded_s()

    def close(self) -> None:
        self.logger.setLevel(self._level)

    def setup(self, name: str, event: dict[str, Any]) -> Any:
        """Run a handler to prepare a session: not billed, its logs dropped."""
        with scope(SETUP), self._logs():
            return self._setup_handlers[name](event, LambdaContext(f"agentvm-{name}", self.memory_mb[name]))

    def api_key(self, tenant_id: str) -> str | None:
        """A new ``client`` key of ``tenant_id`` (not billed); None where the host has no auth."""
        from agentvm.hosts.aws import run_sync

        auth = getattr(self.runtimes["ws_default"], "auth", None)
        if auth is None:
            return None
        with scope(SETUP):
            _, token = run_sync(auth.keys.create(tenant_id, ["client"], name="cost meter"))
        return token

    def invoke(self, name: str, event: dict[str, Any], bucket: str, *, turns: int = 0) -> Invocation:
        """One metered invocation of a handler."""
        arn = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:agentvm-{name}"
        context = LambdaContext(f"agentvm-{name}", self.memory_mb[name], arn, str(uuid.uuid4()))
        inv = Invocation(name, bucket, turns)
        started, cpu = self.loop.time(), self.cpu_clock()
        with scope(inv), self._logs() as logged:
            inv.result = self.handlers[name](event, context)
        ended = self.cpu_clock()
        inv.simulated_s, inv.cpu_s, inv.log_bytes = self.loop.time() - started, ended - cpu, logged.bytes
        inv.cpu_outside_s = inv.cpu_s
        if inv.stream_cpu:  # the CPU time spent before the first model stream and after the last
            first, last = min(a for a, _ in inv.stream_cpu), max(b for _, b in inv.stream_cpu)
            inv.cpu_outside_s = (first - cpu) + (ended - last)
        self.invocations.append(inv)
        return inv

    def run_worker(self, expected: int) -> None:
        """One batch of Lambda's SQS event source mapping: receive, invoke the worker, delete.

        The mapping's ReceiveMessage and DeleteMessageBatch are billed SQS requests: modelled by
        making them here, as the mapping would (Lambda's poller is not part of moto)."""
        poller = Invocation("sqs_poller", "turn")
        with scope(poller):
            received = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=self.batch_size,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )["Messages"]
        assert len(received) == expected, f"received {len(received)} turn jobs, expected {expected}"
        from agentvm.adapters.aws.sqs_queue import lambda_sqs_event

        inv = self.invoke("turn_worker", lambda_sqs_event(received, self.queue_arn), "turn", turns=expected)
        assert inv.result == {"batchItemFailures": []}, inv.result
        with scope(poller):
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)]
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)
        self.invocations.append(poller)

    def run_usage_rollup(self) -> None:
        """The scheduled usage rollup (``functions/wait_sweeper``), once every hour of the turns is
        closed: its AWS requests are billed, spread over the turns (``Invocation("usage_rollup")``,
        a function the template does not list apart: its Lambda time is the sweeper's, which runs
        every minute anyway)."""
        from agentvm.adapters.aws.dynamodb.usage import GRACE_MS, DynamoDbUsageRollups
        from agentvm.hosts.aws import run_sync
        from agentvm.observability.periods import HOUR_MS

        now = VirtualClock(self.loop).now_ms()
        closed = now - now % HOUR_MS + HOUR_MS + GRACE_MS
        rollups = DynamoDbUsageRollups(TABLE)
        inv = Invocation("usage_rollup", "turn")
        with scope(inv):
            while run_sync(rollups.roll_closed_hours(closed)).more:
                pass
        self.invocations.append(inv)

    def run_sandbox_jobs(self, expected: int) -> None:
        """The sandbox worker's event source mapping: one job per invocation (``BatchSize: 1``)."""
        from agentvm.adapters.aws.sqs_queue import lambda_sqs_event

        for _ in range(expected):
            poller = Invocation("sqs_poller", "turn")
            with scope(poller):
                received = self.sqs.receive_message(
                    QueueUrl=self.sandbox_url,
                    MaxNumberOfMessages=1,
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                )["Messages"]
            inv = self.invoke("sandbox_worker", lambda_sqs_event(received, self.sandbox_arn), "turn", turns=1)
            assert inv.result == {"batchItemFailures": []}, inv.result
            with scope(poller):
                self.sqs.delete_message(QueueUrl=self.sandbox_url, ReceiptHandle=received[0]["ReceiptHandle"])
            self.invocations.append(poller)

    @contextlib.contextmanager
    def _logs(self) -> Iterator[_ByteCount]:
        """Count what a handler logs: Powertools' lines, the core's ``agentvm.*`` lines (in Lambda
        they go through Powertools' handler: POWERTOOLS_SERVICE_NAME=agentvm makes it their parent)
        and the EMF lines the worker's metrics print."""
        counted = _ByteCount()
        handler = self.logger.registered_handler
        assert isinstance(handler, logging.StreamHandler)
        core = logging.getLogger("agentvm")
        borrowed = handler not in core.handlers  # imported under another service name (tests)
        saved = core.level, core.propagate
        if borrowed:
            core.addHandler(handler)
            core.setLevel(self.logger.log_level)
            core.propagate = False
        previous = handler.setStream(counted)
        try:
            with contextlib.redirect_stdout(counted):
                yield counted
        finally:
            handler.setStream(previous)
            if borrowed:
                core.removeHandler(handler)
                core.level, core.propagate = saved


# -- a client ------------------------------------------------------------------------------------
class Session:
    """One client socket; its frames reach ``ws_default`` as API Gateway delivers them."""

    # ``cost_meter --budgets``: each session's tenant and container have token budgets (set when the
    # session is prepared, not billed); by default the standard turn's tenant has none
    with_budgets = False

    def __init__(self, host: Host, standard: StandardTurn, n: int) -> None:
        self.host = host
        self.standard = standard
        self.container_id = f"user-{n}"
        self.connection_id = base64.b64encode(secrets.token_bytes(11)).decode()  # API Gateway's shape
        self.image: dict[str, Any] = {}
        self.tenant = f"tenant-{n}"
        self.token = host.api_key(self.tenant)  # a server-side client: its key in the upgrade header

    def _event(self, name: str) -> dict[str, Any]:
        event = copy.deepcopy(_event_template(name))
        event["requestContext"]["connectionId"] = self.connection_id
        event["requestContext"]["requestId"] = base64.b64encode(secrets.token_bytes(11)).decode()
        return event

    def send(self, frame: dict[str, Any], bucket: str | None) -> dict[str, Any] | None:
        """Send one frame (``bucket`` None: setup, not billed); returns the response's data (v1), or
        the JSON-RPC result (v2), if any."""
        body = json.dumps(frame)
        event = self._event("apigw-ws-default-container-create.json")
        event["body"] = body
        seen = len(self.host.inbox.get(self.connection_id, []))
        if bucket is None:
            self.host.setup("ws_default", event)
        else:
            self.host.sent.setdefault(self.connection_id, []).append(body)
            inv = self.host.invoke("ws_default", event, bucket)
            inv.inbound_ws_units = math.ceil(len(body.encode()) / WS_UNIT_BYTES)
        replies = [f for p in self.host.inbox.get(self.connection_id, [])[seen:] for f in _frames_of(p)]
        if frame.get("jsonrpc") == "2.0":
            answer = next((r for r in replies if "method" not in r and r.get("id") == frame.get("id")), None)
            return None if answer is None else answer.get("result", answer)
        return next((r["data"] for r in replies if r["type"].endswith("_response")), None)

    def prepare(self) -> None:
        """Not billed: the user's image, its agent running, and the standard turn's history."""
        from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
        from agentvm.hosts.aws import run_sync
        from agentvm.messages import AssistantMessage, TextPart, UserMessage

        self._open(billed=False)
        self.send(_request("container_create", containerId=self.container_id), None)
        config = (
            {"tools": [WEATHER_TOOL]}
            if self.standard.tool_call
            else {"tools": [SANDBOX_TOOL]}
            if self.standard.sandbox
            else {}
        )
        created = self.send(_request("image_create", containerId=self.container_id, config=config), None)
        assert created is not None and "record" in created, created
        self.image = created["record"]
        self.send(_request("image_run", imageId=self.image["imageId"]), None)
        if Session.with_budgets:  # limits no standard turn reaches
            budgets = self.host.runtimes["ws_default"].budgets
            with scope(SETUP):
                run_sync(budgets.set(self.tenant, None, daily_tokens=10**9, monthly_tokens=10**10))
                run_sync(budgets.set(self.tenant, self.container_id, daily_tokens=None, monthly_tokens=10**9))
        store, parent = DynamoDbStore(TABLE), None
        for i in range(self.standard.history_messages):  # user and assistant, in turn
            text, msg_id, now = _text(self.standard.message_bytes), f"msg_h{uuid.uuid4().hex}", _now_ms()
            message: Any = (
                AssistantMessage(id=msg_id, timestamp=now, content=[TextPart(text=text)], parentId=parent)
                if i % 2
                else UserMessage(id=msg_id, timestamp=now, content=text)
            )
            parent = msg_id
            with scope(SETUP):
                run_sync(store.append_message(self.image["sessionId"], message))
        if self.standard.sandbox:  # the container's workspace, as earlier turns left it
            from agentvm.adapters.sandbox.s3_workspaces import S3Workspaces

            prefix = S3Workspaces.prefix(self.tenant, self.container_id)
            with scope(SETUP):
                for i in range(self.standard.workspace_files):
                    body = _text(self.standard.workspace_file_bytes).encode()
                    self.host.s3.put_object(Bucket=WORKSPACE_BUCKET, Key=f"{prefix}file{i}.txt", Body=body)
        self.host.setup("ws_disconnect", self._event("apigw-ws-disconnect.json"))
        self.host.inbox.pop(self.connection_id, None)

    def _open(self, *, billed: bool) -> None:
        """The upgrade: the ``$connect`` authorizer (where deployed), then ``$connect`` with its context."""
        run: Callable[[str, dict[str, Any]], Any] = (
            (lambda name, event: self.host.invoke(name, event, "session").result)
            if billed
            else self.host.setup
        )
        connect = self._event("apigw-ws-connect.json")
        if self.standard.batch:  # what the SDK's upgrade URL carries: ?frames=batch
            connect["queryStringParameters"] = {"frames": "batch"}
            if self.standard.cadence is not None:  # ?cadence=economy (AgentVMClient(cadence=...))
                connect["queryStringParameters"]["cadence"] = self.standard.cadence
        if "ws_authorizer" in self.host.handlers:
            event = self._event("apigw-ws-authorizer.json")
            event["headers"]["Authorization"] = f"Bearer {self.token}"
            answer = run("ws_authorizer", event)
            assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow", answer
            connect["requestContext"]["authorizer"] = {
                **answer.get("context", {}),
                "principalId": answer["principalId"],
            }
        assert run("ws_connect", connect) == {"statusCode": 200}

    def connect(self) -> None:
        self._open(billed=True)
        if self.standard.protocol == "v2":  # image.list subscribes the caller to what it lists
            listed = self.send(_rpc("image.list", containerId=self.container_id), "session")
            assert listed is not None and listed["records"], listed
            return
        from agentvm.events import SUBSCRIBE_KEY, SUBSCRIBED_KEY

        data: dict[str, Any] = {"containerId": self.container_id}
        if self.standard.batch:  # what AgentVMClient.request does: it asks the server to subscribe it
            data[SUBSCRIBE_KEY] = True
        listed = self.send(_request("image_list", **data), "session")
        assert listed is not None and listed["records"], listed
        if listed.get(SUBSCRIBED_KEY) is True:  # subscribed by the server: no frame
            return
        for session_id in listed.get("__subscriptions") or []:  # what AgentX clients do
            self.send({"type": "subscribe", "sessionId": session_id}, "session")

    def message(self) -> None:
        content = _text(self.standard.message_bytes)
        if self.standard.protocol == "v2":  # answered by the worker when the turn ends
            reply = self.send(_rpc("message.send", imageId=self.image["imageId"], content=content), "turn")
            assert reply is None, reply
            return
        reply = self.send(_request("message_send", imageId=self.image["imageId"], content=content), "turn")
        assert reply is not None and "error" not in reply, reply

    def disconnect(self) -> None:
        inv = self.host.invoke("ws_disconnect", self._event("apigw-ws-disconnect.json"), "session")
        assert inv.result == {"statusCode": 200}, inv.result


# The standard tool turn's tool: an HTTP GET to a third-party API (stubbed: it costs no AWS).
WEATHER_TOOL = {
    "type": "http",
    "name": "get_weather",
    "description": "The weather of a city",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "method": "GET",
    "url": "https://api.example.com/weather/{city}",
}


class _StubWeatherApi:
    """The third-party API behind the standard tool turn's HTTP tool: answers after its latency on the
    simulated clock. The real HttpTool, Toolbox, persistence and frames run around it."""

    def __init__(self, standard: StandardTurn) -> None:
        self.standard = standard

    async def request(self, method: str, url: str, **_: Any) -> Any:
        from agentvm.ports import HttpToolResponse

        await asyncio.sleep(self.standard.tool_latency_s)
        return HttpToolResponse(200, "x" * self.standard.tool_result_bytes)


def _stub_tool_sources(standard: StandardTurn) -> Any:
    from agentvm.agent.tools.sources import ToolSources

    # Private networks allowed: the egress check would resolve api.example.com (a DNS lookup, no AWS
    # cost, and no network here).
    return ToolSources(http=_StubWeatherApi(standard), allow_private_networks=True)


# The standard sandbox turn's tools; the job itself is timed (_TimedSandbox), the rest is real.
SANDBOX_TOOL = {"type": "sandbox"}
WORKSPACE_BUCKET = "agentvm-cost-meter-workspaces"


def _timed_sandbox_class() -> type:
    from agentvm.adapters.sandbox.process import LocalSandbox

    class TimedSandbox(LocalSandbox):
        """The real workspace directory; a job that takes ``job_s`` on the simulated clock, prints
        a line and changes one file (so the push writes one object)."""

        def __init__(self, root: Any, job_s: float) -> None:
            super().__init__(root, isolate=False)
            self.job_s = job_s

        async def run(self, tenant_id: str, container_id: str, argv: Any, *, stdin: Any, limits: Any) -> Any:
            from agentvm.ports import SandboxRun

            await asyncio.sleep(self.job_s)
            (self.workspace(tenant_id, container_id) / "out.txt").write_text("42\n")
            return SandboxRun(0, "42\n")

    return TimedSandbox


def _TimedSandbox(root: Any, job_s: float) -> Any:  # noqa: N802 (a class, made on first use)
    return _timed_sandbox_class()(root, job_s)


_EVENTS: dict[str, dict[str, Any]] = {}


def _event_template(name: str) -> dict[str, Any]:
    if name not in _EVENTS:
        _EVENTS[name] = json.loads((EVENTS / name).read_text())
    return _EVENTS[name]


def _request(type_: str, **data: Any) -> dict[str, Any]:
    from agentvm.events import request

    return request(type_, f"req_{uuid.uuid4().hex[:10]}", data, now_ms=_now_ms())


_rpc_ids = itertools.count(1)


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params, "id": next(_rpc_ids)}


def _frames_of(message: str) -> list[Any]:
    """The frames of one message a client received: a batched message is a JSON array of them."""
    decoded = json.loads(message)
    return decoded if isinstance(decoded, list) else [decoded]


def _event_type(frame: Any) -> str:
    """A received frame's type: a v1 frame's, a v2 notification's event's, or a JSON-RPC response."""
    if isinstance(frame, dict) and "type" in frame:
        return str(frame["type"])
    if isinstance(frame, dict) and frame.get("method") == "stream.event":
        return str(frame["params"]["event"]["type"])
    return "rpc_response"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _text(size: int) -> str:
    """About ``size`` bytes of the prose, from a random word on (wrapping around)."""
    out: list[str] = []
    start = secrets.randbelow(len(_WORDS))
    while sum(len(w) + 1 for w in out) < size:
        out.append(_WORDS[(start + len(out)) % len(_WORDS)])
    return " ".join(out)


# -- a scenario ----------------------------------------------------------------------------------
@dataclass
class Scenario:
    name: str
    batch: int  # turn jobs per worker invocation
    turns: int
    sessions: int
    invocations: list[Invocation]
    frames_received: int  # by the clients, through @connections
    messages_received: int  # ... in this many messages (fewer with batched frames)
    frames_sent: int  # by the clients
    frame_types: dict[str, int]  # the frames received, by type
    flush_s: float  # the flush window
    flush_max_s: float  # ... growing up to this
    stream_s: list[float]  # each model stream's duration on the simulated clock
    unattributed_calls: int  # AWS requests made outside any invocation or setup (expect 0)


def run_scenario(
    name: str,
    batch: int,
    turns: int,
    *,
    standard: StandardTurn,
    memory_mb: dict[str, int],
    schema: TableSchema,
    environment: dict[str, str],
) -> Scenario:
    """About ``turns`` standard turns, ``batch`` of them (of as many sessions) per worker invocation.

    Sessions run in cohorts of ``batch``: a cohort connects, then each round every session sends one
    message and one worker invocation runs the round's jobs; at most 5 rounds, then it disconnects.
    """
    for function in FUNCTIONS:  # before the environment below: Powertools reads the service name at import
        if function in memory_mb:
            importlib.import_module(f"functions.{function}.app")
    batch = min(batch, turns)
    rounds = min(TURNS_PER_SESSION, math.ceil(turns / batch))
    cohorts = math.ceil(turns / (batch * rounds))
    meter = Metering(schema)
    environ = {"AWS_DEFAULT_REGION": "us-east-1", **environment}
    with mock.patch.dict(os.environ, environ), meter.active(), simulated_time() as loop:
        host = Host(memory_mb, batch, standard, meter, loop)
        try:
            for cohort in range(cohorts):
                sessions = [Session(host, standard, cohort * batch + i) for i in range(batch)]
                for s in sessions:
                    s.prepare()
                for s in sessions:
                    s.connect()
                for _ in range(rounds):
                    for s in sessions:
                        s.message()
                    host.run_worker(len(sessions))
                    if standard.sandbox:  # the turns suspended on their jobs: run them, then go on
                        host.run_sandbox_jobs(len(sessions))
                        host.run_worker(len(sessions))
                for s in sessions:
                    s.disconnect()
            host.run_usage_rollup()
        finally:
            host.close()
    unattributed = 0
    for call in meter.aws.calls:
        inv = call.tag[0]
        if inv is None:
            unattributed += 1
        elif inv is not SETUP:
            inv.calls.append(call)
    messages = [p for payloads in host.inbox.values() for p in payloads]
    received = [f for p in messages for f in _frames_of(p)]
    return Scenario(
        name=name,
        batch=batch,
        turns=cohorts * batch * rounds,
        sessions=cohorts * batch,
        invocations=host.invocations,
        frames_received=len(received),
        messages_received=len(messages),
        frames_sent=sum(map(len, host.sent.values())),
        frame_types=dict(Counter(_event_type(f) for f in received)),
        flush_s=host.flush_s,
        flush_max_s=host.flush_max_s,
        stream_s=host.model.stream_s,
        unattributed_calls=unattributed,
    )


__all__ = ["FUNCTIONS", "TURNS_PER_SESSION", "Invocation", "Scenario", "StandardTurn", "run_scenario"]
