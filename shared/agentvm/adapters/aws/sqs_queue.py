"""The ``TurnQueue`` port on an SQS FIFO queue: the AWS host's path from the gateway to the turn worker.

``MessageGroupId = sessionId``: FIFO delivers one message of a group at a time, in order, so the
turns of one session never overlap while different sessions run in parallel (worker concurrency is
bounded by the number of active groups). ``MessageDeduplicationId = jobKey`` (the turnId; for a
continuation of a suspended turn, turnId#what resumed it): SQS drops a second
send of the same turn within its 5-minute deduplication window, so a retried request or a gateway
retry enqueues the turn once (the worker is idempotent by turn id beyond that window).

The body is the ``TurnJob``'s JSON; ``job_from_body`` reads it back in the worker. A few fields are
repeated as message attributes so the worker can log and correlate before parsing the body.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agentvm.records import TurnJob

if TYPE_CHECKING:
    from collections.abc import Mapping

# The attributes sent with every job (all String).
ATTRIBUTES = ("turnId", "tenantId", "sessionId")


class SqsTurnQueue:
    """``agentvm.ports.TurnQueue`` on an SQS FIFO queue. ``client`` is a boto3 SQS client.

    boto3 is imported only when no client is injected, so importing this module stays cheap for
    the WebSocket handlers' cold start.
    """

    def __init__(self, queue_url: str, *, client: Any | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("sqs")
        self._client = client
        self.queue_url = queue_url

    async def enqueue(self, job: TurnJob) -> None:
        attributes: Mapping[str, dict[str, str]] = {
            name: {"DataType": "String", "StringValue": getattr(job, name)} for name in ATTRIBUTES
        }
        await asyncio.to_thread(
            self._client.send_message,
            QueueUrl=self.queue_url,
            MessageBody=job.model_dump_json(),
            MessageGroupId=job.sessionId,
            MessageDeduplicationId=dedup_id(job),
            MessageAttributes=attributes,
        )


def dedup_id(job: TurnJob) -> str:
    """``jobKey`` (the turn, or a continuation of it); a digest when over SQS's 128 characters."""
    key = job.jobKey
    if len(key) <= 128 and key.isascii():
        return key
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()


def job_from_body(body: str) -> TurnJob:
    """The ``TurnJob`` of an SQS record's body (raises ``pydantic.ValidationError`` if it is not one)."""
    return TurnJob.model_validate_json(body)


def lambda_sqs_event(
    messages: list[dict[str, Any]], queue_arn: str, region: str = "us-east-1"
) -> dict[str, Any]:
    """The event Lambda's SQS event source mapping hands a function for ``receive_message`` results.

    For tests and benchmarks that play the event source mapping on moto (it has none).
    """
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {
                    name: {
                        "stringValue": a.get("StringValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": a["DataType"],
                    }
                    for name, a in m.get("MessageAttributes", {}).items()
                },
                "md5OfMessageAttributes": m.get("MD5OfMessageAttributes"),
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


__all__ = ["ATTRIBUTES", "SqsTurnQueue", "job_from_body", "lambda_sqs_event"]
