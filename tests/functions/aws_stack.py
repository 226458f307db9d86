"""The AWS host on moto: the stack's resources and its functions, driven as API Gateway drives them.

``moto_resources`` creates what ``template.yaml`` would (the table, the FIFO turn queue, the server
secret's SecureString) and sets the environment the functions get. ``Stack`` builds each function
from that environment with ``aws_runtime``, as each Lambda builds its own, and plays the
platform: a WebSocket upgrade runs the ``$connect`` authorizer and, when it allows, ``$connect``
with the authorizer's context; frames go to ``$default``; HTTP requests to the HTTP API; turn
jobs are received from the queue and handed to the worker as an SQS event.

Only the test doubles differ from a deployment: the model is scripted, posts are recorded, and
every function runs on the test's clock (security re-attached with the same ``aws_security``
wiring), so key caches, rate-limit minutes and budget days pass instantly.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from moto import mock_aws

from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.aws.sqs_queue import lambda_sqs_event
from agentvm.adapters.llm.scripted import ScriptedModelClient, SingleModelResolver
from agentvm.config import Settings
from agentvm.events import request
from agentvm.hosts.aws import aws_runtime, aws_security, run_sync
from agentvm.runtime import TurnSettings
from functions.http_api import app as http_api
from functions.turn_worker import app as turn_worker
from functions.ws_authorizer import app as ws_authorizer
from functions.ws_connect import app as ws_connect
from functions.ws_default import app as ws_default
from functions.ws_disconnect import app as ws_disconnect
from tests.security_harness import ManualClock

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pytest

    from agentvm.runtime import Runtime

EVENTS = Path(__file__).resolve().parents[2] / "events"
REGION = "us-east-1"
TABLE = "agentvm-functions"
ENDPOINT = "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod"
METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/prod/$connect"
AUTH_SECRET_PARAMETER = "/agentvm/test/auth-secret"
AUTH_SECRET = "functions-test-server-secret-0123456789abcdef"
LOG_GROUP = "/aws/lambda/agentvm-functions"


@dataclasses.dataclass
class Resources:
    sqs: Any
    queue_url: str
    queue_arn: str


def put_auth_secret(value: dict[str, Any] | str, name: str = AUTH_SECRET_PARAMETER) -> None:
    """Write the server secret's SecureString, as an operator does before deploying."""
    text = value if isinstance(value, str) else json.dumps(value)
    ssm = boto3.client("ssm", region_name=REGION)
    ssm.put_parameter(Name=name, Value=text, Type="SecureString", Overwrite=True)


@contextlib.contextmanager
def moto_resources(monkeypatch: pytest.MonkeyPatch) -> Iterator[Resources]:
    """The stack's resources on moto, and the environment template.yaml gives the functions."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        queue_url = sqs.create_queue(QueueName="agentvm-turns.fifo", Attributes={"FifoQueue": "true"})[
            "QueueUrl"
        ]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        dead_letters = sqs.create_queue(QueueName="agentvm-turns-dlq.fifo", Attributes={"FifoQueue": "true"})[
            "QueueUrl"
        ]
        boto3.client("logs", region_name=REGION).create_log_group(logGroupName=LOG_GROUP)
        put_auth_secret({"AVM_AUTH_SECRET": AUTH_SECRET})
        for name, value in {
            "AVM_TABLE_NAME": TABLE,
            "AVM_QUEUE_URL": queue_url,
            "AVM_WS_ENDPOINT": ENDPOINT,
            "AVM_AUTH_SECRET_PARAMETER": AUTH_SECRET_PARAMETER,
            "AVM_LOG_GROUP": LOG_GROUP,  # the functions' one log group (/v1/logs, /v1/metrics)
            "AVM_DEAD_LETTER_QUEUE_URL": dead_letters,
        }.items():
            monkeypatch.setenv(name, value)
        DynamoDbStore(TABLE).create_table(wait=True)
        yield Resources(sqs, queue_url, queue_arn)


def load_event(name: str) -> dict[str, Any]:
    return copy.deepcopy(json.loads((EVENTS / name).read_text()))


def frame(type_: str, request_id: str, **data: Any) -> dict[str, Any]:
    return request(type_, request_id, data, now_ms=0)


class Stack:
    """The six functions, each built by ``aws_runtime`` from the environment, on one test clock."""

    def __init__(
        self,
        resources: Resources,
        context: Any,
        push: Any,
        *,
        model: ScriptedModelClient | None = None,
        clock: ManualClock | None = None,
        turns: TurnSettings | None = None,
    ) -> None:
        self.resources = resources
        self.context = context
        self.push = push
        self.model = model or ScriptedModelClient()
        self.clock = clock or ManualClock()
        # Replaces the host's turn settings whole: the worker polls its turns' cancel marks only
        # when ``turns.cancel_poll_s`` is set (0, the default, is the local host's in-process
        # signal, which never reaches another function), so a test that interrupts sets it.
        self.turns = turns or TurnSettings(flush_s=10.0)
        self.runtimes: dict[str, Runtime] = {}
        self.authorizer = self._handler(ws_authorizer)
        self.ws_connect = self._handler(ws_connect)
        self.ws_default = self._handler(ws_default)
        self.ws_disconnect = self._handler(ws_disconnect)
        self.http_api = self._handler(http_api)
        self.worker = self._handler(turn_worker)

    def _handler(self, app: Any) -> Any:
        settings = Settings()
        rt = aws_runtime(settings, require=app.REQUIRED_SETTINGS)
        assert rt.auth is not None  # every AWS function has an authenticator
        rt = dataclasses.replace(
            rt, clock=self.clock, push=self.push, models=SingleModelResolver(self.model), turns=self.turns
        )
        aws_security(settings, self.clock).attach(rt)  # the same wiring, on the test's clock
        self.runtimes[app.__name__.split(".")[1]] = rt
        return app.build_handler(rt)

    def function(self, app: Any) -> Any:
        """Function ``app``'s handler in a new execution environment (its own runtime, built as the
        others are); its runtime is ``runtimes[<folder>]`` until the next one is built."""
        return self._handler(app)

    def new_key(self, tenant: str, *scopes: str, **kw: Any) -> str:
        """A key created as ``scripts/create_admin_key.py`` does; returns its token."""
        auth = self.runtimes["http_api"].auth
        assert auth is not None
        _, token = run_sync(auth.keys.create(tenant, scopes or ("client",), **kw))
        return token

    # -- the WebSocket API -------------------------------------------------------------------

    def authorize(self, headers: dict[str, str] | None = None, query: dict[str, str] | None = None) -> dict:
        event = load_event("apigw-ws-authorizer.json")
        event["headers"].update(headers or {})
        event["queryStringParameters"] = query or {}
        return self.authorizer(event, self.context)

    def connect(
        self, connection_id: str, headers: dict[str, str] | None = None, query: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A WebSocket upgrade: the authorizer, then (if it allowed) ``$connect``. Returns its answer."""
        answer = self.authorize(headers, query)
        (statement,) = answer["policyDocument"]["Statement"]
        if statement["Effect"] != "Allow":
            return answer  # API Gateway answers 403; $connect never runs
        event = load_event("apigw-ws-connect.json")
        event["requestContext"]["connectionId"] = connection_id
        # What API Gateway hands the integration: the context's values, the principal, a latency.
        authorizer = {
            **answer.get("context", {}),
            "principalId": answer["principalId"],
            "integrationLatency": 9,
        }
        event["requestContext"]["authorizer"] = authorizer
        assert self.ws_connect(event, self.context) == {"statusCode": 200}
        return answer

    def another_ws_default(self) -> Any:
        """A second warm ``$default`` execution environment (its own runtime and in-memory state);
        pass it to ``send(..., handler=)``."""
        runtimes = dict(self.runtimes)
        handler = self._handler(ws_default)
        self.runtimes = runtimes
        return handler

    def send(
        self, connection_id: str, data: dict[str, Any] | str, *, handler: Any = None
    ) -> list[dict[str, Any]]:
        """One frame to ``$default``; returns what was posted to the connection meanwhile."""
        before = len(self.push.frames(connection_id))
        event = load_event("apigw-ws-default-container-create.json")
        event["requestContext"]["connectionId"] = connection_id
        event["body"] = data if isinstance(data, str) else json.dumps(data)
        assert (handler or self.ws_default)(event, self.context) == {"statusCode": 200}
        return self.push.frames(connection_id)[before:]

    def auth_frame(self, connection_id: str, token: str) -> list[dict[str, Any]]:
        return self.send(connection_id, {"type": "auth", "headers": {"Authorization": f"Bearer {token}"}})

    def request(self, connection_id: str, type_: str, request_id: str, **data: Any) -> dict[str, Any]:
        """A ``<type_>_request``; returns its response frame's ``data``."""
        replies = self.send(connection_id, frame(type_, request_id, **data))
        (response,) = [f for f in replies if f["type"] == f"{type_}_response"]
        return response["data"]

    def run_turns(self) -> None:
        """Hand the queued turn jobs to the worker, as the SQS event source mapping does."""
        sqs, url = self.resources.sqs, self.resources.queue_url
        received = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
        if not received:
            return
        event = lambda_sqs_event(received, self.resources.queue_arn)
        assert self.worker(event, self.context) == {"batchItemFailures": []}
        for m in received:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    # -- the HTTP API --------------------------------------------------------------------------

    def http(
        self, method: str, path: str, token: str | None = None, body: dict[str, Any] | None = None
    ) -> tuple[int, Any]:
        response = self.http_raw(method, path, token, body)
        return response["statusCode"], json.loads(response["body"]) if response.get("body") else None

    def http_raw(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request as API Gateway (payload 2.0) delivers it; the HTTP API handler's answer."""
        event = load_event("apigw-http-get-health.json")
        raw_path, _, query = path.partition("?")
        event["rawPath"] = event["requestContext"]["http"]["path"] = raw_path
        event["rawQueryString"] = query
        event["requestContext"]["http"]["method"] = method
        if token is not None:
            event["headers"]["authorization"] = f"Bearer {token}"
        event["headers"].update(headers or {})
        if body is not None:
            event["body"] = json.dumps(body)
            event["headers"]["content-type"] = "application/json"
            event["headers"]["content-length"] = str(len(event["body"]))
        return self.http_api(event, self.context)


__all__ = [
    "AUTH_SECRET",
    "AUTH_SECRET_PARAMETER",
    "ENDPOINT",
    "LOG_GROUP",
    "METHOD_ARN",
    "TABLE",
    "Resources",
    "Stack",
    "frame",
    "lambda_sqs_event",
    "load_event",
    "moto_resources",
    "put_auth_secret",
]
