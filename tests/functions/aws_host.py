"""The AWS host on moto, for the turn-reliability tests: the real ``ws_default`` and ``turn_worker``
handlers over the AWS adapters (DynamoDB store and connections, SQS FIFO queue, API Gateway push).

Runtimes are wired here from the adapters (as ``aws_runtime`` does, minus authentication: a
connection's tenant is what the test registers), one per "function", so the gateway and the worker
share nothing in memory, as two Lambdas would not. Turn jobs are received from the moto queue and
handed to the worker as the SQS event Lambda builds; a test decides whether to delete them (an
acknowledged batch) or to hand the same records over again (a redelivery).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from agentvm.adapters.aws.apigw_push import ApiGatewayPush
from agentvm.adapters.aws.dynamodb.connections import DynamoDbConnections
from agentvm.adapters.aws.dynamodb.store import DynamoDbStore
from agentvm.adapters.aws.dynamodb.waits import DynamoDbToolWaits
from agentvm.adapters.aws.sqs_queue import SqsTurnQueue, lambda_sqs_event
from agentvm.hosts.aws import run_sync
from agentvm.observability.metrics import NoMetrics
from agentvm.observability.running import TurnProgress
from agentvm.ports import ConnectionInfo
from agentvm.runtime import Runtime, TurnSettings
from agentvm.turns.cancel_poll import CancelPoll
from functions.turn_worker import app as turn_worker
from functions.ws_default import app as ws_default
from tests.functions.aws_stack import frame

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from agentvm.ports import ModelResolver

EVENTS = Path(__file__).resolve().parents[2] / "events"
TABLE = "agentvm-reliability"
ENDPOINT = "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod"
TURNS = TurnSettings(flush_s=0.01, cancel_poll_s=0.02)


class GoneAwareClient:
    """The boto3 ``apigatewaymanagementapi`` client on moto, but connections in ``gone`` answer 410.

    moto accepts a post to any connection id; API Gateway answers ``GoneException`` for a closed one.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gone: set[str] = set()
        self.exceptions = inner.exceptions

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> Any:  # noqa: N803 (boto3 names)
        if ConnectionId in self.gone:
            error = {
                "Error": {"Code": "GoneException", "Message": ""},
                "ResponseMetadata": {"HTTPStatusCode": 410},
            }
            raise self.inner.exceptions.GoneException(error, "PostToConnection")
        return self.inner.post_to_connection(ConnectionId=ConnectionId, Data=Data)


class RecordingPush:
    """The real ``ApiGatewayPush``; each frame it delivered is recorded (a gone one propagates)."""

    def __init__(self, inner: ApiGatewayPush, log: list[tuple[str, dict[str, Any]]]) -> None:
        self.inner = inner
        self.log = log

    async def send(self, connection_id: str, payload: str) -> None:
        await self.inner.send(connection_id, payload)
        self.log.append((connection_id, json.loads(payload)))


@dataclass
class AwsHost:
    sqs: Any
    queue_url: str
    queue_arn: str
    models: ModelResolver
    turns: TurnSettings = TURNS
    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gone_client: GoneAwareClient | None = None
    _request_ids: int = 0

    # -- wiring: one runtime per function ------------------------------------------------------

    def runtime(self, **overrides: Any) -> Runtime:
        if self.gone_client is None:
            self.gone_client = GoneAwareClient(boto3.client("apigatewaymanagementapi", endpoint_url=ENDPOINT))
        rt = Runtime(
            store=DynamoDbStore(TABLE),
            queue=SqsTurnQueue(self.queue_url, client=self.sqs),
            connections=DynamoDbConnections(TABLE),
            push=RecordingPush(ApiGatewayPush(ENDPOINT, client=self.gone_client), self.posts),
            models=self.models,
            turns=self.turns,
            waits=DynamoDbToolWaits(TABLE),
            cancel_poll=CancelPoll(),
            progress=TurnProgress(),
            metrics=NoMetrics(),
        )
        for name, value in overrides.items():
            setattr(rt, name, value)
        return rt

    def default(self, rt: Runtime | None = None) -> Callable[[dict[str, Any], Any], Any]:
        return ws_default.build_handler(rt or self.runtime())

    def worker(self, rt: Runtime | None = None) -> Callable[[dict[str, Any], Any], Any]:
        return turn_worker.build_handler(rt or self.runtime())

    # -- the client side -------------------------------------------------------------------------

    def connect(
        self, connection_id: str, tenant: str = "default", *, batch: bool = False, cadence: str | None = None
    ) -> str:
        connections = DynamoDbConnections(TABLE)
        info = ConnectionInfo(connection_id, tenant, 0, batch=batch, cadence=cadence)
        run_sync(connections.register(info))
        return connection_id

    def event(self, connection_id: str, body: dict[str, Any] | str) -> dict[str, Any]:
        event = copy.deepcopy(json.loads((EVENTS / "apigw-ws-default-container-create.json").read_text()))
        event["requestContext"]["connectionId"] = connection_id
        event["body"] = body if isinstance(body, str) else json.dumps(body)
        return event

    def send(self, connection_id: str, body: dict[str, Any] | str, handler: Any = None) -> None:
        from tests.functions.conftest import FakeLambdaContext

        handler = handler or self.default()
        assert handler(self.event(connection_id, body), FakeLambdaContext()) == {"statusCode": 200}

    def request(self, connection_id: str, type_: str, **data: Any) -> dict[str, Any]:
        """Send ``<type_>_request`` through ``$default``; returns the response's ``data``."""
        self._request_ids += 1
        request_id = f"req_aws_{self._request_ids}"
        self.send(connection_id, frame(type_, request_id, **data))
        (response,) = [
            f
            for c, f in self.posts
            if c == connection_id
            and f.get("data", {}).get("requestId") == request_id
            and f.get("category") == "response"
        ]
        return response["data"]

    def image(self, connection_id: str, model: str | None = None) -> dict[str, Any]:
        """A container and an image (with ``model``), and the caller subscribed to its session."""
        self.request(connection_id, "container_create", containerId="user-alice")
        config: dict[str, Any] = {"name": "Helper"}
        if model is not None:
            config["model"] = model
        record = self.request(connection_id, "image_create", containerId="user-alice", config=config)[
            "record"
        ]
        self.send(connection_id, {"type": "subscribe", "sessionId": record["sessionId"]})
        return record

    def frames(self, connection_id: str) -> list[dict[str, Any]]:
        return [f for c, f in self.posts if c == connection_id]

    def session_events(self, connection_id: str) -> list[dict[str, Any]]:
        return [f for f in self.frames(connection_id) if f.get("source") == "agent"]

    # -- the queue -------------------------------------------------------------------------------

    def receive(self) -> list[dict[str, Any]]:
        return self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])

    def sqs_event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """What Lambda's SQS event source mapping hands the function for received ``messages``."""
        return lambda_sqs_event(messages, self.queue_arn)

    def deliver(self, messages: list[dict[str, Any]], handler: Any = None) -> dict[str, Any]:
        """Hand ``messages`` to the worker; delete those it did not report failed (the ack)."""
        from tests.functions.conftest import FakeLambdaContext

        response = (handler or self.worker())(self.sqs_event(messages), FakeLambdaContext())
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
        return response

    def run_turns(self, handler: Any = None) -> None:
        """Deliver whatever is queued until the queue is empty (all turns acknowledged)."""
        while messages := self.receive():
            response = self.deliver(messages, handler)
            assert response == {"batchItemFailures": []}, response


def aws_host(models: ModelResolver, turns: TurnSettings = TURNS) -> Iterator[AwsHost]:
    """Call inside ``moto.mock_aws()``: the table and the FIFO queue, then the host."""
    DynamoDbStore(TABLE).create_table(wait=True)
    sqs = boto3.client("sqs", region_name="us-east-1")
    # A visibility timeout of 0: a message a worker failed (or never acknowledged) is at once
    # receivable again, as it would be after the timeout in SQS.
    url = sqs.create_queue(
        QueueName="agentvm-turns.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    yield AwsHost(sqs=sqs, queue_url=url, queue_arn=arn, models=models, turns=turns)


__all__ = ["ENDPOINT", "TABLE", "TURNS", "AwsHost", "GoneAwareClient", "aws_host", "frame"]
