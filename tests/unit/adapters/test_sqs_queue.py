"""``SqsTurnQueue`` on a moto SQS FIFO queue: body, group, deduplication, attributes, lazy boto3."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING, Any

import boto3
import pydantic
import pytest
from moto import mock_aws

from agentvm.adapters.aws.sqs_queue import SqsTurnQueue, job_from_body
from agentvm.records import TurnJob

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.aws


def job(turn_id: str = "turn_1", session_id: str = "ses_1") -> TurnJob:
    return TurnJob(
        turnId=turn_id,
        tenantId="tenant-a",
        containerId="user-alice",
        imageId="img_1",
        sessionId=session_id,
        agentId="agt_1",
        userMessageId=f"msg_{turn_id}",
        requestId=f"req_{turn_id}",
        enqueuedAt=1_700_000_000_000,
    )


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs")


@pytest.fixture
def queue_url(sqs: Any) -> str:
    # As in the template: FIFO, deduplication by explicit id only.
    created = sqs.create_queue(
        QueueName="turns.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    )
    return str(created["QueueUrl"])


def receive_all(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Receive (and delete) until the queue is empty; FIFO hands out a group's next message only
    after the previous one was deleted, so this also reads the order within each group."""
    received: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId"],
        ).get("Messages", [])
        if not batch:
            return received
        for message in batch:
            received.append(message)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


async def test_an_enqueued_job_round_trips_through_the_message_body(sqs: Any, queue_url: str) -> None:
    await SqsTurnQueue(queue_url, client=sqs).enqueue(job())

    (message,) = receive_all(sqs, queue_url)

    assert job_from_body(message["Body"]) == job()


async def test_the_group_is_the_session_and_the_deduplication_id_is_the_turn(
    sqs: Any, queue_url: str
) -> None:
    await SqsTurnQueue(queue_url, client=sqs).enqueue(job("turn_7", session_id="ses_9"))

    (message,) = receive_all(sqs, queue_url)

    assert message["Attributes"]["MessageGroupId"] == "ses_9"
    assert message["Attributes"]["MessageDeduplicationId"] == "turn_7"


async def test_message_attributes_carry_turn_tenant_and_session(sqs: Any, queue_url: str) -> None:
    await SqsTurnQueue(queue_url, client=sqs).enqueue(job("turn_7", session_id="ses_9"))

    (message,) = receive_all(sqs, queue_url)

    attributes = {name: a["StringValue"] for name, a in message["MessageAttributes"].items()}
    assert attributes == {"turnId": "turn_7", "tenantId": "tenant-a", "sessionId": "ses_9"}
    assert {a["DataType"] for a in message["MessageAttributes"].values()} == {"String"}


async def test_enqueueing_the_same_turn_twice_delivers_it_once(sqs: Any, queue_url: str) -> None:
    queue = SqsTurnQueue(queue_url, client=sqs)

    await queue.enqueue(job("turn_1"))
    await queue.enqueue(job("turn_1"))

    assert [job_from_body(m["Body"]).turnId for m in receive_all(sqs, queue_url)] == ["turn_1"]


async def test_turns_of_one_session_are_delivered_in_enqueue_order(sqs: Any, queue_url: str) -> None:
    queue = SqsTurnQueue(queue_url, client=sqs)
    for turn_id in ("turn_c", "turn_a", "turn_b"):
        await queue.enqueue(job(turn_id, session_id="ses_1"))
    await queue.enqueue(job("turn_x", session_id="ses_2"))

    delivered = [job_from_body(m["Body"]) for m in receive_all(sqs, queue_url)]

    assert [j.turnId for j in delivered if j.sessionId == "ses_1"] == ["turn_c", "turn_a", "turn_b"]
    assert [j.turnId for j in delivered if j.sessionId == "ses_2"] == ["turn_x"]


async def test_without_a_client_one_is_built_from_the_environment(sqs: Any, queue_url: str) -> None:
    await SqsTurnQueue(queue_url).enqueue(job())

    assert [job_from_body(m["Body"]) for m in receive_all(sqs, queue_url)] == [job()]


def test_a_body_that_is_not_a_turn_job_is_rejected() -> None:
    with pytest.raises(pydantic.ValidationError):
        job_from_body('{"turnId": "turn_1"}')


def test_importing_the_aws_adapters_for_the_ws_handlers_does_not_import_boto3() -> None:
    code = (
        "import sys, agentvm.adapters.aws.sqs_queue, agentvm.adapters.aws.apigw_push;"
        "print(sorted(m for m in ('boto3', 'botocore') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert out.strip() == "[]"
