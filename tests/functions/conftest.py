"""Fixtures for the Lambda handler tests: sample events, a Lambda context, a local runtime.

Handlers are sync (Lambda calls them so): tests here are plain ``def`` tests, and the handlers run
their async work on ``agentvm.hosts.aws``'s one event loop, exactly as on Lambda.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from moto import mock_aws

from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.adapters.local.memory_connections import InMemoryConnections
from agentvm.adapters.local.sqlite.queue import SqliteTurnQueue
from agentvm.adapters.local.sqlite.store import SqliteStore
from agentvm.errors import ConnectionGone
from agentvm.hosts.aws import run_sync
from agentvm.observability.metrics import NoMetrics
from agentvm.observability.running import TurnProgress
from agentvm.ports import ConnectionInfo
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.cancel_poll import CancelPoll

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.functions.aws_host import AwsHost

# EMF needs a namespace (template.yaml sets it on the worker). The service name stays Powertools'
# default here: "agentvm" would make the Powertools logger the parent of the core's loggers for
# the whole test session.
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "AgentVMTest")

EVENTS = Path(__file__).resolve().parents[2] / "events"


@pytest.fixture(autouse=True)
def _atomic_dynamodb() -> Iterator[None]:
    """moto's DynamoDB requests one at a time, as each is atomic on DynamoDB (the idea of
    ``tests/contract/moto_table.atomic_moto``, for every mock of these tests): a transaction (usage
    records with their sums) copies moto's tables for its rollback, and a worker's other turns
    must not write them meanwhile."""
    import threading
    from unittest import mock

    from moto.dynamodb.responses import DynamoHandler

    lock = threading.Lock()
    call_action = DynamoHandler.call_action

    def atomic(handler: DynamoHandler) -> object:
        with lock:
            return call_action(handler)

    with mock.patch.object(DynamoHandler, "call_action", atomic):
        yield


@dataclass
class FakeLambdaContext:
    """The attributes of Lambda's context object that Powertools reads."""

    function_name: str = "agentvm-test-function"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:agentvm-test-function"
    aws_request_id: str = "5b0a4c1e-8f3d-4a6b-9c2e-1d7f6e5a4b3c"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class RecordingPush:
    """The Push port as a test double: keeps every post; ``gone`` ids answer like a 410."""

    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gone: set[str] = field(default_factory=set)

    async def send(self, connection_id: str, payload: str) -> None:
        if connection_id in self.gone:
            raise ConnectionGone(f"connection {connection_id} is gone")
        self.posts.append((connection_id, json.loads(payload)))

    def frames(self, connection_id: str) -> list[dict[str, Any]]:
        return [frame for conn, frame in self.posts if conn == connection_id]


@pytest.fixture
def load_event() -> Callable[[str], dict[str, Any]]:
    """A fresh copy of ``events/<name>``."""

    def load(name: str) -> dict[str, Any]:
        return copy.deepcopy(json.loads((EVENTS / name).read_text()))

    return load


@pytest.fixture
def context() -> FakeLambdaContext:
    return FakeLambdaContext()


@pytest.fixture
def model() -> ScriptedModelClient:
    return ScriptedModelClient()


# the connection ``host`` has open
CONN = "conn-alice"


@pytest.fixture
def host(model: ScriptedModelClient) -> Iterator[AwsHost]:
    """The AWS host on moto (``tests/functions/aws_host.py``), with ``CONN`` connected; a test file
    may define its own."""
    from tests.functions.aws_host import aws_host  # it imports this module's helpers

    with mock_aws():
        host = next(aws_host(SingleModelResolver(model)))
        host.connect(CONN)
        yield host


@pytest.fixture
def push() -> RecordingPush:
    return RecordingPush()


@pytest.fixture
def rt(tmp_path: Path, model: ScriptedModelClient, push: RecordingPush) -> Iterator[Runtime]:
    """The local adapters (SQLite store and queue, in-memory connections) and a recording push."""
    store = SqliteStore(":memory:")
    queue = SqliteTurnQueue(tmp_path / "queue.db")
    yield Runtime(
        store=store,
        queue=queue,
        connections=InMemoryConnections(),
        push=push,
        models=SingleModelResolver(model),
        turns=TurnSettings(flush_s=10.0),  # deltas after the first coalesce until the turn ends
        cancel_poll=CancelPoll(),
        progress=TurnProgress(),
        metrics=NoMetrics(),
    )
    queue.close()
    store.close()


@pytest.fixture
def connect(rt: Runtime) -> Callable[..., str]:
    """Register a connection as ``$connect`` would; returns its id."""

    def register(connection_id: str, tenant_id: str = "default") -> str:
        run_sync(rt.connections.register(ConnectionInfo(connection_id, tenant_id, rt.clock.now_ms())))
        return connection_id

    return register


@pytest.fixture
def powertools_logs() -> Iterator[io.StringIO]:
    """What the handlers' Powertools logger writes (it holds its stream from import time)."""
    from aws_lambda_powertools import Logger

    handler = Logger().registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture
def parse_json_lines() -> Callable[[str], list[dict[str, Any]]]:
    return json_lines


TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    """template.yaml, with CloudFormation's short tags (!Ref, !Sub...) read as their long form."""
    from cfnlint.decode.cfn_yaml import load

    return load(str(TEMPLATE))


@pytest.fixture(scope="session")
def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's functions by their folder under functions/ (``ws_connect``...)."""
    out = {}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            out[Path(resource["Properties"]["CodeUri"]).name] = resource
    return out
